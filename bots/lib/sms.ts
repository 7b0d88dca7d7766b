import type { MedplumClient } from '@medplum/core';
import type { Communication, Consent } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import { inactivateConsents } from './agreements';
import { lostRace } from './races';
import { searchAll } from './search';

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

/** `ClientApplication/<id>` when that reference is the platform's SMS integration; otherwise undefined. */
export async function smsIntegration(
  medplum: MedplumClient,
  reference: string | undefined,
): Promise<string | undefined> {
  const id = /^ClientApplication\/([A-Za-z0-9\-.]{1,64})$/.exec(reference ?? '')?.[1];
  const client = id ? await medplum.readResource('ClientApplication', id).catch(absent) : undefined;
  const isIntegration = client?.meta?.tag?.some((t) => t.system === SYSTEMS.integration && t.code === 'sms');
  return isIntegration ? reference : undefined;
}

/** A STOP the SMS integration wrote: the number it came from and when; undefined for any other message. */
export function optOutOf(message: Communication, integration: string): { from: string; at: string } | undefined {
  const from = message.sender?.identifier?.system === SYSTEMS.phone ? message.sender.identifier.value : undefined;
  const text = message.payload?.map((p) => p.contentString ?? '').join(' ');
  const at = message.sent ?? message.meta?.lastUpdated;
  if (message.meta?.author?.reference !== integration || !from || !at || !isOptOut(text)) {
    return undefined;
  }
  return { from, at };
}

/**
 * The active SMS acceptances a STOP from `from` at `at` withdraws: those of that channel accepted
 * before it (an acceptance given after the STOP is a new decision and stays).
 */
export async function consentsStoppedBy(
  medplum: MedplumClient,
  stops: { from: string; at: string }[],
): Promise<Consent[]> {
  if (stops.length === 0) {
    return [];
  }
  // Every active SMS acceptance, whole: the channel is the number at acceptance time, which the
  // patient's record may no longer hold, so there is no narrower search that cannot miss one.
  const consents = await searchAll(medplum, 'Consent', {
    status: 'active',
    category: `${SYSTEMS.agreementCategory}|sms`,
  });
  return consents.filter((consent) => {
    const channel = consent.extension?.find((e) => e.url === EXTENSIONS.consentChannel)?.valueContactPoint?.value;
    // Instants compare as times, not strings: `...T10:00:00Z` and `...T12:00:00+02:00` are one moment.
    const accepted = Date.parse(consent.dateTime ?? '');
    return stops.some((stop) => channel === stop.from && accepted < Date.parse(stop.at));
  });
}

/**
 * Makes the SMS acceptances these STOPs withdraw `inactive`, in one transaction. A concurrent change
 * (another delivery, the reconciler, a withdrawal) is a lost race: read again and apply what is left.
 */
export async function applyOptOuts(medplum: MedplumClient, stops: { from: string; at: string }[]): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const undone = await consentsStoppedBy(medplum, stops);
    if (undone.length === 0) {
      return 0;
    }
    try {
      await inactivateConsents(medplum, undone);
      return undone.length;
    } catch (err) {
      if (attempt > 0 || !lostRace(err)) {
        throw err;
      }
    }
  }
}
