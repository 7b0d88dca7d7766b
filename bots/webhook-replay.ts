import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Basic } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { WEBHOOK_OPERATIONS } from '../contracts/webhook-rules';
import { absent } from './lib/absent';
import { tenantBackendWithin } from './lib/budget';
import { readInput } from './lib/input';
import { fail } from './lib/result';
import { deliveryStatus, postSigned, readPending, recordTry, tenantWebhook } from './lib/webhooks';

/**
 * A tenant backend's replay of one kept delivery (docs/webhooks.md): a `pending` or `failed` delivery of
 * its tenant, by its event id, tried at once with the same `webhook-id` and body (a new timestamp and
 * signature, as every try), and recorded as the schedule records a try (bots/lib/webhooks.ts `recordTry`):
 * delivered, it is `delivered`; not, it keeps its status and next try with this outcome as its last.
 * Only a tenant's backend runs it (the tenant is the requester's, never the input's); another tenant's
 * delivery is answered as one that does not exist. At most WEBHOOK_OPERATIONS.replay.perMinute a minute.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('webhook-replay', event.input);
  if (!input.ok) {
    return input;
  }
  const { perMinute } = WEBHOOK_OPERATIONS.replay;
  const backend = await tenantBackendWithin(medplum, event, perMinute, `At most ${perMinute} replays a minute`);
  if (!backend.ok) {
    return backend;
  }
  const tenant = `Organization/${backend.caller.tenant.id}`;
  const { eventId } = input.value;
  const record = (await medplum
    .searchOne('Basic', {
      identifier: `${SYSTEMS.webhookDelivery}|${eventId}`,
      subject: tenant,
      code: `${SYSTEMS.webhookDelivery}|pending,${SYSTEMS.webhookDelivery}|failed,${SYSTEMS.webhookDelivery}|delivered`,
    })
    .catch(absent)) as (Basic & { id: string }) | undefined;
  const pending = record ? readPending(record) : undefined;
  // Only what the webhooks bot kept (a version a Bot wrote, as Medplum stamps it), of this tenant.
  if (!record || !pending || pending.tenant !== tenant || !record.meta?.author?.reference?.startsWith('Bot/')) {
    return fail(404, 'not_found', 'No kept delivery of your tenant has this event id');
  }
  if (deliveryStatus(record) === 'delivered') {
    return fail(409, 'invalid_state', 'This delivery was delivered already', { eventId });
  }
  const webhook = tenantWebhook(backend.caller.tenant, event.secrets);
  const now = new Date();
  const outcome = webhook
    ? await postSigned(webhook.endpoint, webhook.secrets, pending.eventId, pending.payload, now)
    : 'unreachable';
  const stands = await recordTry(medplum, record, pending, outcome, now, 'replay');
  return { ok: true, eventId, delivered: stands.status === 'delivered', outcome, ...stands };
}
