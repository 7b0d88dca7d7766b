import { Buffer } from 'node:buffer';
import { createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { MedplumClient } from '@medplum/core';
import type { Basic, Extension, Organization } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import {
  allowedWebhookEndpoint,
  WEBHOOK_RETRY_MINUTES,
  WEBHOOK_TIMEOUT_MS,
  type WebhookDeliveryStatus,
  webhookSecretName,
  webhookSecrets,
} from '../../contracts/webhook-rules';

/**
 * Delivering one webhook (contracts/webhooks.ts): the Standard Webhooks signature, the POST, and the
 * record of a delivery that waits to be tried again. Node's http client, not `fetch`: Medplum's bot
 * sandbox has no timers or AbortSignal for a fetch to time out with, and a receiver that never answers
 * must not hold the run until Medplum ends it.
 */

/** How a try ended: the receiver's status code, or that it could not be reached (refused, reset, too slow). */
export type TryOutcome = number | 'unreachable' | 'timeout';

export const delivered = (outcome: TryOutcome): boolean =>
  typeof outcome === 'number' && outcome >= 200 && outcome < 300;

/**
 * `v1,<base64 HMAC-SHA256>` of `<id>.<timestamp>.<body>`, keyed with each secret's base64 part, separated by
 * spaces (Standard Webhooks; two while the tenant rotates its secret: contracts/webhook-rules.ts).
 */
export function webhookSignature(secrets: string[], id: string, timestamp: number, body: string): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
    })
    .join(' ');
}

/** One signed POST of `body` (no redirect followed, nothing of the answer read but its status). */
export function postSigned(
  endpoint: string,
  secrets: string[],
  id: string,
  body: string,
  now: Date,
): Promise<TryOutcome> {
  if (!allowedWebhookEndpoint(endpoint)) {
    return Promise.resolve('unreachable');
  }
  const timestamp = Math.floor(now.getTime() / 1000);
  const url = new URL(endpoint);
  return new Promise((resolve) => {
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
      url,
      {
        method: 'POST',
        timeout: WEBHOOK_TIMEOUT_MS,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'patient-care-webhooks/1',
          'webhook-id': id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': webhookSignature(secrets, id, timestamp, body),
        },
      },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    // The socket's idle time: a receiver that accepts and then says nothing for this long.
    request.on('timeout', () => {
      request.destroy();
      resolve('timeout');
    });
    request.on('error', () => resolve('unreachable'));
    request.end(body);
  });
}

/** Where the tenant's events go and what they are signed with; undefined when it takes none. */
export function tenantWebhook(
  tenant: Organization,
  secrets: Record<string, { valueString?: string }> | undefined,
): { endpoint: string; secrets: string[]; types?: string[] } | undefined {
  const endpoint = tenant.extension?.find((e) => e.url === EXTENSIONS.webhookEndpoint)?.valueUrl;
  // The types it takes (the clinic file's `webhook.events`); none listed: every type.
  const types = tenant.extension
    ?.filter((e) => e.url === EXTENSIONS.webhookEvents && e.valueCode)
    .map((e) => e.valueCode as string);
  const key = tenant.identifier?.find((i) => i.system === SYSTEMS.tenant)?.value;
  const text = key ? secrets?.[webhookSecretName(key)]?.valueString : undefined;
  const signing = text ? webhookSecrets(text) : undefined;
  return endpoint && signing && allowedWebhookEndpoint(endpoint)
    ? { endpoint, secrets: signing, ...(types?.length ? { types } : {}) }
    : undefined;
}

/** A delivery that waits for its next try, as stored (a Basic; SYSTEMS.webhookDelivery). */
export interface Pending {
  eventId: string;
  tenant: string;
  payload: string;
  attempts: number;
  next: string;
  last: string;
}

/** How a delivery kept without a try (its receiver not answering) says how it ended. */
export const NOT_TRIED = 'not tried';

/**
 * A receiver that did not answer at all (refused, reset or silent past the timeout), as opposed to one that
 * answered with an error; or a delivery kept untried for that reason: while a tenant's newest kept
 * delivery says so, new events are kept without a try.
 */
export const unanswered = (last: string): boolean => last === 'unreachable' || last === 'timeout' || last === NOT_TRIED;

/** Tries in all before a delivery is kept as failed. */
export const MAX_TRIES = WEBHOOK_RETRY_MINUTES.length + 1;

