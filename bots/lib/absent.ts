import { getStatus, OperationOutcomeError } from '@medplum/core';

/**
 * For `read(...).catch(absent)`: a read that Medplum answered "not there" (404, 410), "not yours to see"
 * (403) or "not a valid id" (400) is undefined, and the bot answers as it does for anything absent. Any
 * other failure (Medplum's FHIR quota, 429; a 5xx; the network) is thrown again, so that the run fails as
 * what it is: a spent quota reaches the caller as 503 with Retry-After, never as a 404 that blames her.
 */
export function absent(err: unknown): undefined {
  const status = err instanceof OperationOutcomeError ? getStatus(err.outcome) : undefined;
  if (status === 400 || status === 403 || status === 404 || status === 410) {
    return undefined;
  }
  throw err;
}
