import type { OperationOutcome } from '@medplum/fhirtypes';

/**
 * Whether a write failed because a concurrent writer got there first: Medplum answers a conflicting
 * concurrent conditional transaction 409 (after one retry) and a stale If-Match 412 (DESIGN section 2).
 * A bot then re-reads and answers what the winner left (idempotent replay) or `invalid_state`.
 */
export function lostRace(err: unknown): boolean {
  const outcome = (err as { outcome?: OperationOutcome } | undefined)?.outcome;
  return (
    outcome?.id === 'conflict' ||
    outcome?.id === 'precondition-failed' ||
    (outcome?.issue ?? []).some((issue) => issue.code === 'conflict')
  );
}
