import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Appointment, Basic, Communication, Organization, Patient, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { WEBHOOK_DELIVERED_KEPT_HOURS } from '../contracts/webhook-rules';
import type { WebhookEvent } from '../contracts/webhooks';
import { absent } from './lib/absent';
import { eventId, eventOf, patientOf } from './lib/events';
import { readInput } from './lib/input';
import {
  delivered,
  NOT_TRIED,
  nextTry,
  type Pending,
  pendingRecord,
  postSigned,
  readPending,
  recordTry,
  tenantWebhook,
  unanswered,
} from './lib/webhooks';

/**
 * Subscription and cron bot: the tenant's webhooks (contracts/webhooks.ts).
 *
 * Woken by Medplum's Subscriptions on the Tasks, Appointments and messages of a tenant that takes webhooks (one set
 * per tenant, `_compartment` of its Organization: src/provision/bots/webhooks.ts), it reads the version
 * it was told of itself (never the delivery's copy), reads it as her feed does (bots/lib/events.ts: the
 * same event, the same id), finds her tenant where she is now (her Patient's managingOrganization) and its
 * endpoint and secret, and POSTs the event signed. A try that fails is kept (a Basic of no patient's: her
 * policy cannot read it; the tenant's backend reads it, its delivery log) and tried again on the bot's
 * schedule with backoff, the same id each time; once delivered it stays in the log as `delivered` for
 * WEBHOOK_DELIVERED_KEPT_HOURS (the schedule then lets it go). A delivery delivered at its first try is
 * never written: the common case costs no write.
 *
 * Medplum does not try a subscription bot again when its code fails, and its own rest-hook would post
 * the whole record (her PHI) with a signature of its own scheme: so the bot signs and keeps what failed.
 * A delivery can come twice (Medplum delivers at least once; a retry may cross a slow answer): receivers
 * deduplicate by `webhook-id`.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('webhooks', event.input);
  if (!input.ok) {
    return input;
  }
  const secrets = event.secrets as Record<string, { valueString?: string }> | undefined;
  if (input.value.resourceType === 'Bot') {
    return { ok: true, ...(await tryAgainWhatIsDue(medplum, secrets, new Date())) };
  }
  return { ok: true, ...(await deliverChange(medplum, input.value, secrets, new Date())) };
}

/** One change of a Task, Appointment or Communication: its event, delivered to her tenant's endpoint or kept for later. */
async function deliverChange(
  medplum: MedplumClient,
  change: { resourceType: 'Task' | 'Appointment' | 'Communication'; id: string; meta?: { versionId?: string } },
  secrets: Record<string, { valueString?: string }> | undefined,
  now: Date,
): Promise<{ delivered: boolean; kept?: boolean }> {
  const versionId = change.meta?.versionId;
  const version = (
    versionId
      ? await medplum.readVersion(change.resourceType, change.id, versionId).catch(absent)
      : await medplum.readResource(change.resourceType, change.id).catch(absent)
  ) as Task | Appointment | Communication | undefined;
  const patientId = version ? patientOf(version) : undefined;
  const reading = version && patientId ? eventOf(version, patientId) : undefined;
  if (!version?.id || !version.meta?.versionId || !version.meta.lastUpdated || !patientId || !reading) {
    return { delivered: false };
  }
  const patient = await medplum.readResource('Patient', patientId).catch(absent);
  const tenant = await tenantOf(medplum, patient);
  const webhook = tenant ? tenantWebhook(tenant, secrets) : undefined;
  if (!tenant || !webhook || (webhook.types && !webhook.types.includes(reading.type))) {
    return { delivered: false };
  }
  const id = eventId(version as Task & { id: string; meta: { versionId: string } });
  const body: WebhookEvent = {
    type: reading.type as WebhookEvent['type'],
    timestamp: version.meta.lastUpdated,
    data: {
      id,
      type: reading.type as WebhookEvent['type'],
      occurredAt: version.meta.lastUpdated,
      subject: `${version.resourceType}/${version.id}`,
      patient: `Patient/${patientId}`,
    },
  };
  const payload = JSON.stringify(body);
  const tenantRef = `Organization/${tenant.id}`;
  // A receiver that is down or silent is not waited on again for every event (each wait would hold one of
  // Medplum's subscription workers, which every tenant's clinical work shares): while its kept deliveries
  // say it did not answer, new ones are kept untried, and the schedule tries them all together.
  const backlog = await medplum.searchOne('Basic', {
    code: `${SYSTEMS.webhookDelivery}|pending`,
    subject: tenantRef,
    _sort: '-_lastUpdated',
  });
  const stalled = backlog ? readPending(backlog) : undefined;
  const outcome =
    stalled && unanswered(stalled.last)
      ? undefined
      : await postSigned(webhook.endpoint, webhook.secrets, id, payload, now);
  if (outcome !== undefined && delivered(outcome)) {
    return { delivered: true };
  }
  const pending: Pending =
    outcome === undefined
      ? { eventId: id, tenant: tenantRef, payload, attempts: 0, next: (stalled as Pending).next, last: NOT_TRIED }
      : {
          eventId: id,
          tenant: tenantRef,
          payload,
          attempts: 1,
          next: nextTry(1, now) as string,
          last: String(outcome),
        };
  // Kept once per event (a second delivery of the same change finds it kept).
  await medplum.createResourceIfNoneExist(
    pendingRecord(pending, 'pending'),
    `identifier=${SYSTEMS.webhookDelivery}|${id}`,
  );
  return { delivered: false, kept: true };
}

