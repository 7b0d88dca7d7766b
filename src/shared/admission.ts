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
  /**
   * Calls that may wait for a place while the instance is full (`enter`; 0 or absent: none wait, each is
   * refused at once). A waiting call counts among its caller's `perCaller`.
   */
  waiting?: number;
  /** How long a call waits for a place before it is refused as full (default 5 s). */
  maxWaitMs?: number;
}

/** How long a refused caller stays out of the places kept for newcomers. */
const HELD_BACK_MS = 1_000;

/** How long a caller counts as one of those sharing the instance after her last call. */
const ACTIVE_WINDOW_MS = 10_000;

export type Admission = 'ok' | 'total' | { share: number };

/** The counting behind admission, for any server that knows its caller (the embedded Medplum's port too). */
export interface AdmissionCounter {
  /** 'ok' (then `release` when the call ends), 'total' (the instance is full), or the caller's share. */
  admit(caller: string): Admission;
  /**
   * As `admit`, but a call the full instance cannot take at once waits (up to `waiting` calls, each at
   * most `maxWaitMs`) for the next place freed, which goes to the waiting caller with the fewest calls in
   * flight and waiting (then the longest waiting): a patient with one call is next, however many calls a
   * crowd keeps going. 'total' when the wait ends without a place (or `signal` aborts it).
   */
  enter(caller: string, signal?: AbortSignal): Promise<Admission>;
  release(caller: string): void;
}

/** A call waiting for a place. */
interface Waiter {
  caller: string;
  since: number;
  answer: (admission: Admission) => void;
}

export function admissionCounter(limits: AdmissionLimits, clock: () => number = Date.now): AdmissionCounter {
  const perCaller = new Map<string, number>();
  const seen = new Map<string, number>();
  /** When each caller was last refused. */
  const held = new Map<string, number>();
  let lastPrune = 0;
  let total = 0;
  const reserve = Math.max(1, Math.floor(limits.total / 8));
  const waitingLimit = limits.waiting ?? 0;
  const maxWaitMs = limits.maxWaitMs ?? 5_000;
  /** Each caller's waiting calls, oldest first; callers with none are not in it. */
  const queues = new Map<string, Waiter[]>();
  let waitingCount = 0;
  const take = (caller: string) => {
    perCaller.set(caller, (perCaller.get(caller) ?? 0) + 1);
    total++;
  };
  /** Takes `waiter` out of its queue; false if it was no longer there (admitted, or out already). */
  const unqueue = (waiter: Waiter): boolean => {
    const queue = queues.get(waiter.caller);
    const at = queue?.indexOf(waiter) ?? -1;
    if (!queue || at < 0) {
      return false;
    }
    queue.splice(at, 1);
    if (queue.length === 0) {
      queues.delete(waiter.caller);
    }
    waitingCount--;
    return true;
  };
  /**
   * Places freed go to the waiting caller with the fewest calls in flight and waiting together, then the
   * call waiting longest: a patient with one call waiting goes before accounts that keep dozens going,
   * however many they are and however long they have waited (a newcomer at the back of a round robin
   * would wait a whole round of the crowd).
   */
  const dispatch = () => {
    while (total < limits.total && waitingCount > 0) {
      let next: Waiter | undefined;
      let fewest = Number.POSITIVE_INFINITY;
      for (const [caller, queue] of queues) {
        const backlog = (perCaller.get(caller) ?? 0) + queue.length;
        const head = queue[0] as Waiter;
        if (backlog < fewest || (backlog === fewest && head.since < (next as Waiter).since)) {
          fewest = backlog;
          next = head;
        }
      }
      const waiter = next as Waiter;
      unqueue(waiter);
      take(waiter.caller);
      waiter.answer('ok');
    }
  };
  /**
   * The waiting call to turn away for a newcomer when the waiting places are all taken: the newest call of
   * the caller with the most calls in flight and waiting, if that is more than the one she would have (a
   * crowd of accounts each with one call waiting is her equal: first come, first served among them).
   */
  const evictable = (): Waiter | undefined => {
    let most: Waiter[] | undefined;
    let mostBacklog = 1;
    for (const [caller, queue] of queues) {
      const backlog = (perCaller.get(caller) ?? 0) + queue.length;
      if (backlog > mostBacklog) {
        most = queue;
        mostBacklog = backlog;
      }
    }
    return most?.at(-1);
  };
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
  const counter: AdmissionCounter = {
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
      take(caller);
      return 'ok';
    },
    enter(caller, signal) {
      if (waitingLimit <= 0) {
        return Promise.resolve(counter.admit(caller));
      }
      const now = clock();
      seen.set(caller, now);
      activeCallers(now);
      const waitingOwn = queues.get(caller)?.length ?? 0;
      const mine = (perCaller.get(caller) ?? 0) + waitingOwn;
      if (mine >= limits.perCaller) {
        held.set(caller, now);
        return Promise.resolve({ share: limits.perCaller });
      }
      if (waitingCount === 0 && total < limits.total) {
        take(caller);
        return Promise.resolve('ok');
      }
      if (waitingCount >= waitingLimit) {
        // All waiting places taken: a caller with nothing in flight or waiting takes the place of the
        // newest call of whoever waits most; anyone else is refused as full.
        const evicted = mine === 0 ? evictable() : undefined;
        if (!evicted) {
          held.set(caller, now);
          return Promise.resolve('total');
        }
        unqueue(evicted);
        evicted.answer('total');
      }
      return new Promise<Admission>((resolve) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const onAbort = () => {
          if (unqueue(waiter)) {
            waiter.answer('total');
          }
        };
        const waiter: Waiter = {
          caller,
          since: now,
          answer: (admission) => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', onAbort);
            resolve(admission);
          },
        };
        const queue = queues.get(caller);
        if (queue) {
          queue.push(waiter);
        } else {
          queues.set(caller, [waiter]);
        }
        waitingCount++;
        timer = setTimeout(onAbort, maxWaitMs);
        signal?.addEventListener('abort', onAbort, { once: true });
        if (signal?.aborted) {
          onAbort();
        }
      });
    },
    release(caller) {
      total--;
      const left = (perCaller.get(caller) ?? 1) - 1;
      if (left > 0) {
        perCaller.set(caller, left);
      } else {
        perCaller.delete(caller);
      }
      dispatch();
    },
  };
  return counter;
}
