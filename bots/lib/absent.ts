import { getStatus, isOperationOutcome } from '@medplum/core';

/**
 * For `read(...).catch(absent)`: a read that Medplum answered "not there" (404, 410), "not yours to see"
 * (403) or "not a valid id" (400) is undefined, and the bot answers as it does for anything absent. Any
 * other failure (Medplum's FHIR quota, 429; a 5xx; the network) is thrown again, so that the run fails as
 * what it is: a spent quota reaches the caller as 503 with Retry-After, never as a 404 that blames her.
 * The outcome is read off the error, not by `instanceof`: the client's errors are the host's classes, not
 * the ones bundled into the bot (as in races.ts).
 */
export function absent(err: unknown): undefined {
  const outcome = (err as { outcome?: unknown } | undefined)?.outcome;
  const status = isOperationOutcome(outcome) ? getStatus(outcome) : undefined;
  if (status === 400 || status === 403 || status === 404 || status === 410) {
    return undefined;
  }
  throw err;
}