async function tenantOf(medplum: MedplumClient, patient: Patient | undefined): Promise<Organization | undefined> {
  const reference = patient?.managingOrganization?.reference;
  return reference?.startsWith('Organization/')
    ? await medplum.readResource('Organization', reference.slice('Organization/'.length)).catch(absent)
    : undefined;
}

/** Deliveries tried at once in one run (each waits at most WEBHOOK_TIMEOUT_MS). */
const TRIES_PER_RUN = 20;
/** Pages of 100 kept deliveries a run reads at most looking for due ones (50 searches, 1,000 points). */
const MAX_PAGES_PER_RUN = 50;

/** A scheduled run: every kept delivery whose time has come, tried again (oldest first). */
async function tryAgainWhatIsDue(
  medplum: MedplumClient,
  secrets: Record<string, { valueString?: string }> | undefined,
  now: Date,
): Promise<{ tried: number; delivered: number }> {
  // Page by page until enough are due: the order written is not the order due (one tried long ago may
  // wait a day, one tried minutes ago only five), so the first page alone could hold none that is.
  const due: { record: Basic & { id: string }; pending: Pending }[] = [];
  let pages = 0;
  for await (const page of medplum.searchResourcePages('Basic', {
    code: `${SYSTEMS.webhookDelivery}|pending`,
    _sort: '_lastUpdated',
    _count: '100',
  })) {
    for (const record of page) {
      const pending = readPending(record);
      if (pending && Date.parse(pending.next) <= now.getTime() && due.length < TRIES_PER_RUN) {
        due.push({ record: record as Basic & { id: string }, pending });
      }
    }
    // Enough, or as deep as a run reads (Medplum refuses `_offset` past 10,000, which would fail the run
    // and every run after it while the backlog stands): what lies deeper waits for its turn.
    if (due.length >= TRIES_PER_RUN || ++pages >= MAX_PAGES_PER_RUN) {
      break;
    }
  }
  const results = await Promise.all([
    ...due.map(({ record, pending }) => tryAgain(medplum, record, pending, secrets, now)),
    letGoDelivered(medplum, now).then(() => false),
  ]);
  return { tried: due.length, delivered: results.filter(Boolean).length };
}

async function tryAgain(
  medplum: MedplumClient,
  record: Basic & { id: string },
  pending: Pending,
  secrets: Record<string, { valueString?: string }> | undefined,
  now: Date,
): Promise<boolean> {
  // The tenant's endpoint and secret as they are now (the operator may have mended them).
  const tenant = await medplum.readResource('Organization', pending.tenant.slice('Organization/'.length)).catch(absent);
  const webhook = tenant ? tenantWebhook(tenant, secrets) : undefined;
  const outcome = webhook
    ? await postSigned(webhook.endpoint, webhook.secrets, pending.eventId, pending.payload, now)
    : 'unreachable';
  return (await recordTry(medplum, record, pending, outcome, now, 'scheduled')).status === 'delivered';
}

/** Delivered deliveries let go in one run at most (one search and a delete each). */
const LET_GO_PER_RUN = 50;

/** Deliveries delivered more than WEBHOOK_DELIVERED_KEPT_HOURS ago leave the log (oldest first). */
async function letGoDelivered(medplum: MedplumClient, now: Date): Promise<void> {
  const since = new Date(now.getTime() - WEBHOOK_DELIVERED_KEPT_HOURS * 3_600_000).toISOString();
  const old = await medplum.searchResources('Basic', {
    code: `${SYSTEMS.webhookDelivery}|delivered`,
    _lastUpdated: `lt${since}`,
    _sort: '_lastUpdated',
    _count: String(LET_GO_PER_RUN),
  });
  await Promise.all(old.map((record) => medplum.deleteResource('Basic', record.id as string).catch(absent)));
}
