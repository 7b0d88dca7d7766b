import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { inTenant } from './common';
import { PATIENT_READONLY_TYPES, TENANT_DIRECTORY_TYPES } from './patient';

/**
 * A tenant's backend (issue 51 item 1; a clinic file's `backends`): a machine client of the tenant's own
 * server, signing in with client credentials, that reads what its webhooks name. It reads, for every patient
 * of its tenant, what each of them reads of her own record (her Patient and her chart, the tenant's
 * directory), and nothing of another tenant (`%organization`, its tenant, in every entry). It writes
 * nothing and runs no bot (it reads no Bot). Not hers to read through it: her messages and her visits'
 * notes (between her and her care team: the webhook says a message came, her app reads it with her token),
 * her uploads' bytes (Binary), anyone's access log.
 */
export function tenantBackendPolicy(): AccessPolicyResource[] {
  return [
    { resourceType: 'Patient', criteria: inTenant('Patient'), readonly: true },
    ...[...PATIENT_READONLY_TYPES, ...TENANT_DIRECTORY_TYPES].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
  ];
}
