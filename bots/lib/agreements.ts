import type { MedplumClient } from '@medplum/core';
import type {
  Bundle,
  CarePlan,
  Consent,
  DocumentReference,
  HealthcareService,
  Patient,
  PlanDefinition,
  Resource,
  Task,
} from '@medplum/fhirtypes';
import { CATALOG, EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import {
  type AgreementRequirement,
  type AgreementVersion,
  jurisdictionOf,
  parseAgreement,
  resolveRequirements,
} from './agreement-rules';
import { fail } from './result';
import { searchAll } from './search';

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

/**
 * Every published agreement version, read whole once per call: the latest version of an agreement
 * is decided here, so a page that dropped the newest would ask for an old one. Narrowed to
 * agreement documents published as the catalog (what the bots' policy entries also allow).
 */
export async function publishedAgreements(
  medplum: MedplumClient,
): Promise<{ doc: DocumentReference; agreement: AgreementVersion }[]> {
  const docs = await searchAll(medplum, 'DocumentReference', {
    identifier: `${SYSTEMS.agreement}|`,
    _tag: [CATALOG.platform, CATALOG.tenant].map((code) => `${CATALOG.system}|${code}`).join(','),
  });
  return docs.flatMap((doc) => {
    const agreement = parseAgreement(doc);
    // Only documents published as the catalog (tags only provisioning writes), whose custodian is the
    // tenant the server stamped on them: nobody publishes an agreement into another tenant.
    return agreement && isPublishedTo(doc, agreement.organization) ? [{ doc, agreement }] : [];
  });
}

export async function activeAcceptances(medplum: MedplumClient, patientId: string): Promise<Consent[]> {
  return searchAll(medplum, 'Consent', { patient: `Patient/${patientId}`, status: 'active' });
}

/**
 * The spec's "Requirement resolution rules" for one patient and context (see agreement-rules.ts).
 * Undefined when the context names something that is not the patient's own: the caller gets the
 * same 404 as for something that does not exist (DESIGN section 7: no existence leak).
 */
export async function patientAgreements(
  medplum: MedplumClient,
  patientId: string,
  context: AgreementContext = {},
  /**
   * Where the catalog's part comes from, given her tenant (the published agreements, a service entered,
   * the agreements a plan attaches): by default read now with `medplum` (the bots' gate always reads
   * fresh); the gateway passes short-lived copies of what her tenant's patients may read
   * (src/medplum/catalog-cache.ts).
   */
  catalogFor?: (organization: string | undefined) => AgreementCatalog,
): Promise<PatientAgreements | undefined> {
  const fresh = catalogFor ? undefined : freshCatalog(medplum);
  const [patient, freshPublished, activeConsents, freshEntered] = await Promise.all([
    medplum.readResource('Patient', patientId),
    fresh?.published(),
    activeAcceptances(medplum, patientId),
    fresh ? readContext(medplum, context, fresh) : undefined,
  ]);
  const organization = patient.managingOrganization?.reference;
  const catalog = fresh ?? (catalogFor as NonNullable<typeof catalogFor>)(organization);
  const [publishedNow, entered] = fresh
    ? [freshPublished ?? [], freshEntered]
    : await Promise.all([catalog.published(), readContext(medplum, context, catalog)]);
  if (!entered || !ownsContext(entered, patientId, organization)) {
    return undefined;
  }
  const attachedUrls = (await Promise.all(entered.canonicals.map((c) => catalog.attached(c)))).flat();
  const address = patient.address?.[0];
  const jurisdiction = jurisdictionOf(address?.country, address?.state);
  const applicable = publishedNow
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

/** The 404 a workflow answers for a context that is not the patient's own (or does not exist). */
export const contextNotFound = () => fail(404, 'not_found', 'Not found');

/**
 * The gate every workflow bot calls before it changes anything (spec rule 5: a refused call changes
 * nothing, so a retry after acceptance is safe). Undefined when the patient may proceed.
 */
export async function requireAgreements(medplum: MedplumClient, patientId: string, context: AgreementContext) {
  const state = await patientAgreements(medplum, patientId, context);
  if (!state) {
    return contextNotFound();
  }
  if (state.unmet.length === 0) {
    return undefined;
  }
  return fail(409, 'consent_required', 'Required agreements have not been accepted', { agreements: state.unmet });
}

interface EnteredContext {
  service?: HealthcareService;
  carePlan?: CarePlan;
  task?: Task;
  /** Plan canonicals (`url|version`) whose attached agreements apply. */
  canonicals: string[];
}

/** The catalog's part of a requirements check (see patientAgreements). */
export interface AgreementCatalog {
  published(): Promise<{ doc: DocumentReference; agreement: AgreementVersion }[]>;
  service(reference: string): Promise<HealthcareService | undefined>;
  /** The agreement urls a plan (`url|version`, or a url) attaches. */
  attached(canonical: string): Promise<string[]>;
}

/** The catalog as it is now, read with `medplum`. */
export const freshCatalog = (medplum: MedplumClient): AgreementCatalog => ({
  published: () => publishedAgreements(medplum),
  service: (reference) => readOrUndefined<HealthcareService>(medplum, reference),
  attached: (canonical) => attachedAgreementUrls(medplum, [canonical]),
});

/** Reads what the context names; undefined when a named item does not exist. */
async function readContext(
  medplum: MedplumClient,
  context: AgreementContext,
  catalog: AgreementCatalog,
): Promise<EnteredContext | undefined> {
  const entered: EnteredContext = { canonicals: context.protocol ? [context.protocol] : [] };
  if (context.healthcareService) {
    entered.service = await catalog.service(context.healthcareService);
    const fronts = entered.service?.extension?.find((e) => e.url === EXTENSIONS.frontsPlan)?.valueCanonical;
    if (!entered.service) {
      return undefined;
    }
    if (fronts) {
      entered.canonicals.push(fronts);
    }
  }
  let carePlanRef = context.carePlan;
  if (context.task) {
    entered.task = await readOrUndefined<Task>(medplum, context.task);
    if (!entered.task) {
      return undefined;
    }
    carePlanRef ??= entered.task.basedOn?.find((b) => b.reference?.startsWith('CarePlan/'))?.reference;
  }
  if (carePlanRef) {
    entered.carePlan = await readOrUndefined<CarePlan>(medplum, carePlanRef);
    if (!entered.carePlan) {
      return undefined;
    }
    entered.canonicals.push(...(entered.carePlan.instantiatesCanonical ?? []));
  }
  return entered;
}

/**
 * The patient's own: a care plan or task of theirs, a service their tenant (or the platform)
 * publishes. The bot can read more than the patient may, so it checks what the patient's policy would.
 */
function ownsContext(entered: EnteredContext, patientId: string, organization: string | undefined): boolean {
  const patient = `Patient/${patientId}`;
  if (entered.carePlan && entered.carePlan.subject?.reference !== patient) {
    return false;
  }
  if (entered.task && entered.task.for?.reference !== patient) {
    return false;
  }
  return !entered.service || isPublishedTo(entered.service, organization);
}

/** A catalog item published to this tenant's patients (tenant tag and account) or to every tenant. */
export function isPublishedTo(resource: Resource, organization: string | undefined): boolean {
  const tags = resource.meta?.tag ?? [];
  const tagged = (code: string) => tags.some((t) => t.system === CATALOG.system && t.code === code);
  if (tagged(CATALOG.platform)) {
    return true;
  }
  return (
    tagged(CATALOG.tenant) &&
    organization !== undefined &&
    (resource.meta?.accounts ?? []).some((a) => a.reference === organization)
  );
}

/** Agreements attached to what is being entered: PlanDefinition.relatedArtifact (depends-on, label agreement). */
async function attachedAgreementUrls(medplum: MedplumClient, canonicals: string[]): Promise<string[]> {
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
  return (await medplum.readResource(type as 'Patient', id).catch(absent)) as T | undefined;
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
