import { EXTENSIONS, SYSTEMS } from '../../../contracts/systems';
import { WEBHOOK_RETRY_TICK_MINUTES } from '../../../contracts/webhook-rules';
import type { KeyedResource, PlatformBot, ProvisionDefinition, SubscriptionDefinition } from '../shape';

/** The tenants' webhooks (contracts/webhooks.ts): the bot that delivers them, and what wakes it. */

export const WEBHOOK_DELIVERIES = `Basic?code=${SYSTEMS.webhookDelivery}|pending,${SYSTEMS.webhookDelivery}|failed`;

export const webhooks: PlatformBot = {
  access: {
    key: 'bot-webhooks',
    policy: {
      name: 'Bot: webhooks',
      resource: [
        // The version of her task, visit or message it was told of, read by itself (never the delivery's copy).
        ...['Task', 'Appointment', 'Communication'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'vread' as const],
        })),
        // Her tenant where she is now (managingOrganization), and its endpoint.
        { resourceType: 'Patient', interaction: ['read'] },
        { resourceType: 'Organization', interaction: ['read'] },
        // The deliveries that failed and wait for their next try: kept, tried again, let go.
        {
          resourceType: 'Basic',
          criteria: WEBHOOK_DELIVERIES,
          interaction: ['create', 'read', 'search', 'update', 'delete'],
        },
      ],
    },
  },
  bot: {
    key: 'webhooks',
    description: `Delivers each event of a tenant's patients to the tenant's webhook endpoint, signed (Standard Webhooks); every ${WEBHOOK_RETRY_TICK_MINUTES} minutes, tries again the deliveries that failed, with backoff.`,
    accessPolicy: 'bot-webhooks',
    cronString: `*/${WEBHOOK_RETRY_TICK_MINUTES} * * * *`,
  },
};

/** The webhook endpoint a tenant's Organization names, if it takes webhooks. */
const webhookEndpointOf = (entry: KeyedResource): string | undefined =>
  entry.resource.resourceType === 'Organization'
    ? entry.resource.extension?.find((e) => e.url === EXTENSIONS.webhookEndpoint)?.valueUrl
    : undefined;

/** The tenant key of a tenant's Organization (its `SYSTEMS.tenant` identifier). */
const tenantKeyOf = (entry: KeyedResource): string | undefined =>
  entry.resource.resourceType === 'Organization'
    ? entry.resource.identifier?.find((i) => i.system === SYSTEMS.tenant)?.value
    : undefined;

/** Each tenant of a definition (its Organization's key and tenant key) and its webhook endpoint, if any. */
export function webhookTenants(
  definition: Pick<ProvisionDefinition, 'resources'>,
): { tenant: string; organization: string; endpoint?: string }[] {
  return definition.resources.flatMap((entry) => {
    const tenant = tenantKeyOf(entry);
    return tenant ? [{ tenant, organization: entry.key, endpoint: webhookEndpointOf(entry) }] : [];
  });
}

/** The environment variable provisioning reads a tenant's webhook secret from (`WEBHOOK_SECRET_<TENANT>`). */
export const webhookSecretEnv = (tenant: string): string => `WEBHOOK_SECRET_${tenantEnvName(tenant)}`;

/** A tenant key as an environment variable's name part (`northwind` -> `NORTHWIND`). */
export const tenantEnvName = (tenant: string): string => tenant.toUpperCase().replace(/[^A-Z0-9]+/g, '_');

const WOKEN_BY: { type: 'Task' | 'Appointment' | 'Communication'; interaction: 'create' | 'update' }[] = [
  { type: 'Task', interaction: 'create' },
  { type: 'Task', interaction: 'update' },
  { type: 'Appointment', interaction: 'create' },
  { type: 'Appointment', interaction: 'update' },
  // A message is sent once (a later version, a read receipt or an edit, is no new message).
  { type: 'Communication', interaction: 'create' },
];

const WHAT: Record<(typeof WOKEN_BY)[number]['type'], string> = {
  Task: 'tasks',
  Appointment: 'visits',
  Communication: 'messages',
};

/**
 * What wakes the webhooks bot for one tenant: each of its Tasks and Appointments written, each Communication created (Medplum files a
 * patient's records under her tenant: `_compartment` of its Organization), so a tenant without webhooks
 * costs no run at all. `key:` is the tenant Organization's provisioning key, resolved when applied.
 */
export function webhookSubscriptions(tenantKey: string, organizationKey: string): SubscriptionDefinition[] {
  return WOKEN_BY.map(({ type, interaction }) => ({
    key: `webhook-${tenantKey}-${type.toLowerCase()}-${interaction}`,
    bot: 'webhooks',
    criteria: `${type}?_compartment=key:${organizationKey}`,
    interaction,
    reason: `The webhook of tenant ${tenantKey}: its patients' ${WHAT[type]} (contracts/webhooks.ts)`,
  }));
}
