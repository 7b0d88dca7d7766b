import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Appointment, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { readInput } from './lib/input';
import { ASYNC_REVIEW, REVIEW_RESPONSE } from './lib/queues';
import { searchAll } from './lib/search';
import { applyOptOuts, optOutOf, smsIntegration } from './lib/sms';

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
  };
}

/**
 * Visits whose end was lost (JOURNEY H): a segment finished in the last day whose visit is not fulfilled,
 * or a visit a clinician marked fulfilled that no run of visit-completion has rewritten (its last version
 * is still hers). visit-completion decides from the data alone, so a run too many changes nothing.
 */
async function redriveVisits(medplum: MedplumClient, since: string): Promise<number> {
  const finished = await searchAll(medplum, 'Encounter', { status: 'finished', _lastUpdated: `ge${since}` });
  const ids = [
    ...new Set(
      finished
        .map((e) => e.appointment?.[0]?.reference ?? '')
        .filter((r) => r.startsWith('Appointment/'))
        .map((r) => r.split('/')[1] as string),
    ),
  ];
  const appointments: Appointment[] = [];
  for (let i = 0; i < ids.length; i += 50) {
    appointments.push(...(await searchAll(medplum, 'Appointment', { _id: ids.slice(i, i + 50).join(',') })));
  }
  const marked = await searchAll(medplum, 'Appointment', { status: 'fulfilled', _lastUpdated: `ge${since}` });
  const undone = new Map<string, Appointment>();
  for (const appointment of [...appointments, ...marked]) {
    const byBot = appointment.meta?.author?.reference?.startsWith('Bot/') ?? false;
    if (
      (appointment.status === 'arrived' || appointment.status === 'booked' || !byBot) &&
      appointment.status !== 'cancelled'
    ) {
      undone.set(appointment.id as string, appointment);
    }
  }
  for (const appointment of undone.values()) {
    await redrive(medplum, 'visit-completion', { resourceType: 'Appointment', id: appointment.id as string });
  }
  return undone.size;
}

/**
 * Asynchronous reviews past their due date (`restriction.period.end`) and still open: marked `urgent`
 * with business status "overdue", once, so that they come first in the queue and say why (the Provider
 * app shows both). Nothing else of them changes.
 */
async function markOverdueReviews(medplum: MedplumClient, now: Date): Promise<number> {
  const open = await searchAll(medplum, 'Task', {
    code: `${SYSTEMS.taskKind}|${ASYNC_REVIEW}`,
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
