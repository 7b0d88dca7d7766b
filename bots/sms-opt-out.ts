import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Consent } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { inactivateConsents } from './lib/agreements';
import { readInput } from './lib/input';
import { fail } from './lib/result';

/** The standard opt-out keywords (CTIA): the whole message, any case, surrounding spaces ignored. */
const OPT_OUT_KEYWORDS = new Set([
  'STOP',
  'STOPALL',
  'UNSUBSCRIBE',
  'CANCEL',
  'END',
  'QUIT',
  'REVOKE',
  'OPTOUT',
  'OPT OUT',
]);

export function isOptOut(text: string | undefined): boolean {
  return OPT_OUT_KEYWORDS.has((text ?? '').trim().replace(/\s+/g, ' ').toUpperCase());
}

/**
 * Subscription bot: an inbound SMS, written by the platform's SMS integration as a Communication
 * (category inbound-sms, sender.identifier = the sender's E.164 number), that says STOP makes every
 * active SMS Consent whose channel is that number `inactive`. Other replies change nothing.
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
  const message = integration
    ? await medplum.readResource('Communication', input.value.id).catch(() => undefined)
    : undefined;
  if (!message || message.meta?.author?.reference !== integration) {
    return fail(403, 'forbidden', 'Only inbound messages of the SMS integration are acted on');
  }
  const from = message.sender?.identifier?.system === SYSTEMS.phone ? message.sender.identifier.value : undefined;
  const text = message.payload?.map((p) => p.contentString ?? '').join(' ');
  if (!from || !isOptOut(text)) {
    return { ok: true, changed: 0 };
  }
  const consents = await medplum.searchResources('Consent', {
    status: 'active',
    category: `${SYSTEMS.agreementCategory}|sms`,
    _count: '1000',
  });
  const matching = consents.filter((c: Consent) =>
    c.extension?.some((e) => e.url === EXTENSIONS.consentChannel && e.valueContactPoint?.value === from),
  );
  if (matching.length === 0) {
    return { ok: true, changed: 0 };
  }
  await inactivateConsents(medplum, matching);
  return { ok: true, changed: matching.length };
}

/** `ClientApplication/<id>` of the SMS integration when that is the requester; otherwise undefined. */
async function smsIntegration(medplum: MedplumClient, requester: string | undefined): Promise<string | undefined> {
  const id = /^ClientApplication\/([A-Za-z0-9\-.]{1,64})$/.exec(requester ?? '')?.[1];
  const client = id ? await medplum.readResource('ClientApplication', id).catch(() => undefined) : undefined;
  const isIntegration = client?.meta?.tag?.some((t) => t.system === SYSTEMS.integration && t.code === 'sms');
  return isIntegration ? requester : undefined;
}
