import { MedplumClient } from '@medplum/core';
import type { Context } from 'hono';
import type { AppEnv } from '../app-env';
import { upstreamFetch } from './upstream';

export interface MedplumTarget {
  /** Medplum's base URL, ending in `/`. */
  baseUrl: string;
  /** How to reach it: the network by default, or an in-process embedded server. */
  fetch?: typeof fetch;
}

/**
 * How a request reaches Medplum as its patient: her token and the gateway's one deadline-bound fetch.
 * Built per request and cheap; the MedplumClient is made only when a route asks for one (`medplumOf`),
 * since a passed-through read needs none (making one was about 12 µs of every read, profiled).
 */
export interface Upstream {
  baseUrl: string;
  fetch: typeof fetch;
  accessToken: string;
  /** Headers every call for her carries besides her token: `X-Forwarded-For` (see `upstreamFor`). */
  headers: Record<string, string>;
  client?: MedplumClient;
}

/**
 * The app's way to its Medplum: one deadline-bound fetch for every request, each with its own token and
 * her address. Medplum limits requests per client address (60,000 a minute by default, `defaultRateLimit`)
 * and, trusting one proxy hop, takes that address from the last `X-Forwarded-For` entry; without it every
 * patient's calls would count as the gateway's own, and one patient's burst would get everyone 429s. The
 * address is the one the gateway resolved itself (TRUSTED_PROXIES), never what the caller wrote; unknown,
 * nothing is sent and the calls count as the gateway's.
 */
export function upstreamFor(
  target: MedplumTarget,
  timeoutMs: number,
): (accessToken: string, clientAddress: string | undefined) => Upstream {
  const bounded = upstreamFetch(target.fetch ?? fetch, timeoutMs);
  const none: Record<string, string> = {};
  return (accessToken, clientAddress) => ({
    baseUrl: target.baseUrl,
    fetch: bounded,
    accessToken,
    headers: clientAddress ? { 'X-Forwarded-For': clientAddress } : none,
  });
}

/** The request's MedplumClient, made on first use (see `medplumForRequest`). */
export function medplumOf(c: Context<AppEnv>): MedplumClient {
  const upstream = c.get('upstream');
  upstream.client ??= medplumForRequest(upstream);
  return upstream.client;
}

/**
 * One MedplumClient per request, carrying the patient's own token, so that Medplum's access policy
 * decides what the patient sees. No cache (cacheTime 0), no batching, and no automatic retries:
 * a non-idempotent call (a bot's $execute) must never run twice because a reply was slow.
 */
function medplumForRequest(upstream: Upstream): MedplumClient {
  return new ServerMedplumClient({
    baseUrl: upstream.baseUrl,
    fetch: upstream.fetch,
    cacheTime: 0,
    autoBatchTime: 0,
    maxRetries: 0,
    accessToken: upstream.accessToken,
    defaultHeaders: upstream.headers,
  });
}

/**
 * MedplumClient without its browser-tab sync. Its constructor calls `window.addEventListener`,
 * which on Node and Workers throws a ReferenceError that it then swallows: an Error with a stack
 * trace on every request, close to a tenth of the gateway's own work per call (profiled under
 * `npm run bench` load).
 * The method is private to Medplum; if a release renames it, this override is simply unused.
 */
class ServerMedplumClient extends MedplumClient {}
Object.defineProperty(ServerMedplumClient.prototype, 'setupStorageListener', { value: () => undefined });

/**
 * The token as it is. MedplumClient decodes the JWT twice when given one: for its expiry, to refresh
 * early, and for a login claim, which only its profile refresh (`auth/me`) reads. A per-request
 * client does neither, and the gateway has already verified and decoded the token. Medplum's own
 * field is set; were it renamed, every call would go out without a token and fail as 401, which the
 * tests would show at once.
 */
Object.defineProperty(ServerMedplumClient.prototype, 'setAccessToken', {
  value(this: { accessToken?: string }, token: string) {
    this.accessToken = token;
  },
});
