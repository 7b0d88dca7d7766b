import { EXTENSIONS, SYSTEMS } from '../../../contracts/systems';
import {
  WEBHOOK_DELIVERED_KEPT_HOURS,
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_OPERATIONS,
  WEBHOOK_RETRY_TICK_MINUTES,
} from '../../../contracts/webhook-rules';
import { CLIENT_SECRETS } from '../policies/common';
import type { KeyedResource, PlatformBot, ProvisionDefinition, SubscriptionDefinition } from '../shape';

/** The tenants' webhooks (contracts/webhooks.ts): the bot that delivers them, and what wakes it. */

/** The webhooks bot's kept deliveries, whatever they stand at (a tenant's delivery log: docs/webhooks.md). */
export const WEBHOOK_DELIVERIES = `Basic?code=${WEBHOOK_DELIVERY_STATUSES.map((status) => `${SYSTEMS.webhookDelivery}|${status}`).join(',')}`;

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
        // The deliveries that failed and wait for their next try: kept, tried again, kept as delivered, let go.
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
    description: `Delivers each event of a tenant's patients to the tenant's webhook endpoint, signed (Standard Webhooks); every ${WEBHOOK_RETRY_TICK_MINUTES} minutes, tries again the deliveries that failed, with backoff, and lets go those delivered more than ${WEBHOOK_DELIVERED_KEPT_HOURS} hours ago.`,
    accessPolicy: 'bot-webhooks',
    cronString: `*/${WEBHOOK_RETRY_TICK_MINUTES} * * * *`,
  },
};

/**
 * What both of a tenant backend's webhook operations read: who runs them (its ClientApplication, re-read
 * for provisioning's tag, never its secret), its tenant's Organization (by identifier) with its endpoint,
 * and its own runs as Medplum records them (the budget a minute, bots/lib/budget.ts).
 */
const BACKEND_CALLER_READS = [
  { resourceType: 'ClientApplication', interaction: ['read' as const], hiddenFields: CLIENT_SECRETS },
  { resourceType: 'Organization', interaction: ['read' as const, 'search' as const] },
  { resourceType: 'AuditEvent', interaction: ['search' as const] },
];

/** A tenant backend's test event to its own endpoint (bots/webhook-test.ts): it writes nothing. */
export const webhookTest: PlatformBot = {
  access: { key: 'bot-webhook-test', policy: { name: 'Bot: webhook test', resource: BACKEND_CALLER_READS } },
  bot: {
    key: WEBHOOK_OPERATIONS.test.bot,
    description: `A tenant backend's test of its webhook endpoint: one signed webhook.test event, its outcome answered (at most ${WEBHOOK_OPERATIONS.test.perMinute} a minute).`,
    accessPolicy: 'bot-webhook-test',
  },
};

/** A tenant backend's replay of one of its kept deliveries (bots/webhook-replay.ts). */
export const webhookReplay: PlatformBot = {
  access: {
    key: 'bot-webhook-replay',
    policy: {
      name: 'Bot: webhook replay',
      resource: [
        ...BACKEND_CALLER_READS,
        // The kept delivery it tries: found and recorded, never created or let go.
        { resourceType: 'Basic', criteria: WEBHOOK_DELIVERIES, interaction: ['read', 'search', 'update'] },
      ],
    },
  },
  bot: {
    key: WEBHOOK_OPERATIONS.replay.bot,
    description: `A tenant backend's replay of a kept webhook delivery of its tenant, tried at once with the same id (at most ${WEBHOOK_OPERATIONS.replay.perMinute} a minute).`,
    accessPolicy: 'bot-webhook-replay',
  },
};

/** The bots a tenant's backend may find and execute (its policy reads them, never their code). */
export const BACKEND_BOTS = `Bot?identifier=${[WEBHOOK_OPERATIONS.test.bot, WEBHOOK_OPERATIONS.replay.bot]
  .map((key) => `${SYSTEMS.bots}|${key}`)
  .join(',')}`;

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
