import { MedplumClient } from '@medplum/core';
import { upstreamFetch } from './upstream';

export interface MedplumTarget {
  /** Medplum's base URL, ending in `/`. */
  baseUrl: string;
  /** How to reach it: the network by default, or an in-process embedded server. */
  fetch?: typeof fetch;
}

/**
 * One MedplumClient per request, carrying the patient's own token, so that Medplum's access policy
 * decides what the patient sees. No cache (cacheTime 0), no batching, and no automatic retries:
 * a non-idempotent call (a bot's $execute) must never run twice because a reply was slow.
 */
export function medplumForRequest(target: MedplumTarget, accessToken: string, timeoutMs: number): MedplumClient {
  const client = new ServerMedplumClient({
    baseUrl: target.baseUrl,
    fetch: upstreamFetch(target.fetch ?? fetch, timeoutMs),
    cacheTime: 0,
    autoBatchTime: 0,
    maxRetries: 0,
    accessToken,
  });
  return client;
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
