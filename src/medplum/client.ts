import { MedplumClient } from '@medplum/core';
import type { Context } from 'hono';
import type { AppEnv } from '../app-env';
import { ApiError } from '../errors';
import { admissionCounter } from '../shared/admission';
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
  medplumInFlight?: number,
): (accessToken: string, clientAddress: string | undefined, caller: string) => Upstream {
  const bounded = upstreamFetch(target.fetch ?? fetch, timeoutMs);
  const fair = medplumInFlight ? fairShare(bounded, medplumInFlight, timeoutMs / 2) : undefined;
  const none: Record<string, string> = {};
  return (accessToken, clientAddress, caller) => ({
    baseUrl: target.baseUrl,
    fetch: fair ? fair(caller) : bounded,
    accessToken,
    headers: clientAddress ? { 'X-Forwarded-For': clientAddress } : none,
  });
}

/**
 * At most `places` calls of this instance in flight at Medplum (issue 50 item 4): what Medplum answers in
 * time, not what callers send. A call past them waits (at most `maxWaitMs`, then 503 with Retry-After) and
 * the place freed goes to the caller with the fewest calls in flight and waiting (src/shared/admission.ts):
 * a patient with one call goes before a crowd's dozens. A place is held from the call until its answer is
 * read whole (a bot's run included); the gateway's own admission bounds each caller's calls before this.
 */
function fairShare(bounded: typeof fetch, places: number, maxWaitMs: number): (caller: string) => typeof fetch {
  const counter = admissionCounter({
    perCaller: Number.POSITIVE_INFINITY,
    total: places,
    waiting: Number.POSITIVE_INFINITY,
    maxWaitMs,
  });
  return (caller) =>
    (async (input: RequestInfo | URL, init?: RequestInit) => {
      if ((await counter.enter(caller, init?.signal ?? undefined)) !== 'ok') {
        throw new ApiError(
          'upstream_unavailable',
          'The record service is at capacity; try again shortly',
          { retryAfter: 1 },
          { 'Retry-After': '1' },
        );
      }
      try {
        return await bounded(input, init);
      } finally {
        counter.release(caller);
      }
    }) as typeof fetch;
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
