import type { OperationOutcome } from '@medplum/fhirtypes';

/**
 * How long a 429 asks the client to wait, in whole seconds: what Medplum's outcome says of its quota
 * window (core's rate-limit-reset extension, or the diagnostics of packages/server/src/fhir/fhirquota.ts:
 * `_msBeforeNext` on 5.0.10, `msBeforeNext` later), else a second. MedplumClient's error keeps none of
 * Medplum's headers to pass on.
 */
export function retryAfterSeconds(outcome: OperationOutcome): number {
  const reset = outcome.extension?.find((e) => e.url.endsWith('/rate-limit-reset'))?.valueUnsignedInt;
  let ms = reset !== undefined ? reset * 1000 : undefined;
  for (const issue of outcome.issue ?? []) {
    try {
      const state = JSON.parse(issue.diagnostics ?? '') as { _msBeforeNext?: unknown; msBeforeNext?: unknown };
      const value = state._msBeforeNext ?? state.msBeforeNext;
      ms ??= typeof value === 'number' && Number.isFinite(value) ? value : undefined;
    } catch {
      // not the quota's diagnostics
    }
  }
  return Math.min(Math.max(Math.ceil((ms ?? 1000) / 1000), 1), 60);
}
