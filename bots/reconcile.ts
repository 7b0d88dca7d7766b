import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Encounter, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { isPerson } from './lib/events';
import { readInput } from './lib/input';
import { CLINICIAN_KINDS, REVIEW_RESPONSE } from './lib/queues';
import { fail } from './lib/result';
import { searchAll } from './lib/search';
import { applyOptOuts, optOutOf, smsIntegration } from './lib/sms';
import { ownSegments } from './lib/visits';

/** How far back a run looks for work left undone; runs are every 10 minutes, so a day leaves ample overlap. */
const WINDOW_MS = 24 * 3600_000;

/**
 * Cron bot (Bot.cronString): re-drives subscription work that was lost. Medplum delivers a subscription
 * to a bot once and does not retry the bot's own failure (DESIGN section 2), so every subscription-driven
 * workflow adds here the check for its work left undone, derived from the data alone and idempotent.
 *
 * Today: inbound SMS STOPs of the last day whose SMS Consents (accepted before the STOP) are still active
 * (it reads only what the SMS integration wrote), the clinical spine's and visits' lost deliveries, and
 * asynchronous reviews past due. It decides nothing from its input.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  // Medplum's cron runs it with no requester; a person's `$execute` (clinicians may read it, to see it
  // named as an author) would only spend its quota on a pass the next tick makes anyway.
  if (isPerson(event.requester?.reference)) {
    return fail(403, 'forbidden', 'The reconciler runs on its schedule, not for a person');
  }
  const input = readInput('reconcile', event.input);
  if (!input.ok) {
    return input;
  }
  const since = new Date(Date.now() - WINDOW_MS).toISOString();
  const messages = await searchAll(medplum, 'Communication', {
    category: `${SYSTEMS.communicationCategory}|inbound-sms`,
    _lastUpdated: `ge${since}`,
  });
  const integrations = new Map<string, string | undefined>();
  const stops: { from: string; at: string }[] = [];
  for (const message of messages) {
    const author = message.meta?.author?.reference ?? '';
    if (!integrations.has(author)) {
      integrations.set(author, await smsIntegration(medplum, author));
    }
    const integration = integrations.get(author);
    const stop = integration ? optOutOf(message, integration) : undefined;
    if (stop) {
      stops.push(stop);
    }
  }
  return {
    ok: true,
    smsOptOuts: await applyOptOuts(medplum, stops),
    ...(await redriveSpine(medplum, since)),
    visits: await redriveVisits(medplum, since),
    overdueReviews: await markOverdueReviews(medplum, new Date()),
    expiredKeys: await purgeExpiredKeys(medplum, new Date()),
  };
}

/**
 * Visits whose end was lost (JOURNEY H): of the visits with a segment finished, or marked fulfilled, in the
 * last day, those whose request is still active although the visit is marked fulfilled or every segment
 * is finished. (Not by who wrote the Appointment last: Medplum keeps no version for a write that changes
 * nothing, so a bot's `fulfilled` after a clinician's leaves her its author.) visit-completion decides
 * from the data alone, so a run too many changes nothing.
 */
async function redriveVisits(medplum: MedplumClient, since: string): Promise<number> {
  const [finished, marked] = await Promise.all([
    searchAll(medplum, 'Encounter', { status: 'finished', _lastUpdated: `ge${since}` }),
    searchAll(medplum, 'Appointment', { status: 'fulfilled', _lastUpdated: `ge${since}` }),
  ]);
  const known = new Set(marked.map((a) => a.id as string));
  const more = [...new Set(finished.map((e) => idOf(e.appointment?.[0]?.reference, 'Appointment')))].filter(
    (id): id is string => !!id && !known.has(id),
  );
  const appointments = [...marked, ...(await byIds(medplum, 'Appointment', more))].filter(
    (a) => a.status === 'fulfilled' || a.status === 'arrived' || a.status === 'booked',
  );
  const requests = new Map(
    (
      await byIds(
        medplum,
        'ServiceRequest',
        [...new Set(appointments.map((a) => idOf(a.basedOn?.[0]?.reference, 'ServiceRequest')))].filter(
          (id): id is string => !!id,
        ),
      )
    ).map((r) => [`ServiceRequest/${r.id}`, r]),
  );
  const open = appointments.filter((a) => requests.get(a.basedOn?.[0]?.reference ?? '')?.status === 'active');
  // Segments of the ones not marked fulfilled: is every one finished?
  const unmarked = open.filter((a) => a.status !== 'fulfilled');
  const segments: Encounter[] = [];
  for (let i = 0; i < unmarked.length; i += 50) {
    const batch = unmarked.slice(i, i + 50).map((a) => `Appointment/${a.id}`);
    segments.push(...(await searchAll(medplum, 'Encounter', { appointment: batch.join(',') })));
  }
  const undone = open.filter((a) => {
    if (a.status === 'fulfilled') {
      return true;
    }
    const own = ownSegments(
      a,
      segments.filter((e) => e.appointment?.[0]?.reference === `Appointment/${a.id}`) as (Encounter & { id: string })[],
    );
    return own.length > 0 && own.every((e) => e.status === 'finished');
  });
  for (const appointment of undone) {
    await redrive(medplum, 'visit-completion', { resourceType: 'Appointment', id: appointment.id as string });
  }
  return undone.length;
}

