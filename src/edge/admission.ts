import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../app-env';
import { ApiError } from '../errors';

/** How many calls may be in flight toward Medplum and its bots: per caller, and for everyone together. */
export interface AdmissionLimits {
  /** Calls of one caller (the token's subject: one patient, whatever her sessions) at once. */
  perCaller: number;
  /** Calls of everyone at once: what this gateway instance lets reach Medplum. */
  total: number;
}

/** Seconds a refused caller is asked to wait: the in-flight calls ahead of it end within about that. */
const RETRY_AFTER_SECONDS = 1;

/** How long a caller counts as one of those sharing the instance after her last call. */
const ACTIVE_WINDOW_MS = 10_000;

/**
 * Admission before work (issue 24): a call is admitted only while its caller has fewer than `perCaller`
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
  const perCaller = new Map<string, number>();
  const seen = new Map<string, number>();
  let lastPrune = 0;
  let total = 0;
  const activeCallers = (now: number): number => {
    if (now - lastPrune > 1_000) {
      lastPrune = now;
      for (const [caller, at] of seen) {
        if (now - at > ACTIVE_WINDOW_MS && !perCaller.has(caller)) {
          seen.delete(caller);
        }
      }
    }
    return Math.max(seen.size, 1);
  };
  return async (c, next) => {
    const caller = c.get('session')?.profile;
    if (!caller) {
      return next();
    }
    const now = clock();
    seen.set(caller, now);
    const active = activeCallers(now);
    const mine = perCaller.get(caller) ?? 0;
    const contended = total * 2 >= limits.total;
    const share = contended
      ? Math.min(limits.perCaller, Math.max(1, Math.floor(limits.total / active)))
      : limits.perCaller;
    if (mine >= share) {
      throw refusal('rate_limited', 'Too many calls at once from this account; wait for the ones in flight', {
        name: 'inflight-caller',
        limit: share,
      });
    }
    if (total >= limits.total) {
      throw refusal('upstream_unavailable', 'The service is at capacity; try again shortly', {
        name: 'inflight-total',
        limit: limits.total,
      });
    }
    perCaller.set(caller, mine + 1);
    total++;
    try {
      await next();
    } finally {
      total--;
      const left = (perCaller.get(caller) ?? 1) - 1;
      if (left > 0) {
        perCaller.set(caller, left);
      } else {
        perCaller.delete(caller);
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
