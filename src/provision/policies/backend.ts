import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { TENANT_PARAMETER } from '../../../contracts/systems';
import { BACKEND_BOTS, WEBHOOK_DELIVERIES } from '../bots/webhooks';
import { BOT_CODE } from './bots';
import { inTenant } from './common';
import { PATIENT_READONLY_TYPES, TENANT_DIRECTORY_TYPES } from './patient';

/**
 * A tenant's backend (issue 51 item 1; a clinic file's `backends`): a machine client of the tenant's own
 * server, signing in with client credentials, that reads what its webhooks name. It reads, for every patient
 * of its tenant, what each of them reads of her own record (her Patient and her chart, the tenant's
 * directory), and nothing of another tenant (`%organization`, its tenant, in every entry). It writes
 * nothing. Not hers to read through it: her messages and her visits' notes (between her and her care team:
 * the webhook says a message came, her app reads it with her token), her uploads' bytes (Binary), anyone's
 * access log.
 *
 * Its webhook's operations (issue 51 item 4, docs/webhooks.md): it reads its tenant's delivery log (the
 * webhooks bot's kept deliveries whose subject is its tenant: no other Basic, no other tenant's), and it
 * finds and runs the two bots of its webhook, a test event and a replay, and no other bot. Those bots
 * find its tenant from who called them, never from what it sends.
 */
export function tenantBackendPolicy(): AccessPolicyResource[] {
  return [
    { resourceType: 'Patient', criteria: inTenant('Patient'), readonly: true },
    ...[...PATIENT_READONLY_TYPES, ...TENANT_DIRECTORY_TYPES].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
    {
      resourceType: 'Basic',
      criteria: `${WEBHOOK_DELIVERIES}&subject=%${TENANT_PARAMETER}`,
      interaction: ['read', 'search'],
    },
    { resourceType: 'Bot', criteria: BACKEND_BOTS, interaction: ['read', 'search'], hiddenFields: BOT_CODE },
  ];
}
