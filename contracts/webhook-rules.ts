import { EVENT_TYPES } from './event-types';

/**
 * Webhooks for a tenant's patient-app backend (the rules; the payload's schema is contracts/webhooks.ts): every event of the tenant's patients (her feed's events,
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

/**
 * A tenant backend's operations on its own webhook (docs/webhooks.md): the bots it may execute, by key
 * (`Bot/$execute?identifier=<SYSTEMS.bots>|<key>`), and how often each may run a minute for one backend
 * (its own runs, as Medplum records them): a backend cannot use the platform to flood its endpoint.
 */
export const WEBHOOK_OPERATIONS = {
  test: { bot: 'webhook-test', perMinute: 5 },
  replay: { bot: 'webhook-replay', perMinute: 30 },
} as const;

/** The type of the event a backend asks for to check its endpoint (never an event of a patient's). */
export const WEBHOOK_TEST_EVENT_TYPE = 'webhook.test';

/** How a kept delivery stands: waiting for a try, its tries spent, or delivered after a first try failed. */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'failed', 'delivered'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/**
 * How long a delivery that was delivered on a later try (the schedule's or a replay) stays in the log: longer
 * than the whole schedule (about 46 hours), so an outage's every delivery can be followed to its end.
 */
export const WEBHOOK_DELIVERED_KEPT_HOURS = 72;

/** An event id as the webhooks bot names one (`<type>/<id>/_history/<version>`): what a replay names. */
export const WEBHOOK_EVENT_ID_PATTERN =
  /^(Task|Appointment|Communication)\/[A-Za-z0-9\-.]{1,64}\/_history\/[A-Za-z0-9\-.]{1,64}$/;

/** The Project secret holding a tenant's signing secret (`whsec_<base64>`), by the tenant's key. */
export const webhookSecretName = (tenantKey: string): string => `webhook-secret-${tenantKey}`;

/** A signing secret as Standard Webhooks writes one: `whsec_` and base64 of 24 to 64 random bytes. */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/;

/**
 * A tenant's secrets: one, or two separated by a space while it rotates them (the new one first). Every
 * delivery is then signed with each (`webhook-signature: v1,<one> v1,<other>`, as Standard Webhooks
 * rotates), so the receiver can move to the new secret before the old one is dropped. Undefined when the
 * text is not one or two secrets.
 */
export function webhookSecrets(text: string): string[] | undefined {
  const secrets = text.trim().split(/ +/);
  return secrets.length <= 2 && secrets.every((s) => WEBHOOK_SECRET_PATTERN.test(s)) ? secrets : undefined;
}

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
