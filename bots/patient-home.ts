import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  Bundle,
  ClientApplication,
  Organization,
  Patient,
  ProjectMembership,
  Reference,
} from '@medplum/fhirtypes';
import { EXTENSIONS, TENANT_PARAMETER } from '../contracts/systems';
import { absent } from './lib/absent';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type PatientHomeResult = BotResult<{ organization: string; patient: string }>;

/**
 * POST /v1/patient/home: puts a self-registered patient in their tenant. The tenant is decided
 * server-side, never from input: the Organization named by the tenant extension of the app the
 * registration session was issued to (the `client_id` of the caller's token, verified here). Once
 * homed, it is final. Idempotent: a repeat call with the same outcome changes nothing; a patient
 * already in another tenant is refused.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<PatientHomeResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'patient-home');
  if (!start.ok) {
    return start;
  }
  const { patientId, clientId } = start.caller;
  const client = clientId ? await medplum.readResource('ClientApplication', clientId).catch(absent) : undefined;
  const organization = tenantOf(client);
  if (!organization) {
    // The app the patient signed in with does not belong to a tenant: nothing to decide from.
    return fail(403, 'forbidden', 'This app is not a tenant app; registration must go through a tenant app');
  }
  const record = await medplum.readResource('Patient', patientId);
  const membership = await medplum.searchOne('ProjectMembership', { profile: `Patient/${patientId}` });
  if (!membership) {
    return fail(409, 'invalid_state', 'The patient has no project membership', { state: 'unregistered' });
  }
  const current = record.managingOrganization?.reference;
  if (current && current !== organization.reference) {
    return fail(409, 'invalid_state', 'The patient already belongs to another organization', { state: 'assigned' });
  }
  const result = { ok: true as const, organization: organization.reference as string, patient: `Patient/${patientId}` };
  if (current === organization.reference && hasTenantAccess(membership, organization)) {
    return result;
  }
  try {
    // The Patient's meta.accounts (its tenant) count because this bot is a project admin and
    // MedplumClient sends `X-Medplum: extended` by default (Medplum ignores accounts otherwise).
    await medplum.executeBatch(homeTransaction(record, membership, organization));
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // A concurrent call changed the patient or membership (If-Match): the same answer if it homed them here.
    const [now, nowMembership] = await Promise.all([
      medplum.readResource('Patient', patientId),
      medplum.searchOne('ProjectMembership', { profile: `Patient/${patientId}` }),
    ]);
    if (
      now.managingOrganization?.reference !== organization.reference ||
      !nowMembership ||
      !hasTenantAccess(nowMembership, organization)
    ) {
      return fail(409, 'invalid_state', 'The patient changed while being homed; try again', { state: 'conflict' });
    }
  }
  return result;
}

function tenantOf(client: ClientApplication | undefined): Reference<Organization> | undefined {
  const reference = client?.extension?.find((e) => e.url === EXTENSIONS.tenantOrganization)?.valueReference;
  return reference?.reference?.startsWith('Organization/')
    ? ({ reference: reference.reference } as Reference<Organization>)
    : undefined;
}

function hasTenantAccess(membership: ProjectMembership, organization: Reference): boolean {
  return (membership.access ?? []).some((a) =>
    a.parameter?.some((p) => p.name === TENANT_PARAMETER && p.valueReference?.reference === organization.reference),
  );
}

/** Both writes in ONE transaction, each guarded by If-Match: all or nothing, no lost update. */
function homeTransaction(
  patient: Patient,
  membership: ProjectMembership,
  organization: Reference<Organization>,
): Bundle {
  const policy = membership.accessPolicy ?? membership.access?.[0]?.policy;
  const updatedPatient: Patient = {
    ...patient,
    managingOrganization: organization,
    meta: { ...patient.meta, accounts: [organization] },
  };
  const updatedMembership: ProjectMembership = {
    ...membership,
    accessPolicy: undefined,
    access: [
      ...(membership.access ?? []).filter((a) => !a.parameter?.some((p) => p.name === TENANT_PARAMETER)),
      ...(policy ? [{ policy, parameter: [{ name: TENANT_PARAMETER, valueReference: organization }] }] : []),
    ],
  };
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [updatedPatient, updatedMembership].map((resource) => ({
      resource,
      request: {
        method: 'PUT' as const,
        url: `${resource.resourceType}/${resource.id}`,
        ifMatch: `W/"${resource.meta?.versionId}"`,
      },
    })),
  };
}
