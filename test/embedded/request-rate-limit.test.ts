import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Medplum's general per-address rate limit on the embedded Medplum's HTTP API (issue 24,
 * src/embedded/rate-limit.ts; Medplum's packages/server/src/ratelimit.ts `getRateLimitKey`, keyed on `req.ip`,
 * which packages/server/src/app.ts's `trust proxy` 1 takes from the last X-Forwarded-For entry), with a small limit so a test can reach it; its clock is moved on, never slept.
 */
const LIMIT = 20;
let offsetMs = 0;
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend({ requestRateLimit: LIMIT, clock: () => new Date(Date.now() + offsetMs) });
});
afterAll(() => backend?.close());

/**
 * A call as @hono/node-server hands it over: from a connection (`from`), or in process (no address),
 * with an X-Forwarded-For if given (the gateway's, in process).
 */
const read = (from?: string, forwardedFor?: string) => {
  const alice = backend.patients.alice;
  const request = new Request(new URL(`fhir/R4/Patient/${alice.patient.id}`, backend.baseUrl), {
    headers: {
      authorization: `Bearer ${alice.token}`,
      ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}),
    },
  });
  return from ? backend.app.fetch(request, { incoming: { socket: { remoteAddress: from } } }) : backend.fetch(request);
};

describe('requests per client address', () => {
  it(`allows ${LIMIT} a minute from one address, then 429 with RateLimit and the wait in its diagnostics; others and in-process calls go on`, async () => {
    for (let i = 0; i < LIMIT; i++) {
      const answer = await read('203.0.113.7');
      expect(answer.status).toBe(200);
      expect(answer.headers.get('ratelimit')).toContain(`"requests";r=${LIMIT - i - 1};`);
    }
    const refused = await read('203.0.113.7');
    expect(refused.status).toBe(429);
    // As Medplum 5.1 answers it (ratelimit.ts blockRequest): no Retry-After, the wait in the diagnostics.
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(refused.headers.get('ratelimit')).toMatch(/^"requests";r=0;t=\d+$/);
    const outcome = await refused.json();
    expect(outcome).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'throttled' }],
    });
    expect(JSON.parse(outcome.issue[0].diagnostics)).toMatchObject({ _remainingPoints: 0, limit: LIMIT });
    // The same /64 is the same caller; another address is not.
    expect((await read('2001:db8:1:2::1')).status).toBe(200);
    for (let i = 0; i < LIMIT; i++) {
      await read('2001:db8:1:2::1');
    }
    expect((await read('2001:db8:1:2:ffff::9')).status).toBe(429);
    expect((await read('198.51.100.1')).status).toBe(200);
    expect((await read()).status).toBe(200);
    // A minute later it is served again.
    offsetMs += 61_000;
    expect((await read('203.0.113.7')).status).toBe(200);
  });

  it("an in-process call counts against its last X-Forwarded-For entry (the gateway's patient), as Medplum counts a proxy's calls; a connected client's own is not believed", async () => {
    offsetMs += 61_000;
    for (let i = 0; i < LIMIT; i++) {
      expect((await read(undefined, '192.0.2.99, 203.0.113.50')).status).toBe(200);
    }
    // The last entry is the address: what a client wrote to its left changes nothing.
    expect((await read(undefined, '198.51.100.77, 203.0.113.50')).status).toBe(429);
    // Another patient behind the same gateway has her own count; a connection's peer is its own, whatever it claims.
    expect((await read(undefined, '203.0.113.51')).status).toBe(200);
    expect((await read('198.51.100.2', '203.0.113.50')).status).toBe(200);
    // The connected client that claimed that address did not spend it: it was counted as itself.
    offsetMs += 61_000;
    for (let i = 0; i < LIMIT; i++) {
      await read('198.51.100.3', '203.0.113.60');
    }
    expect((await read(undefined, '203.0.113.60')).status).toBe(200);
  });
});
