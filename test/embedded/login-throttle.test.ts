import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { getRateLimitReset } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_THROTTLE_LIMITS, AuthThrottle, addressBucket } from '../../src/embedded/auth/throttle';
import { signInRetryAfterMs } from '../../src/sdk';
import { startTestBackend, type TestBackend } from '../support/backend';

/** The embedded Medplum's clock runs with real time plus this offset: a test moves time on, never sleeps. */
let offsetMs = 0;
let backend: TestBackend;
beforeAll(async () => {
  // The failed-secret rules are tested apart from Medplum 5.1's 5 sign-ins a minute (tested below, on its own server).
  backend = await startTestBackend({ clock: () => new Date(Date.now() + offsetMs), loginRateLimit: 100_000 });
});
afterAll(() => backend?.close());

const { identity, address, requests, signIns } = AUTH_THROTTLE_LIMITS;
const PASSWORD = 'correct horse battery';

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/**
 * A call as @hono/node-server hands it to the app: the connection's socket in `env.incoming`, from which
 * the embedded Medplum takes the peer address. Without an address: the in-process fetch (no connection).
 */
async function post(
  path: string,
  body: unknown,
  from?: string,
  headers: Record<string, string> = {},
  on: TestBackend = backend,
): Promise<Answer> {
  const form = path === 'oauth2/token';
  const request = new Request(new URL(path, on.baseUrl), {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json', ...headers },
    body: form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body),
  });
  const response = from
    ? await on.app.fetch(request, { incoming: { socket: { remoteAddress: from } } })
    : await on.fetch(request);
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}

const login = (email: string, password: string, from?: string) =>
  post('auth/login', { email, password, projectId: backend.project.id }, from);

/** A patient with a password, registered as a patient app does it (`/auth/newuser` then `/auth/newpatient`). */
async function registerPatient(email: string): Promise<void> {
  const user = await post('auth/newuser', {
    firstName: 'Tess',
    lastName: 'Throttle',
    email,
    password: PASSWORD,
    projectId: backend.project.id,
  });
  expect(user.status).toBe(200);
  const patient = await post('auth/newpatient', { login: user.body.login, projectId: backend.project.id });
  expect(patient.status).toBe(200);
}

/** A 429 as Medplum answers it (`tooManyRequests` + `rate-limit-reset`), plus `Retry-After` in seconds. */
function expectThrottled(answer: Answer, maxSeconds: number): number {
  expect(answer.status).toBe(429);
  const outcome = answer.body as unknown as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue?.[0]).toMatchObject({ severity: 'error', code: 'throttled' });
  const seconds = Number(answer.headers.get('retry-after'));
  expect(seconds).toBeGreaterThan(0);
  expect(seconds).toBeLessThanOrEqual(maxSeconds);
  expect(getRateLimitReset(outcome)).toBe(seconds * 1000);
  return seconds;
}

function expectWrongPassword(answer: Answer): void {
  expect(answer.status).toBe(400);
  expect(answer.body.resourceType).toBe('OperationOutcome');
}

