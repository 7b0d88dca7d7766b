import type { BotEvent } from '@medplum/core';

/** The patient id behind `event.requester` (set by Medplum from the caller's login), or undefined. */
export function requestingPatientId(event: BotEvent): string | undefined {
  const reference = event.requester?.reference ?? '';
  const match = /^Patient\/([^/]+)$/.exec(reference);
  return match?.[1];
}
