import type { BotEvent, MedplumClient } from '@medplum/core';
import { SYSTEMS } from '../contracts/systems';
import { readInput } from './lib/input';
import { searchAll } from './lib/search';
import { applyOptOuts, optOutOf, smsIntegration } from './lib/sms';

/** How far back a run looks for work left undone; runs are every 10 minutes, so a day leaves ample overlap. */
const WINDOW_MS = 24 * 3600_000;

/**
 * Cron bot (Bot.cronString): re-drives subscription work that was lost. Medplum delivers a subscription
 * to a bot once and does not retry the bot's own failure (DESIGN section 2), so every subscription-driven
 * workflow adds here the check for its work left undone, derived from the data alone and idempotent.
 *
 * Today: inbound SMS STOPs of the last day whose SMS Consents (accepted before the STOP) are still active.
 * It reads only what the SMS integration wrote and decides nothing from its input.
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
  return { ok: true, smsOptOuts: await applyOptOuts(medplum, stops) };
}