/** When a delivery tried `attempts` times (and failed) is tried next; undefined when its tries are spent. */
export function nextTry(attempts: number, now: Date): string | undefined {
  const minutes = WEBHOOK_RETRY_MINUTES[attempts - 1];
  return minutes === undefined ? undefined : new Date(now.getTime() + minutes * 60_000).toISOString();
}

export function pendingRecord(pending: Pending, status: WebhookDeliveryStatus): Basic {
  const parts: Extension[] = [
    { url: 'tenant', valueReference: { reference: pending.tenant } },
    { url: 'payload', valueString: pending.payload },
    { url: 'attempts', valueInteger: pending.attempts },
    { url: 'next', valueInstant: pending.next },
    { url: 'last', valueString: pending.last },
  ];
  return {
    resourceType: 'Basic',
    code: { coding: [{ system: SYSTEMS.webhookDelivery, code: status }] },
    identifier: [{ system: SYSTEMS.webhookDelivery, value: pending.eventId }],
    // The tenant as the subject: its backlog is found by it (`subject=Organization/<id>`).
    subject: { reference: pending.tenant },
    extension: [{ url: EXTENSIONS.webhookDelivery, extension: parts }],
  };
}

/** How a kept delivery stands (its code under SYSTEMS.webhookDelivery). */
export const deliveryStatus = (record: Basic): WebhookDeliveryStatus | undefined =>
  record.code?.coding?.find((c) => c.system === SYSTEMS.webhookDelivery)?.code as WebhookDeliveryStatus | undefined;

/**
 * A kept delivery after one more try, as the log keeps it: delivered, it stays `delivered` (for
 * WEBHOOK_DELIVERED_KEPT_HOURS, then the schedule lets it go), `next` saying when; not delivered, a scheduled
 * try moves it along the backoff (or to `failed`, its tries spent), while a replay (asked for by the tenant's
 * backend) leaves its status and next try as they were. `attempts` counts every try; `last` says how the
 * newest ended. Written under If-Match: of two runs that crossed (a replay and the schedule), one record is
 * kept, and the loser's try is still told to its caller. Answers how the delivery stands now.
 */
export async function recordTry(
  medplum: MedplumClient,
  record: Basic & { id: string },
  pending: Pending,
  outcome: TryOutcome,
  now: Date,
  kind: 'scheduled' | 'replay',
): Promise<{ status: WebhookDeliveryStatus; attempts: number }> {
  const attempts = pending.attempts + 1;
  let status: WebhookDeliveryStatus;
  let next: string;
  if (delivered(outcome)) {
    status = 'delivered';
    next = now.toISOString();
  } else if (kind === 'replay') {
    status = deliveryStatus(record) === 'failed' ? 'failed' : 'pending';
    next = pending.next;
  } else {
    const scheduled = nextTry(attempts, now);
    status = scheduled && attempts < MAX_TRIES ? 'pending' : 'failed';
    next = scheduled ?? now.toISOString();
  }
  await medplum
    .updateResource(
      { ...pendingRecord({ ...pending, attempts, next, last: String(outcome) }, status), id: record.id },
      { headers: { 'If-Match': `W/"${record.meta?.versionId}"` } },
    )
    .catch(() => undefined);
  return { status, attempts };
}

export function readPending(record: Basic): Pending | undefined {
  const parts = record.extension?.find((e) => e.url === EXTENSIONS.webhookDelivery)?.extension ?? [];
  const part = (url: string) => parts.find((e) => e.url === url);
  const eventId = record.identifier?.find((i) => i.system === SYSTEMS.webhookDelivery)?.value;
  const tenant = part('tenant')?.valueReference?.reference;
  const payload = part('payload')?.valueString;
  const attempts = part('attempts')?.valueInteger;
  const next = part('next')?.valueInstant;
  // The tenant is also the record's subject, as this bot keeps it: a Basic that names anyone else (a
  // patient's own, whose subject her policy forces to her) is not a delivery, whatever code it carries.
  if (
    !eventId ||
    !tenant?.startsWith('Organization/') ||
    record.subject?.reference !== tenant ||
    !payload ||
    attempts === undefined ||
    !next
  ) {
    return undefined;
  }
  return { eventId, tenant, payload, attempts, next, last: part('last')?.valueString ?? '' };
}
