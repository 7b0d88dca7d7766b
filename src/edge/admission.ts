import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../app-env';
import { ApiError } from '../errors';
import { type AdmissionLimits, admissionCounter } from '../shared/admission';

export type { AdmissionLimits } from '../shared/admission';

/** Seconds a refused caller is asked to wait: the in-flight calls ahead of it end within about that. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Admission before work: a call is admitted only while its caller has fewer than `perCaller`
 * calls in flight and the instance fewer than `total`, else refused at once, before anything is read or
 * sent: 429 `rate_limited` when the caller is over her share, 503 `upstream_unavailable` when the service
 * is full. No queue: a refused call costs a counter and an answer, so a flood from one token (1,000 calls
 * at once) is answered in full while everyone else's calls go on. A call's place is freed when its answer is
 * made, whatever it is (the upstream deadline bounds how long that can take). Both answers carry
 * `Retry-After` and Medplum's `RateLimit` header format (`"<name>";r=<left>;t=<seconds>`), which
 * MedplumClient reads. Counters are per process (a Worker isolate counts its own).
 *
 * Shared, not first come, first served: once the instance is half full, a caller may hold no more than
 * her fair share of it, `total` divided by the callers seen in the last 10 seconds (at least one call),
 * so that accounts acting together (self-registration is open) cannot keep it full: whoever holds less
 * than her share, a patient arriving with nothing in flight first, still gets the places they leave.
 */
export function admission(limits: AdmissionLimits, clock: () => number = Date.now): MiddlewareHandler<AppEnv> {
  const counter = admissionCounter(limits, clock);
  return async (c, next) => {
    const caller = c.get('session')?.profile;
    if (!caller) {
      return next();
    }
    const admitted = await counter.enter(caller, c.req.raw.signal);
    if (admitted === 'total') {
      throw refusal('upstream_unavailable', 'The service is at capacity; try again shortly', {
        name: 'inflight-total',
        limit: limits.total,
      });
    }
    if (admitted !== 'ok') {
      throw refusal('rate_limited', 'Too many calls at once from this account; wait for the ones in flight', {
        name: 'inflight-caller',
        limit: admitted.share,
      });
    }
    let holding = true;
    // A wait on nothing of Medplum's (a feed's) holds no place: freed for the wait, asked again after it.
    c.set('stepOut', async (wait) => {
      counter.release(caller);
      holding = false;
      let value: Awaited<ReturnType<typeof wait>>;
      try {
        value = await wait();
      } finally {
        holding = counter.admit(caller) === 'ok';
      }
      return { value, readmitted: holding };
    });
    c.set('admitted', () => (counter.admit(caller) === 'ok' ? () => counter.release(caller) : undefined));
    try {
      await next();
    } finally {
      if (holding) {
        counter.release(caller);
      }
    }
  };
}

function refusal(
  code: 'rate_limited' | 'upstream_unavailable',
  message: string,
  limit: { name: string; limit: number },
): ApiError {
  return new ApiError(
    code,
    message,
    { retryAfter: RETRY_AFTER_SECONDS, inFlightLimit: limit.limit },
    { 'Retry-After': String(RETRY_AFTER_SECONDS), RateLimit: `"${limit.name}";r=0;t=${RETRY_AFTER_SECONDS}` },
  );
}
