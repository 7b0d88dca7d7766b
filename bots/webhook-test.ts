import { randomUUID } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import { WEBHOOK_OPERATIONS, WEBHOOK_TEST_EVENT_TYPE } from '../contracts/webhook-rules';
import type { WebhookTestEvent } from '../contracts/webhooks';
import { tenantBackendWithin } from './lib/budget';
import { readInput } from './lib/input';
import { fail } from './lib/result';
import { delivered, postSigned, tenantWebhook } from './lib/webhooks';

/**
 * A tenant backend's test of its webhook endpoint (docs/webhooks.md): one `webhook.test` event, signed as
 * every event with its tenant's secret, POSTed once to its tenant's endpoint; answered with how the
 * endpoint answered. Nothing is kept: a test that fails is not tried again. Only a tenant's backend runs
 * it (bots/lib/trust.ts `requireTenantBackend`: the tenant is the requester's, never the input's), at most
 * WEBHOOK_OPERATIONS.test.perMinute times a minute, so no backend floods an endpoint through the platform.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('webhook-test', event.input);
  if (!input.ok) {
    return input;
  }
  const { perMinute } = WEBHOOK_OPERATIONS.test;
  const backend = await tenantBackendWithin(medplum, event, perMinute, `At most ${perMinute} test events a minute`);
  if (!backend.ok) {
    return backend;
  }
  const webhook = tenantWebhook(backend.caller.tenant, event.secrets);
  if (!webhook) {
    return fail(404, 'not_found', 'Your tenant takes no webhooks (no endpoint, or no signing secret, provisioned)');
  }
  const now = new Date();
  const id = `webhook-test/${randomUUID()}`;
  const body: WebhookTestEvent = {
    type: WEBHOOK_TEST_EVENT_TYPE,
    timestamp: now.toISOString(),
    data: { id, type: WEBHOOK_TEST_EVENT_TYPE, occurredAt: now.toISOString() },
  };
  const outcome = await postSigned(webhook.endpoint, webhook.secrets, id, JSON.stringify(body), now);
  return { ok: true, eventId: id, delivered: delivered(outcome), outcome };
}