const idOf = (reference: string | undefined, type: string): string | undefined => {
  const [kind, id] = (reference ?? '').split('/');
  return kind === type && id ? id : undefined;
};

/** Resources by id, 50 to a search. */
async function byIds<T extends 'Appointment' | 'ServiceRequest'>(medplum: MedplumClient, type: T, ids: string[]) {
  const found = [];
  for (let i = 0; i < ids.length; i += 50) {
    found.push(...(await searchAll(medplum, type, { _id: ids.slice(i, i + 50).join(',') })));
  }
  return found;
}

/**
 * Clinician work past its due date (`restriction.period.end`: every kind has one, bots/lib/queues.ts) and
 * still open: marked `urgent` with business status "overdue", once, so that it comes first in the queue
 * (the mark is its latest change: the Provider app's board lists the latest changed first) and says why
 * (the app shows both). Nothing else of it changes.
 */
async function markOverdueReviews(medplum: MedplumClient, now: Date): Promise<number> {
  const open = await searchAll(medplum, 'Task', {
    code: CLINICIAN_KINDS.map((kind) => `${SYSTEMS.taskKind}|${kind}`).join(','),
    status: 'ready,in-progress',
  });
  const overdue = open.filter(
    (t) => Date.parse(t.restriction?.period?.end ?? '') < now.getTime() && t.businessStatus?.text !== OVERDUE,
  );
  let marked = 0;
  for (const task of overdue) {
    await medplum
      .updateResource<Task>(
        { ...task, priority: 'urgent', businessStatus: { text: OVERDUE } },
        { headers: { 'If-Match': `W/"${task.meta?.versionId}"` } },
      )
      .then(() => marked++)
      // Taken or completed meanwhile (412): the next run looks again.
      .catch(() => undefined);
  }
  return marked;
}

/** At most this many expired Idempotency-Key records go in one run (a write each, of the bot's quota). */
const KEYS_PER_RUN = 200;

/**
 * Patients' Idempotency-Key records past their 24 hours (src/edge/idempotency.ts), which answer nothing
 * any more: deleted, oldest first, a bounded number a run.
 */
async function purgeExpiredKeys(medplum: MedplumClient, now: Date): Promise<number> {
  const before = new Date(now.getTime() - 25 * 3600_000).toISOString();
  const expired = await medplum.searchResources(
    'Basic',
    {
      code: `${SYSTEMS.idempotency}|request`,
      _lastUpdated: `lt${before}`,
      _count: String(KEYS_PER_RUN),
      _sort: '_lastUpdated',
    },
    { cache: 'no-cache' },
  );
  let purged = 0;
  for (const record of expired) {
    await medplum
      .deleteResource('Basic', record.id as string)
      .then(() => purged++)
      .catch(() => undefined);
  }
  return purged;
}

/** The business status of an asynchronous review past its due date. */
export const OVERDUE = 'overdue';

/**
 * The clinical spine's subscription work left undone (JOURNEY D): a completed intake review without its
 * selection task (eligibility), a completed selection or review of a declined offer that no run of
 * compose-offer has marked (`businessStatus`). Each is re-driven by executing its bot with the delivery
 * it lost; both bots re-read everything, check that the task's owner completed it, and are idempotent.
 */
async function redriveSpine(medplum: MedplumClient, since: string): Promise<{ eligibility: number; offers: number }> {
  const completed = (code: string) =>
    searchAll(medplum, 'Task', {
      code: `${SYSTEMS.taskKind}|${code}`,
      status: 'completed',
      _lastUpdated: `ge${since}`,
    });
  let eligibility = 0;
  for (const review of await completed('review-intake')) {
    const selections = await medplum.searchResources(
      'Task',
      { identifier: `${SYSTEMS.eligibilityKey}|Task/${review.id}` },
      { cache: 'no-cache' },
    );
    if (!selections.some((t) => t.status !== 'draft')) {
      await redrive(medplum, 'eligibility', review);
      eligibility++;
    }
  }
  let offers = 0;
  for (const code of ['select-treatment', REVIEW_RESPONSE]) {
    for (const selection of await completed(code)) {
      if (!selection.businessStatus) {
        await redrive(medplum, 'compose-offer', selection);
        offers++;
      }
    }
  }
  return { eligibility, offers };
}

/** One lost delivery, again: the bot's own failure is reported, not thrown (the next run tries again). */
async function redrive(
  medplum: MedplumClient,
  bot: 'eligibility' | 'compose-offer' | 'visit-completion',
  what: { resourceType: string; id?: string },
): Promise<void> {
  await medplum
    .executeBot(
      { system: SYSTEMS.bots, value: bot },
      { resourceType: what.resourceType, id: what.id },
      'application/json',
    )
    .catch(() => console.log(`reconcile: ${bot} for ${what.resourceType}/${what.id} failed; the next run tries again`));
}
