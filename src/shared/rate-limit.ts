import type { OperationOutcome } from '@medplum/fhirtypes';

/**
 * How long a 429 asks the client to wait, in whole seconds: what Medplum's outcome says of its quota
 * window (core's rate-limit-reset extension, or the diagnostics of packages/server/src/fhir/fhirquota.ts:
 * `_msBeforeNext` on 5.0.10, `msBeforeNext` later), else a second. MedplumClient's error keeps none of
 * Medplum's headers to pass on.
 */
export function retryAfterSeconds(outcome: OperationOutcome): number {
  return Math.min(Math.max(Math.ceil((msBeforeNext(outcome) ?? 1000) / 1000), 1), 60);
}

/**
 * The wait a Medplum 429 outcome states, in milliseconds: core's rate-limit-reset extension (seconds), else
 * the limiter's state in an issue's diagnostics (`_msBeforeNext`: the FHIR quota of 5.0.10 and the request
 * and sign-in limits of 5.1, packages/server/src/ratelimit.ts; `msBeforeNext`: later quotas). Undefined when
 * it states none.
 */
export function msBeforeNext(outcome: OperationOutcome): number | undefined {
  const reset = outcome.extension?.find((e) => e.url.endsWith('/rate-limit-reset'))?.valueUnsignedInt;
  if (reset !== undefined) {
    return reset * 1000;
  }
  for (const issue of outcome.issue ?? []) {
    try {
      const state = JSON.parse(issue.diagnostics ?? '') as { _msBeforeNext?: unknown; msBeforeNext?: unknown };
      const value = state._msBeforeNext ?? state.msBeforeNext;
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
        return value;
      }
    } catch {
      // not a limiter's diagnostics
    }
  }
  return undefined;
}
