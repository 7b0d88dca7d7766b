import type { BotEvent, MedplumClient } from '@medplum/core';
import { absent } from './lib/absent';
import { readInput } from './lib/input';
import { fail } from './lib/result';
import { applyOptOuts, optOutOf, smsIntegration } from './lib/sms';

export { isOptOut } from './lib/sms';

/**
 * Subscription bot: an inbound SMS, written by the platform's SMS integration as a Communication
 * (category inbound-sms, sender.identifier = the sender's E.164 number), that says STOP makes every
 * active SMS Consent whose channel is that number and that was accepted before the message `inactive`.
 * Other replies change nothing. A delivery that is lost or fails is re-driven by the reconciler.
 *
 * It believes only what it reads itself: the delivery must come from the SMS integration (the
 * requester, which Medplum sets to the resource's author, is the integration's ClientApplication), and
 * the message is re-read by id, so a caller who invents a message in the input changes nothing.
 * Patients cannot run it at all (the Bot is not readable to them).
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('sms-opt-out', event.input);
  if (!input.ok) {
    return input;
  }
  const integration = await smsIntegration(medplum, event.requester?.reference);
  const message = integration ? await medplum.readResource('Communication', input.value.id).catch(absent) : undefined;
  if (!integration || !message || message.meta?.author?.reference !== integration) {
    return fail(403, 'forbidden', 'Only inbound messages of the SMS integration are acted on');
  }
  const stop = optOutOf(message, integration);
  return { ok: true, changed: await applyOptOuts(medplum, stop ? [stop] : []) };
}