describe('failed-login throttling (stricter than Medplum: packages/server/src/oauth/utils.ts has none; shaped like packages/server/src/auth/mfalimit.ts)', () => {
  it('wrong passwords answer 400 up to the limit, then 429 with Retry-After, even for the right password, from any address', async () => {
    await registerPatient('tess@example.test');
    for (let i = 0; i < identity.limit; i++) {
      expectWrongPassword(await login('tess@example.test', `wrong ${i}`, '198.51.100.1'));
    }
    expectThrottled(await login('tess@example.test', 'wrong again', '198.51.100.1'), identity.windowMs / 1000);
    // The right password learns nothing while throttled, nor does another address or a respelt email.
    expectThrottled(await login('tess@example.test', PASSWORD, '198.51.100.1'), identity.windowMs / 1000);
    expectThrottled(await login('tess@example.test', PASSWORD, '198.51.100.2'), identity.windowMs / 1000);
    expectThrottled(await login('  TESS@Example.test ', PASSWORD, '198.51.100.2'), identity.windowMs / 1000);

    // Another identity from another address is unaffected.
    await registerPatient('other@example.test');
    expect((await login('other@example.test', PASSWORD, '198.51.100.3')).status).toBe(200);

    // After the window, the right password works again.
    offsetMs += identity.windowMs;
    const after = await login('tess@example.test', PASSWORD, '198.51.100.1');
    expect(after.status).toBe(200);
    expect(after.body.code).toEqual(expect.any(String));
  });

  it('a success resets the identity: the next mistakes start again from zero', async () => {
    await registerPatient('reset@example.test');
    for (let i = 0; i < identity.limit - 1; i++) {
      expectWrongPassword(await login('reset@example.test', `wrong ${i}`, '198.51.100.10'));
    }
    expect((await login('reset@example.test', PASSWORD, '198.51.100.10')).status).toBe(200);
    for (let i = 0; i < identity.limit; i++) {
      expectWrongPassword(await login('reset@example.test', `wrong ${i}`, '198.51.100.10'));
    }
    expectThrottled(await login('reset@example.test', PASSWORD, '198.51.100.10'), identity.windowMs / 1000);
  });

  it('guesses sent all at once get no more tries than guesses sent one by one', async () => {
    await registerPatient('burst@example.test');
    const answers = await Promise.all(
      Array.from({ length: 3 * identity.limit }, (_, i) => login('burst@example.test', `wrong ${i}`, '198.51.100.30')),
    );
    expect(answers.filter((a) => a.status === 400)).toHaveLength(identity.limit);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(2 * identity.limit);
  });

  it('the per-address limit trips across many identities (password spraying), for known and unknown emails alike', async () => {
    await registerPatient('sprayed@example.test');
    for (let i = 0; i < address.limit; i++) {
      expectWrongPassword(await login(`nobody${i}@example.test`, 'Winter2025!', '203.0.113.7'));
    }
    expectThrottled(await login('nobody-new@example.test', 'Winter2025!', '203.0.113.7'), address.windowMs / 1000);
    expectThrottled(await login('sprayed@example.test', PASSWORD, '203.0.113.7'), address.windowMs / 1000);
    // The same account from elsewhere is fine: the address, not the account, is throttled.
    expect((await login('sprayed@example.test', PASSWORD, '203.0.113.8')).status).toBe(200);
    // Registration from the throttled address is refused too (it would tell which emails have accounts).
    const registration = await post(
      'auth/newuser',
      {
        firstName: 'A',
        lastName: 'B',
        email: 'sprayed@example.test',
        password: 'any password',
        projectId: backend.project.id,
      },
      '203.0.113.7',
    );
    expectThrottled(registration, address.windowMs / 1000);
  });

  it('an IPv6 client is one address per /64', async () => {
    for (let i = 0; i < address.limit; i++) {
      expectWrongPassword(await login(`v6-${i}@example.test`, 'Winter2025!', `2001:db8:7:7::${(i + 1).toString(16)}`));
    }
    expectThrottled(await login('v6-new@example.test', 'Winter2025!', '2001:db8:7:7:ffff::1'), address.windowMs / 1000);
    expect(addressBucket('::ffff:192.0.2.4')).toBe('192.0.2.4');
    expect(addressBucket('2001:db8:7:7:1:2:3:4')).toBe(addressBucket('2001:db8:7:7::9'));
    expect(addressBucket('2001:db8:7:8::1')).not.toBe(addressBucket('2001:db8:7:7::1'));
  });

  it('client_credentials: wrong client secrets are throttled per address, and never lock the client out', async () => {
    const clientId = backend.adminClient.id as string;
    const secret = backend.adminClient.secret as string;
    const token = (clientSecret: string, from: string) =>
      post(
        'oauth2/token',
        { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
        from,
      );
    for (let i = 0; i < identity.limit + 5; i++) {
      expect((await token(`wrong-${i}`, '198.51.100.20')).status).toBe(401);
    }
    // Anyone can send wrong secrets for a client id; the client itself still signs in from elsewhere.
    expect((await token(secret, '198.51.100.21')).status).toBe(200);
    for (let i = identity.limit + 5; i < address.limit; i++) {
      expect((await token(`wrong-${i}`, '198.51.100.20')).status).toBe(401);
    }
    expectThrottled(await token(secret, '198.51.100.20'), address.windowMs / 1000);
    offsetMs += address.windowMs;
    expect((await token(secret, '198.51.100.20')).status).toBe(200);
  });

  it('callers without a connection (the in-process fetch) share one address bucket', async () => {
    for (let i = 0; i < address.limit; i++) {
      expectWrongPassword(await login(`inproc${i}@example.test`, 'Winter2025!'));
    }
    expectThrottled(await login('inproc-new@example.test', 'Winter2025!'), address.windowMs / 1000);
    offsetMs += address.windowMs;
    expectWrongPassword(await login('inproc-new@example.test', 'Winter2025!'));
  });
});

describe("Medplum 5.1's per-address sign-in and auth request limits (packages/server/src/ratelimit.ts)", () => {
  /** A server with Medplum 5.1's default limits. */
  let limited: TestBackend;
  beforeAll(async () => {
    limited = await startTestBackend({ clock: () => new Date(Date.now() + offsetMs) });
  });
  afterAll(() => limited?.close());
  const postLimited = (path: string, body: unknown, from?: string) => post(path, body, from, {}, limited);
  /** Medplum 5.1's 429 of a rate limit: `tooManyRequests`, the limiter's state in its diagnostics, `RateLimit`. */
  async function expectRateLimited(answer: Answer, limit: number): Promise<void> {
    expect(answer.status).toBe(429);
    expect(answer.headers.get('ratelimit')).toMatch(/^"requests";r=0;t=\d+$/);
    expect(answer.headers.get('retry-after')).toBeNull();
    const outcome = answer.body as unknown as OperationOutcome;
    expect(outcome).toMatchObject({
      resourceType: 'OperationOutcome',
      id: 'too-many-requests',
      issue: [{ severity: 'error', code: 'throttled', details: { text: 'Too Many Requests' } }],
    });
    const diagnostics = JSON.parse(outcome.issue?.[0]?.diagnostics ?? '{}');
    expect(Object.keys(diagnostics)).toEqual([
      '_remainingPoints',
      '_msBeforeNext',
      '_consumedPoints',
      '_isFirstInDuration',
      'limit',
    ]);
    expect(diagnostics).toMatchObject({ _remainingPoints: 0, _isFirstInDuration: false, limit });
    expect(diagnostics._msBeforeNext).toBeGreaterThan(0);
    expect(diagnostics._msBeforeNext).toBeLessThanOrEqual(60_000);
    // What a patient app reads of it (the SDK's helper), the same wait.
    const response = Response.json(answer.body, { status: 429, headers: answer.headers });
    expect(await signInRetryAfterMs(response)).toBe(diagnostics._msBeforeNext);
  }

  it('sign-ins and registrations: 5 a minute from one address (auth/login and auth/newuser together), then 429 as Medplum 5.1 answers it', async () => {
    const from = '192.0.2.60';
    for (let i = 0; i < signIns.limit; i++) {
      const answer =
        i % 2 === 0
          ? await postLimited('auth/login', {}, from)
          : await postLimited('auth/newuser', { projectId: 'x' }, from);
      expect(answer.status).toBe(400);
      expect(answer.headers.get('ratelimit')).toMatch(new RegExp(`^"requests";r=${signIns.limit - i - 1};t=\\d+$`));
    }
    await expectRateLimited(await postLimited('auth/login', {}, from), signIns.limit);
    await expectRateLimited(await postLimited('auth/newuser', {}, from), signIns.limit);
    await expectRateLimited(await postLimited('auth/newproject', {}, from), signIns.limit);
    // Another address, the rest of auth from this one, and in-process callers go on.
    expect((await postLimited('auth/login', {}, '192.0.2.61')).status).toBe(400);
    expect((await postLimited('auth/newpatient', {}, from)).status).toBe(400);
    expect((await postLimited('oauth2/token', { grant_type: 'password' }, from)).status).toBe(400);
    expect((await postLimited('auth/login', {})).status).toBe(400);
    // The window is a minute from its first sign-in.
    offsetMs += signIns.windowMs;
    expect((await postLimited('auth/login', {}, from)).status).toBe(400);
  });

  it("the server's setting raises it (Medplum's defaultLoginRateLimit)", async () => {
    const raised = await startTestBackend({ loginRateLimit: 7 });
    try {
      const call = () =>
        raised.app.fetch(
          new Request(new URL('auth/login', raised.baseUrl), {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{}',
          }),
          { incoming: { socket: { remoteAddress: '192.0.2.62' } } },
        );
      for (let i = 0; i < 7; i++) {
        expect((await call()).status).toBe(400);
      }
      expect((await call()).status).toBe(429);
    } finally {
      raised.close();
    }
  });

  it('counts every other /auth and /oauth2 request of a connected client: 1,200 a minute, then 429 as Medplum 5.1 answers it', async () => {
    for (let i = 0; i < requests.limit; i++) {
      const answer = await postLimited('auth/newpatient', {}, '192.0.2.50');
      expect(answer.status).toBe(400);
      if (i % 200 === 0) {
        expect(answer.headers.get('ratelimit')).toMatch(new RegExp(`^"requests";r=${requests.limit - i - 1};t=\\d+$`));
      }
    }
    await expectRateLimited(await postLimited('auth/newpatient', {}, '192.0.2.50'), requests.limit);
    offsetMs += requests.windowMs;
    expect((await postLimited('auth/newpatient', {}, '192.0.2.50')).status).toBe(400);
  });

  it('over HTTP the address is the connection peer: X-Forwarded-For is not believed', async () => {
    const server = serve({ fetch: limited.app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const call = async (i: number): Promise<Answer> => {
        const response = await fetch(new URL('auth/login', base), {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': `10.9.${i >> 8}.${i & 255}` },
          body: JSON.stringify({
            email: `http${i}@example.test`,
            password: 'Winter2025!',
            projectId: limited.project.id,
          }),
        });
        return {
          status: response.status,
          headers: response.headers,
          body: (await response.json()) as Record<string, unknown>,
        };
      };
      for (let i = 0; i < signIns.limit; i++) {
        const answer = await call(i);
        expectWrongPassword(answer);
        expect(answer.headers.get('ratelimit')).toMatch(/^"requests";/);
      }
      await expectRateLimited(await call(signIns.limit), signIns.limit);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('bounded memory', () => {
  it('keeps at most maxEntries keys per table, forgetting the least recently used first', () => {
    let now = 0;
    const throttle = new AuthThrottle(() => new Date(now), {
      ...AUTH_THROTTLE_LIMITS,
      identity: { limit: 1, windowMs: 60_000 },
      maxEntries: 3,
    });
    throttle.beginSecretCheck('user:a', 'x');
    expect(() => throttle.beginSecretCheck('user:a', 'x')).toThrow();
    for (const key of ['user:b', 'user:c', 'user:d']) {
      throttle.beginSecretCheck(key, 'x');
    }
    // 'user:a' was the least recently used of four keys in a table of three: forgotten.
    expect(() => throttle.beginSecretCheck('user:a', 'x')).not.toThrow();
    now += 60_000;
    expect(() => throttle.beginSecretCheck('user:d', 'x')).not.toThrow();
  });
});
