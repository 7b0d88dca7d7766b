import type { MedplumClient } from '@medplum/core';
import type {
  Bundle,
  CarePlan,
  Consent,
  DocumentReference,
  HealthcareService,
  Patient,
  PlanDefinition,
  Task,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import {
  type AgreementRequirement,
  type AgreementVersion,
  jurisdictionOf,
  parseAgreement,
  resolveRequirements,
} from './agreement-rules';
import { fail } from './result';

/** What is being entered: the spec's optional context of the requirements check. */
export interface AgreementContext {
  healthcareService?: string;
  carePlan?: string;
  task?: string;
  /** A protocol or assessment canonical, `url|version`. */
  protocol?: string;
}

export interface PatientAgreements {
  patient: Patient;
  organization: string | undefined;
  jurisdiction: string | undefined;
  /** Every agreement version this patient may be asked to accept (platform and own tenant, own place). */
  applicable: AgreementVersion[];
  required: AgreementVersion[];
  unmet: AgreementRequirement[];
  activeConsents: Consent[];
}

/** Everything published, read once per call (agreement documents are a small catalog). */
export async function publishedAgreements(
  medplum: MedplumClient,
): Promise<{ doc: DocumentReference; agreement: AgreementVersion }[]> {
  const docs = await medplum.searchResources('DocumentReference', {
    identifier: `${SYSTEMS.agreement}|`,
    _count: '1000',
  });
  return docs.flatMap((doc) => {
    const agreement = parseAgreement(doc);
    return agreement ? [{ doc, agreement }] : [];
  });
}

export async function activeAcceptances(medplum: MedplumClient, patientId: string): Promise<Consent[]> {
  return medplum.searchResources('Consent', { patient: `Patient/${patientId}`, status: 'active', _count: '1000' });
}

/** The spec's "Requirement resolution rules" for one patient and context (see agreement-rules.ts). */
export async function patientAgreements(
  medplum: MedplumClient,
  patientId: string,
  context: AgreementContext = {},
): Promise<PatientAgreements> {
  const [patient, published, activeConsents, attachedUrls] = await Promise.all([
    medplum.readResource('Patient', patientId),
    publishedAgreements(medplum),
    activeAcceptances(medplum, patientId),
    attachedAgreementUrls(medplum, context),
  ]);
  const organization = patient.managingOrganization?.reference;
  const address = patient.address?.[0];
  const jurisdiction = jurisdictionOf(address?.country, address?.state);
  const applicable = published
    .map((p) => p.agreement)
    .filter(
      (a) =>
        (!a.organization || a.organization === organization) && (!a.jurisdiction || a.jurisdiction === jurisdiction),
    );
  const accepted = new Set(activeConsents.flatMap((c) => (c.policy ?? []).map((p) => p.uri ?? '')));
  const { required, unmet } = resolveRequirements({
    agreements: applicable,
    organization,
    jurisdiction,
    attachedUrls,
    accepted,
  });
  return { patient, organization, jurisdiction, applicable, required, unmet, activeConsents };
}

/**
 * The gate every workflow bot calls before it changes anything (spec rule 5: a refused call changes
 * nothing, so a retry after acceptance is safe). Undefined when the patient may proceed.
 */
export async function requireAgreements(medplum: MedplumClient, patientId: string, context: AgreementContext) {
  const { unmet } = await patientAgreements(medplum, patientId, context);
  if (unmet.length === 0) {
    return undefined;
  }
  return fail(409, 'consent_required', 'Required agreements have not been accepted', { agreements: unmet });
}

/** Agreements attached to what is being entered: PlanDefinition.relatedArtifact (depends-on, label agreement). */
async function attachedAgreementUrls(medplum: MedplumClient, context: AgreementContext): Promise<string[]> {
  const canonicals: string[] = [];
  if (context.protocol) {
    canonicals.push(context.protocol);
  }
  if (context.healthcareService) {
    const service = await readOrUndefined<HealthcareService>(medplum, context.healthcareService);
    const fronts = service?.extension?.find((e) => e.url === EXTENSIONS.frontsPlan)?.valueCanonical;
    if (fronts) {
      canonicals.push(fronts);
    }
  }
  let carePlanRef = context.carePlan;
  if (context.task) {
    const task = await readOrUndefined<Task>(medplum, context.task);
    carePlanRef ??= task?.basedOn?.find((b) => b.reference?.startsWith('CarePlan/'))?.reference;
  }
  if (carePlanRef) {
    const carePlan = await readOrUndefined<CarePlan>(medplum, carePlanRef);
    canonicals.push(...(carePlan?.instantiatesCanonical ?? []));
  }
  const urls: string[] = [];
  for (const canonical of canonicals) {
    const [url, version] = canonical.split('|');
    const plans = await medplum.searchResources('PlanDefinition', version ? { url, version } : { url });
    for (const plan of plans as PlanDefinition[]) {
      for (const artifact of plan.relatedArtifact ?? []) {
        if (artifact.type === 'depends-on' && artifact.label === 'agreement' && artifact.resource) {
          urls.push(artifact.resource.split('|')[0]);
        }
      }
    }
  }
  return urls;
}

async function readOrUndefined<T>(medplum: MedplumClient, reference: string): Promise<T | undefined> {
  const [type, id] = reference.split('/');
  if (!type || !id) {
    return undefined;
  }
  return (await medplum.readResource(type as 'Patient', id).catch(() => undefined)) as T | undefined;
}

/** The idempotency key of one acceptance (Consent.identifier): no `|` or `,`, which FHIR search splits on. */
export const acceptanceKey = (patientId: string, a: { url: string; version: string }): string =>
  `Patient/${patientId};${a.url};${a.version}`;

/**
 * Withdrawal and opt-out: the acceptances become `inactive` (kept, proof untouched) in ONE
 * transaction, each guarded by If-Match so a concurrent change is never overwritten.
 */
export async function inactivateConsents(medplum: MedplumClient, consents: Consent[]): Promise<void> {
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: consents.map((consent) => ({
      resource: { ...consent, status: 'inactive' } as Consent,
      request: { method: 'PUT' as const, url: `Consent/${consent.id}`, ifMatch: `W/"${consent.meta?.versionId}"` },
    })),
  };
  await medplum.executeBatch(bundle);
}
