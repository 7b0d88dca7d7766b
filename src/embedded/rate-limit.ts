import type { MiddlewareHandler } from 'hono';
import { peerAddress } from './auth/routes';
import { addressBucket, rateLimited, requestsHeader, WindowCounters } from './auth/throttle';

/** Medplum's `DEFAULT_RATE_LIMIT_PER_MINUTE` (packages/server/src/ratelimit.ts): requests per client IP. */
export const DEFAULT_REQUEST_RATE_LIMIT = 60_000;

/**
 * Medplum's general rate limit: every request from a connected client counts against its
 * address (IPv6 by its /64), at most `limit` a minute; beyond it 429 with Medplum's `tooManyRequests`
 * outcome (the limiter's state in its diagnostics) and its `RateLimit: "requests";r=;t=` header, as 5.1 answers. The auth URLs have their own,
 * stricter limit (auth/routes.ts), and count there instead, as on Medplum. An in-process call (the
 * gateway's, on `npm start`) counts against the address its last `X-Forwarded-For` entry names, as
 * Medplum, trusting one proxy hop, counts a proxy's calls: the gateway sends the patient's address. One
 * without it (the bots; a gateway that cannot vouch for an address) is bounded by the gateway's
 * admission and the FHIR quota instead, where Medplum would count it against the caller's host.
 * A connected client's own `X-Forwarded-For` is not believed (Medplum would take it when reached
 * directly). `limit` -1 turns it off (Medplum's `defaultRateLimit: -1`).
 */
export function requestRateLimit(limit: number, now: () => number, maxEntries = 10_000): MiddlewareHandler {
  const windows = new WindowCounters({ limit, windowMs: 60_000 }, maxEntries);
  return async (c, next) => {
    const address = peerAddress(c) ?? c.req.header('x-forwarded-for')?.split(',').pop()?.trim();
    const authUrl = c.req.path !== '/auth/me' && /^\/(auth|oauth2)\//.test(c.req.path);
    if (limit < 0 || address === undefined || authUrl) {
      return next();
    }
    const at = now();
    const window = windows.hit(addressBucket(address), at);
    const header = requestsHeader(limit, window, at);
    if (window.count > limit) {
      const refused = Response.json(rateLimited(window.resetAt - at, limit, window).outcome, { status: 429 });
      refused.headers.set('RateLimit', header);
      return refused;
    }
    await next();
    c.res.headers.append('RateLimit', header);
  };
}
