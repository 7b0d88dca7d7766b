import { createHash } from 'node:crypto';
import { isIPv6 } from 'node:net';
import { deepClone, OperationOutcomeError, setRateLimitReset, tooManyRequests } from '@medplum/core';

/**
 * Throttling of the embedded Medplum's auth endpoints.
 *
 * Real Medplum 5.1 (`packages/server/src/ratelimit.ts`) counts, per client IP, sign-ins (`/auth/login`,
 * `/auth/newuser`, `/auth/newproject`): 5 a minute (`defaultLoginRateLimit`), and every other request to
 * `/auth/*` and `/oauth2/*` (but `/auth/me`): 1,200 a minute; beyond either, 429 with the
 * `tooManyRequests` OperationOutcome (its diagnostics the limiter's state) and a `RateLimit` header. Its password check (`packages/server/src/oauth/utils.ts` `authenticate`) has no
 * failure counter of its own; only MFA codes do (`packages/server/src/auth/mfalimit.ts`: an attempt is
 * reserved before the check, per login and per user, and refused with 429 and the `rate-limit-reset`
 * extension while over the limit). The embedded Medplum does both and is stricter: a password check
 * reserves an attempt against the login identity and the client address before it runs, so a refused
 * caller learns nothing (a right password during lockout is 429 too) and concurrent guesses cannot all
 * slip in before the first failure is counted. A client secret check counts against the address only:
 * the secrets it makes are 32 random bytes, and a lockout per client id would only let anyone lock a
 * client (the SMS integration, provisioning) out.
 */

export interface WindowRule {
  /** Hits allowed in one window. */
  limit: number;
  /** The window starts at the first hit (a fixed window, as rate-limiter-flexible's in Medplum). */
  windowMs: number;
}

export interface AuthThrottleLimits {
  /** Failed secret checks per login identity (normalised email, or client id). */
  identity: WindowRule;
  /** Failed secret checks per client address, across identities (password spraying). */
  address: WindowRule;
  /** Sign-ins and registrations per client address, HTTP callers only (Medplum 5.1's `defaultLoginRateLimit`). */
  signIns: WindowRule;
  /** Other auth requests per client address, HTTP callers only (Medplum 5.1's `defaultAuthRateLimit`). */
  requests: WindowRule;
  /** Keys kept per table; beyond it the least recently used are dropped (bounded memory). */
  maxEntries: number;
}

const FIFTEEN_MINUTES = 15 * 60 * 1000;

export const AUTH_THROTTLE_LIMITS: AuthThrottleLimits = {
  identity: { limit: 10, windowMs: FIFTEEN_MINUTES },
  address: { limit: 50, windowMs: FIFTEEN_MINUTES },
  signIns: { limit: 5, windowMs: 60 * 1000 },
  requests: { limit: 1200, windowMs: 60 * 1000 },
  maxEntries: 10_000,
};

/** The paths Medplum 5.1 counts as sign-ins (ratelimit.ts, its `login` category). */
const SIGN_IN_PATHS = new Set(['/auth/login', '/auth/newuser', '/auth/newproject']);

export const isSignInPath = (path: string): boolean => SIGN_IN_PATHS.has(path);

/**
 * The bucket of callers without a connection: the in-process fetch (the gateway's thread, tests) has no
 * peer address. They share ONE bucket rather than skipping the address limit, so a path that loses the
 * address is still limited (fail closed); only this process's own code calls it that way.
 */
export const UNKNOWN_ADDRESS = 'unknown';

interface Window {
  count: number;
  resetAt: number;
}

/** Fixed-window counters by key, at most `maxEntries` of them, least recently used dropped first. */
export class WindowCounters {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly rule: WindowRule,
    private readonly maxEntries: number,
  ) {}

  /** The key's live window, moved to the most recently used end; undefined once expired. */
  private live(key: string, now: number): Window | undefined {
    const window = this.windows.get(key);
    if (!window) {
      return undefined;
    }
    this.windows.delete(key);
    if (window.resetAt <= now) {
      return undefined;
    }
    this.windows.set(key, window);
    return window;
  }

  /** Milliseconds until the key may try again; 0 while it is under the limit. */
  waitMs(key: string, now: number): number {
    const window = this.live(key, now);
    return window && window.count >= this.rule.limit ? window.resetAt - now : 0;
  }

  /** Counts one hit; returns the window it landed in. */
  hit(key: string, now: number): Window {
    let window = this.live(key, now);
    if (!window) {
      window = { count: 0, resetAt: now + this.rule.windowMs };
      this.windows.set(key, window);
      this.evict();
    }
    window.count += 1;
    return window;
  }

  /** Takes back one hit (a reserved attempt that turned out to succeed). */
  unhit(key: string): void {
    const window = this.windows.get(key);
    if (window && window.count > 0) {
      window.count -= 1;
    }
  }

  clear(key: string): void {
    this.windows.delete(key);
  }

  /** Drops the least recently used keys (Map order is use order: `live` moves a key to the end). */
  private evict(): void {
    for (const key of this.windows.keys()) {
      if (this.windows.size <= this.maxEntries) {
        return;
      }
      this.windows.delete(key);
    }
  }
}

/** Medplum's `RateLimit` header for a window of requests (packages/server/src/ratelimit.ts). */
export function requestsHeader(limit: number, window: { count: number; resetAt: number }, now: number): string {
  return `"requests";r=${Math.max(0, limit - window.count)};t=${Math.ceil((window.resetAt - now) / 1000)}`;
}

