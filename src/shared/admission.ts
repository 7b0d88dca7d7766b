/**
 * Admission's counting, shared by the gateway (src/edge/admission.ts) and the embedded Medplum's own port
 * (src/embedded/server.ts): calls in flight per caller and in all, and each caller's fair share once the
 * instance is half full. No Node built-in: the gateway also runs as a Worker.
 */

/** How many calls may be in flight toward Medplum and its bots: per caller, and for everyone together. */
export interface AdmissionLimits {
  /** Calls of one caller (the token's subject: one patient, whatever her sessions) at once. */
  perCaller: number;
  /** Calls of everyone at once: what this gateway instance lets reach Medplum. */
  total: number;
}

/** How long a refused caller stays out of the places kept for newcomers. */
const HELD_BACK_MS = 1_000;

/** How long a caller counts as one of those sharing the instance after her last call. */
const ACTIVE_WINDOW_MS = 10_000;

/** The counting behind admission, for any server that knows its caller (the embedded Medplum's port too). */
export interface AdmissionCounter {
  /** 'ok' (then `release` when the call ends), 'total' (the instance is full), or the caller's share. */
  admit(caller: string): 'ok' | 'total' | { share: number };
  release(caller: string): void;
}

export function admissionCounter(limits: AdmissionLimits, clock: () => number = Date.now): AdmissionCounter {
  const perCaller = new Map<string, number>();
  const seen = new Map<string, number>();
  /** When each caller was last refused. */
  const held = new Map<string, number>();
  let lastPrune = 0;
  let total = 0;
  const reserve = Math.max(1, Math.floor(limits.total / 8));
  const activeCallers = (now: number): number => {
    if (now - lastPrune > 1_000) {
      lastPrune = now;
      for (const [caller, at] of seen) {
        if (now - at > ACTIVE_WINDOW_MS && !perCaller.has(caller)) {
          seen.delete(caller);
          held.delete(caller);
        }
      }
    }
    return Math.max(seen.size, 1);
  };
  return {
    admit(caller) {
      const now = clock();
      seen.set(caller, now);
      const active = activeCallers(now);
      const mine = perCaller.get(caller) ?? 0;
      const contended = total * 2 >= limits.total;
      const share = contended
        ? Math.min(limits.perCaller, Math.max(1, Math.floor(limits.total / active)))
        : limits.perCaller;
      if (mine >= share) {
        held.set(caller, now);
        return { share };
      }
      // The last eighth is kept for callers with nothing in flight who are not being held back (a patient
      // arriving while others flood): one holding places, or refused in the last second, is refused there
      // as if it were full (a flooder's calls end together, and its other calls would take it at once).
      const heldBack = now - (held.get(caller) ?? Number.NEGATIVE_INFINITY) < HELD_BACK_MS;
      if (total >= limits.total || (contended && (mine > 0 || heldBack) && total >= limits.total - reserve)) {
        held.set(caller, now);
        return 'total';
      }
      perCaller.set(caller, mine + 1);
      total++;
      return 'ok';
    },
    release(caller) {
      total--;
      const left = (perCaller.get(caller) ?? 1) - 1;
      if (left > 0) {
        perCaller.set(caller, left);
      } else {
        perCaller.delete(caller);
      }
    },
  };
}
