import type { MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  MedicationRequest,
  Patient,
  PlanDefinition,
  ServiceRequest,
} from '@medplum/fhirtypes';
import { CATALOG, SYSTEMS } from '../../contracts/systems';
import { isPublishedTo } from './agreements';
import { availableWhereSheLives, frontedCanonical, planTypeOf } from './catalog';
import { publishedDefinition } from './journey';
import { fail } from './result';
import { searchAll } from './search';

/**
 * A patient's request for review (`POST /v1/requests`): what she asks for, as a proposal keyed by her and
 * the item, and her open request for it. The request-review bot makes requests with these; the gateway
 * answers the same open request again from her own reads with them (src/medplum/finished-work.ts, issue
 * 27). No Node built-in here: the gateway also runs as a Worker.
 */

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

export type Proposal = MedicationRequest | ServiceRequest;

export type Resolved = { ok: true; proposal: Proposal; key: string } | ReturnType<typeof fail>;

/** What the patient asks for, as a proposal; a catalog item must be one her catalog offers her. */
export async function proposalFor(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  input: { medication?: string; treatmentOption?: string; protocol?: string },
): Promise<Resolved> {
  const organization = patient.managingOrganization?.reference;
  const keyOf = (kind: string, item: string) => `Patient/${patient.id};${kind};${item.replace('|', ';')}`;
  if (input.medication) {
    const code = input.medication.split('|')[1];
    return {
      ok: true,
      key: keyOf('medication', input.medication),
      proposal: {
        resourceType: 'MedicationRequest',
        medicationCodeableConcept: { coding: [{ system: RXNORM, code }] },
      } as MedicationRequest,
    };
  }
  if (input.treatmentOption) {
    const option = await publishedDefinition<ActivityDefinition>(
      medplum,
      'ActivityDefinition',
      input.treatmentOption,
      organization,
    );
    if (option?.status !== 'active' || option.kind !== 'MedicationRequest' || !option.productCodeableConcept) {
      return notOffered('treatmentOption', input.treatmentOption);
    }
    return {
      ok: true,
      key: keyOf('treatment-option', input.treatmentOption),
      proposal: {
        resourceType: 'MedicationRequest',
        instantiatesCanonical: [input.treatmentOption],
        medicationCodeableConcept: option.productCodeableConcept,
      } as MedicationRequest,
    };
  }
  const canonical = input.protocol as string;
  const plan = await offeredProtocol(medplum, patient, canonical);
  if (!plan) {
    return notOffered('protocol', canonical);
  }
  return {
    ok: true,
    key: keyOf('protocol', canonical),
    proposal: {
      resourceType: 'ServiceRequest',
      instantiatesCanonical: [canonical],
      code: { text: plan.title ?? plan.name ?? canonical },
    } as ServiceRequest,
  };
}

/**
 * A protocol is requestable when `GET /v1/protocols` lists it to her: an active offering published to her
 * tenant, available where she lives, fronting this active protocol or program.
 */
async function offeredProtocol(
  medplum: MedplumClient,
  patient: Patient,
  canonical: string,
): Promise<PlanDefinition | undefined> {
  const organization = patient.managingOrganization?.reference;
  const plan = await publishedDefinition<PlanDefinition>(medplum, 'PlanDefinition', canonical, organization);
  const type = plan ? planTypeOf(plan) : undefined;
  if (plan?.status !== 'active' || (type !== 'clinical-protocol' && type !== 'program')) {
    return undefined;
  }
  const services = (
    await Promise.all(
      [CATALOG.tenant, CATALOG.platform].map((code) =>
        searchAll(medplum, 'HealthcareService', { _tag: `${CATALOG.system}|${code}`, active: 'true' }),
      ),
    )
  )
    .flat()
    .filter((s) => frontedCanonical(s) === canonical && isPublishedTo(s, organization));
  for (const service of services) {
    if (await availableWhereSheLives(medplum, service, patient)) {
      return plan;
    }
  }
  return undefined;
}

/** Her open request for this item and its review task, if there is one. */
export async function openRequest(
  medplum: MedplumClient,
  resourceType: Proposal['resourceType'],
  key: string,
  patientId: string,
): Promise<{ request: string; task: string } | undefined> {
  const identifier = `${SYSTEMS.patientRequest}|${key}`;
  const [proposal] = (await medplum.searchResources(
    resourceType,
    { identifier, status: 'active' },
    { cache: 'no-cache' },
  )) as Proposal[];
  if (!proposal || proposal.subject?.reference !== `Patient/${patientId}`) {
    return undefined;
  }
  const [task] = await medplum.searchResources(
    'Task',
    { identifier, focus: `${resourceType}/${proposal.id}` },
    { cache: 'no-cache' },
  );
  return task ? { request: `${resourceType}/${proposal.id}`, task: `Task/${task.id}` } : undefined;
}

const notOffered = (path: string, value: string) =>
  fail(400, 'invalid_request', 'This is not offered to you', {
    issues: [{ path, message: `${value} is not in your catalog` }],
  });