/**
 * Medplum 5.1's answer past a rate limit (ratelimit.ts `blockRequest`): `tooManyRequests`, its diagnostics the
 * rate-limiter-flexible result spread into an object, so its fields come out with their backing names
 * (`_msBeforeNext`...), plus the limit. No `Retry-After`: Medplum sends only the `RateLimit` header.
 */
export function rateLimited(waitMs: number, limit: number, window: { count: number }): OperationOutcomeError {
  const outcome = deepClone(tooManyRequests);
  outcome.issue[0].diagnostics = JSON.stringify({
    _remainingPoints: 0,
    _msBeforeNext: waitMs,
    _consumedPoints: window.count,
    _isFirstInDuration: false,
    limit,
  });
  return new OperationOutcomeError(outcome);
}

/** The answer while a secret check is throttled: Medplum's `tooManyRequests`, with its `rate-limit-reset` extension. */
export function throttled(waitMs: number): OperationOutcomeError {
  const outcome = deepClone(tooManyRequests);
  setRateLimitReset(outcome, waitMs);
  return new OperationOutcomeError(outcome);
}

/**
 * A client address as a throttling bucket: IPv4 (also when IPv4-mapped) as it is, IPv6 by its /64
 * (one subscriber usually holds a whole /64, so a per-address limit by full IPv6 address is no limit).
 */
export function addressBucket(address: string | undefined): string {
  if (!address) {
    return UNKNOWN_ADDRESS;
  }
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) {
    return mapped[1];
  }
  const bare = address.split('%')[0];
  return isIPv6(bare) ? `${ipv6Prefix64(bare)}::/64` : address;
}

function ipv6Prefix64(address: string): string {
  const [head, tail] = address.split('::');
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  // A trailing dotted IPv4 part stands for two groups.
  const width = (parts: string[]) => parts.reduce((sum, part) => sum + (part.includes('.') ? 2 : 1), 0);
  const left = groups(head);
  const right = groups(tail);
  const all = tail === undefined ? left : [...left, ...Array(8 - width(left) - width(right)).fill('0'), ...right];
  return all
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':');
}

/** One reserved secret check: counted as a failure unless `succeeded()` is called. */
export interface SecretAttempt {
  succeeded(): void;
}

/** The auth throttle of one embedded Medplum (no module state: each server has its own). */
export class AuthThrottle {
  private readonly identities: WindowCounters;
  private readonly addresses: WindowCounters;
  private readonly requests: WindowCounters;
  private readonly signIns: WindowCounters;

  constructor(
    private readonly now: () => Date,
    private readonly limits: AuthThrottleLimits = AUTH_THROTTLE_LIMITS,
  ) {
    this.identities = new WindowCounters(limits.identity, limits.maxEntries);
    this.addresses = new WindowCounters(limits.address, limits.maxEntries);
    this.requests = new WindowCounters(limits.requests, limits.maxEntries);
    this.signIns = new WindowCounters(limits.signIns, limits.maxEntries);
  }

  /**
   * Reserves one secret check for `identity` from `address`, or throws a 429 outcome without the
   * check running. Synchronous, so no other request can slip between the test and the count.
   * `identity` is e.g. `user:<email>` or `client:<id>`, kept only as a hash; without one (a check that
   * reveals something about an account the caller does not own) only the address counts.
   */
  beginSecretCheck(identity: string | undefined, address: string): SecretAttempt {
    const now = this.now().getTime();
    const identityKey = identity === undefined ? undefined : hashIdentity(identity);
    const wait = Math.max(
      identityKey === undefined ? 0 : this.identities.waitMs(identityKey, now),
      this.addresses.waitMs(address, now),
    );
    if (wait > 0) {
      throw throttled(wait);
    }
    if (identityKey !== undefined) {
      this.identities.hit(identityKey, now);
    }
    this.addresses.hit(address, now);
    return {
      // A success clears the identity's failures and takes back only its own address reservation:
      // an attacker's successful logins on their own account do not pay off their failures elsewhere.
      succeeded: () => {
        if (identityKey !== undefined) {
          this.identities.clear(identityKey);
        }
        this.addresses.unhit(address);
      },
    };
  }

  /**
   * Counts one auth request from a connected client against its category (a sign-in, or any other auth
   * request), as Medplum 5.1's per-IP limits do. Over the limit: `refusal`, Medplum's 429 outcome.
   * `rateLimit`: Medplum's `RateLimit` header for the answer.
   */
  countRequest(address: string, path: string): { refusal?: OperationOutcomeError; rateLimit: string } {
    const now = this.now().getTime();
    const signIn = isSignInPath(path);
    const window = (signIn ? this.signIns : this.requests).hit(address, now);
    const { limit } = signIn ? this.limits.signIns : this.limits.requests;
    return {
      refusal: window.count > limit ? rateLimited(window.resetAt - now, limit, window) : undefined,
      rateLimit: requestsHeader(limit, window, now),
    };
  }
}

/** A login identity: the email as Medplum matches it (lower case), also trimmed and NFKC-normalised. */
export function userIdentity(email: string): string {
  return `user:${email.normalize('NFKC').trim().toLowerCase()}`;
}

/** Keys are hashed so the table holds no email address. */
function hashIdentity(identity: string): string {
  return createHash('sha256').update(identity).digest('base64url');
}
