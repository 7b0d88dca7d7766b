import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { readInput } from './lib/input';
import { REVIEW_RESPONSE } from './lib/queues';
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
 * (it reads only what the SMS integration wrote), and the clinical spine's lost deliveries. It decides
 * nothing from its input.
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
  };
}

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
async function redrive(medplum: MedplumClient, bot: 'eligibility' | 'compose-offer', task: Task): Promise<void> {
  await medplum
    .executeBot({ system: SYSTEMS.bots, value: bot }, { resourceType: 'Task', id: task.id }, 'application/json')
    .catch(() => console.log(`reconcile: ${bot} for Task/${task.id} failed; the next run tries again`));
}
