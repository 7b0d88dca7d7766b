import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Communication, Consent } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { inactivateConsents } from './lib/agreements';

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
 */
export async function handler(medplum: MedplumClient, event: BotEvent<Communication>): Promise<unknown> {
  const message = event.input;
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
