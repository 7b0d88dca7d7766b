import { z } from '@hono/zod-openapi';
import { EVENT_TYPES } from './events';

/**
 * Webhooks for a tenant's patient-app backend: every event of the tenant's patients (her feed's events,
 * contracts/events.ts, with the same ids) POSTed to the endpoint the operator set for the tenant, signed
 * as Standard Webhooks (https://www.standardwebhooks.com/) sign: `webhook-id` (the event id: a receiver
 * deduplicates by it), `webhook-timestamp` (seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of
 * "<id>.<timestamp>.<body>">` under the tenant's secret). Delivered by bots/webhooks.ts, woken by
 * Medplum's own Subscriptions; a failed delivery is tried again with backoff (WEBHOOK_RETRY_MINUTES).
 */

/** Agreements are the tenant's, not one patient's: their changes are not delivered (the feed has them). */
export const WEBHOOK_EVENT_TYPES = EVENT_TYPES.filter((type) => type !== 'agreements.changed') as Exclude<
  (typeof EVENT_TYPES)[number],
  'agreements.changed'
>[];

/**
 * Minutes from a failed try to the next: 8 tries over about 46 hours, then the delivery is kept as
 * `failed` for the operator. Tries are made by the bot's own schedule, every WEBHOOK_RETRY_TICK_MINUTES,
 * so each wait is at least what it says and at most one tick more.
 */
export const WEBHOOK_RETRY_MINUTES = [5, 15, 60, 180, 360, 720, 1440] as const;
export const WEBHOOK_RETRY_TICK_MINUTES = 5;
/** How long one delivery waits for the receiver's answer. */
export const WEBHOOK_TIMEOUT_MS = 5_000;

/** The Project secret holding a tenant's signing secret (`whsec_<base64>`), by the tenant's key. */
export const webhookSecretName = (tenantKey: string): string => `webhook-secret-${tenantKey}`;

/** A signing secret as Standard Webhooks writes one: `whsec_` and base64 of 24 to 64 random bytes. */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/;

/**
 * Where a tenant's events may go: https, or http to this machine only (a receiver beside Medplum, as in
 * tests). No credentials in the URL (they would sit in the Organization for every reader of it).
 */
export function allowedWebhookEndpoint(text: string): boolean {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return false;
  }
  const loopback = url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
  return (url.protocol === 'https:' || (url.protocol === 'http:' && loopback)) && !url.username && !url.password;
}

export const WebhookEventSchema = z
  .object({
    type: z.enum(WEBHOOK_EVENT_TYPES),
    timestamp: z.string().openapi({ description: 'When the change was recorded (the same as `data.occurredAt`).' }),
    data: z
      .object({
        id: z.string().openapi({
          description: 'The event, as her feed names it (`GET /v1/events`); also the `webhook-id` header.',
          example: 'Task/2b1c…/_history/9f3e…',
        }),
        type: z.enum(WEBHOOK_EVENT_TYPES),
        occurredAt: z.string(),
        subject: z.string().openapi({
          description: 'What changed, to read with her token (`Task/…`, `Appointment/…`).',
          example: 'Appointment/5d2e…',
        }),
        patient: z.string().openapi({ description: 'Whose event it is: `Patient/<id>`.', example: 'Patient/8a7c…' }),
      })
      .strict(),
  })
  .strict()
  .openapi('WebhookEvent');

export type WebhookEvent = z.infer<typeof WebhookEventSchema>;

export const WEBHOOK_DESCRIPTION = [
  "Every event of the tenant's patients, POSTed to the endpoint its operator set (provisioning: the",
  'tenant’s `webhook`), with the Standard Webhooks headers: `webhook-id` (the event id, the same as in',
  'her feed: deduplicate by it, a delivery can come more than once), `webhook-timestamp` (Unix seconds)',
  'and `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`',
  'keyed with the base64-decoded part of the tenant’s `whsec_` secret). Check the signature, and refuse a',
  'timestamp more than 5 minutes away. The body holds ids, never her record: read what changed with her',
  `token. Answer 2xx within ${WEBHOOK_TIMEOUT_MS / 1000} s; anything else is tried again after`,
  `${WEBHOOK_RETRY_MINUTES.join(', ')} minutes (each retry has the same id and a new timestamp and signature),`,
  'then kept as failed for the operator. Events come in about the order they happened, not exactly: order',
  "them by `occurredAt`. Her agreements' changes are not delivered (they are the tenant's, in her feed).",
].join(' ');
