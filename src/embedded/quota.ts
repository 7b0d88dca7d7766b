import { OperationOutcomeError, tooManyRequests } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import type { CallerContext } from './context';

/** Medplum's default FHIR quota per membership and minute (config `defaultFhirQuota`). */
export const DEFAULT_FHIR_QUOTA = 50_000;

/** What each interaction costs (packages/server/src/fhir/fhirquota.ts; measured the same on 5.0.10). */
export const QUOTA_POINTS = { read: 1, history: 10, search: 20, write: 100 } as const;

const WINDOW_MS = 60_000;

interface Window {
  startedAt: number;
  consumed: number;
}

/**
 * Medplum's FHIR quota (packages/server/src/fhir/fhirquota.ts, context.ts): points per membership per
 * minute (the Project's `userFhirQuota` system setting, else the server default) and per project (its
 * `totalFhirQuota`, else ten times the membership's), in fixed windows that start at the first point spent.
 * A call over either is refused before it does anything: 429 with Medplum's diagnostics, whose
 * `_msBeforeNext` says when the window ends. The system itself (super admin) is never counted.
 */
export class FhirQuota {
  private readonly windows = new Map<string, Window>();
  /** Points spent since start (or `resetSpending`) by membership id, refused calls included, as Medplum counts them. */
  private readonly totals = new Map<string, number>();

  constructor(
    private readonly defaultLimit: number = DEFAULT_FHIR_QUOTA,
    private readonly now: () => number = () => Date.now(),
  ) {}

  consume(caller: CallerContext, points: number): void {
    if (caller.system || !caller.membership?.id) {
      return;
    }
    const { userLimit, projectLimit } = this.limitsOf(caller);
    const now = this.now();
    this.totals.set(caller.membership.id, (this.totals.get(caller.membership.id) ?? 0) + points);
    const user = this.charge(`membership:${caller.membership.id}`, points, now);
    if (user.consumed > userLimit) {
      throw new OperationOutcomeError(refusal(user, userLimit, now));
    }
    const project = this.charge(`project:${caller.project.id}`, points, now);
    if (project.consumed > projectLimit) {
      throw new OperationOutcomeError(refusal(project, projectLimit, now));
    }
  }

  /** What each membership has spent (the bench's per-bot cost of a journey). */
  spending(): ReadonlyMap<string, number> {
    return new Map(this.totals);
  }

  resetSpending(): void {
    this.totals.clear();
  }

  /**
   * The `RateLimit` header Medplum puts on every FHIR answer (fhirquota.ts, attachRateLimitHeader): the
   * points left of the tighter of the two windows and the seconds until it ends. MedplumClient waits that
   * long before retrying a 429 (when its `maxRetryTime` allows).
   */
  header(caller: CallerContext): string | undefined {
    if (caller.system || !caller.membership?.id) {
      return undefined;
    }
    const now = this.now();
    const { userLimit, projectLimit } = this.limitsOf(caller);
    const states = [
      [this.windows.get(`membership:${caller.membership.id}`), userLimit],
      [this.windows.get(`project:${caller.project.id}`), projectLimit],
    ] as const;
    let remaining = Number.POSITIVE_INFINITY;
    let seconds = 60;
    for (const [window, limit] of states) {
      const live = window && now - window.startedAt < WINDOW_MS ? window : undefined;
      const left = Math.max(0, limit - (live?.consumed ?? 0));
      if (left < remaining) {
        remaining = left;
        seconds = live ? Math.ceil((live.startedAt + WINDOW_MS - now) / 1000) : 60;
      }
    }
    return `"fhirInteractions";r=${remaining};t=${seconds}`;
  }

  /** The membership's minute and the project's (context.ts getFhirRateLimiter): settings, else defaults. */
  private limitsOf(caller: CallerContext): { userLimit: number; projectLimit: number } {
    const setting = (name: string) => caller.project.systemSetting?.find((s) => s.name === name)?.valueInteger;
    const userLimit = setting('userFhirQuota') ?? this.defaultLimit;
    return { userLimit, projectLimit: setting('totalFhirQuota') ?? userLimit * 10 };
  }

  private charge(key: string, points: number, now: number): Window {
    let window = this.windows.get(key);
    if (!window || now - window.startedAt >= WINDOW_MS) {
      window = { startedAt: now, consumed: 0 };
      this.windows.set(key, window);
      this.sweep(now);
    }
    window.consumed += points;
    return window;
  }

  /** Drops windows that have ended, so that the map holds only the last minute's callers. */
  private sweep(now: number): void {
    if (this.windows.size < 1024) {
      return;
    }
    for (const [key, window] of this.windows) {
      if (now - window.startedAt >= WINDOW_MS) {
        this.windows.delete(key);
      }
    }
  }
}

/** Medplum's 429: `tooManyRequests` with the rate limiter's state as diagnostics (fhirquota.ts, block). */
function refusal(window: Window, limit: number, now: number): OperationOutcome {
  const outcome: OperationOutcome = structuredClone(tooManyRequests);
  const diagnostics = {
    _remainingPoints: 0,
    _msBeforeNext: Math.max(0, window.startedAt + WINDOW_MS - now),
    _consumedPoints: window.consumed,
    _isFirstInDuration: false,
    limit,
  };
  outcome.issue[0].diagnostics = JSON.stringify(diagnostics);
  return outcome;
}
