import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Medplum limits requests per client address (packages/server/src/ratelimit.ts: `getRateLimitKey` keys on
 * `req.ip`) and, trusting one proxy hop (packages/server/src/app.ts: `app.set('trust proxy', 1)`), reads it
 * from the last X-Forwarded-For entry. The gateway therefore names the patient's address (as it resolved it from
 * the connection and TRUSTED_PROXIES) on every call it makes to Medplum for her, so that her calls
 * count as hers and not as the gateway's, shared with every patient.
 */
const seen: (string | null)[] = [];
let gw: TestGateway;
let anonymous: TestGateway;
beforeAll(async () => {
  const recording = (backendFetch: typeof fetch): typeof fetch =>
    (async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input);
      // The key set the gateway verifies tokens with is its own call, for nobody in particular.
      if (!url.includes('/.well-known/jwks.json')) {
        const headers = new Headers(input instanceof Request ? input.headers : init?.headers);
        seen.push(headers.get('x-forwarded-for'));
      }
      return backendFetch(input, init);
    }) as typeof fetch;
  gw = await startTestGateway((backend) => ({
    medplum: { baseUrl: backend.baseUrl, fetch: recording(backend.fetch) },
  }));
  // A gateway that cannot vouch for any address (no peer known).
  anonymous = await startTestGateway((backend) => ({
    medplum: { baseUrl: backend.baseUrl, fetch: recording(backend.fetch) },
    peerAddress: () => undefined,
  }));
});
afterAll(async () => {
  await gw?.close();
  await anonymous?.close();
});

describe("the patient's address goes to Medplum with every call made for her", () => {
  it('on a passed-through read, a search and a workflow: the address the gateway resolved, never what the client wrote to its left', async () => {
    // Behind the test's trusted load balancer: the rightmost untrusted entry is the client.
    const headers = { 'X-Forwarded-For': '198.51.100.66, 203.0.113.9' };
    for (const path of ['/v1/patient/profile', '/v1/fhir/Observation', '/v1/tasks']) {
      seen.length = 0;
      const answer = await gw.call('GET', path, { headers });
      expect(answer.status, path).toBe(200);
      expect(seen.length, path).toBeGreaterThan(0);
      expect(new Set(seen), path).toEqual(new Set(['203.0.113.9']));
    }
  });

  it('with no address it can vouch for, the gateway sends none (its calls count as its own)', async () => {
    seen.length = 0;
    const answer = await anonymous.call('GET', '/v1/patient/profile', {
      headers: { 'X-Forwarded-For': '203.0.113.9' },
    });
    expect(answer.status).toBe(200);
    expect(seen).toEqual([null]);
  });
});
