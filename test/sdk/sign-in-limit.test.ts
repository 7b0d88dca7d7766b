import { describe, expect, it } from 'vitest';
import { isLimitedSignIn, signInRetryAfterMs, waitingOnSignInLimit } from '../../src/sdk';

/**
 * Medplum 5.1's sign-in limit as a client meets it (packages/server/src/ratelimit.ts `blockRequest`: the
 * limiter's state spread into the diagnostics, `RateLimit` header, no Retry-After), read by the SDK's helpers.
 * The embedded Medplum answers the same (test/embedded/login-throttle.test.ts).
 */
const limited = (msBeforeNext: number, seconds = Math.ceil(msBeforeNext / 1000)) =>
  Response.json(
    {
      resourceType: 'OperationOutcome',
      id: 'too-many-requests',
      issue: [
        {
          severity: 'error',
          code: 'throttled',
          details: { text: 'Too Many Requests' },
          diagnostics: JSON.stringify({
            _remainingPoints: 0,
            _msBeforeNext: msBeforeNext,
            _consumedPoints: 6,
            _isFirstInDuration: false,
            limit: 5,
          }),
        },
      ],
    },
    { status: 429, headers: { RateLimit: `"requests";r=0;t=${seconds}` } },
  );

const LOGIN = 'https://medplum.example/auth/login';

describe('the sign-in limit', () => {
  it('names the paths Medplum counts: login, newuser, newproject', () => {
    expect(isLimitedSignIn(LOGIN)).toBe(true);
    expect(isLimitedSignIn('https://medplum.example/auth/newuser')).toBe(true);
    expect(isLimitedSignIn('https://medplum.example/auth/newproject')).toBe(true);
    expect(isLimitedSignIn('https://medplum.example/auth/newpatient')).toBe(false);
    expect(isLimitedSignIn('https://medplum.example/oauth2/token')).toBe(false);
  });

  it("reads the wait Medplum states: the diagnostics' _msBeforeNext, else the RateLimit header's t, else nothing", async () => {
    expect(await signInRetryAfterMs(limited(41_234))).toBe(41_234);
    const headerOnly = new Response('{}', { status: 429, headers: { RateLimit: '"requests";r=0;t=17' } });
    expect(await signInRetryAfterMs(headerOnly)).toBe(17_000);
    expect(await signInRetryAfterMs(new Response('{}', { status: 429 }))).toBeUndefined();
    expect(await signInRetryAfterMs(Response.json({ login: 'x' }))).toBeUndefined();
  });

  it('waits as long as Medplum says and asks again, once per refusal; other calls pass through untouched', async () => {
    const answers = [limited(30), limited(20), Response.json({ code: 'abc' })];
    const calls: string[] = [];
    const waits: number[] = [];
    const fetchImpl = (async (input: RequestInfo | URL) => {
      calls.push(String(input));
      return String(input).endsWith('/auth/login') ? (answers.shift() as Response) : limited(10);
    }) as typeof fetch;
    const paced = waitingOnSignInLimit(fetchImpl, { onWait: (ms) => waits.push(ms) });
    const answer = await paced(LOGIN, { method: 'POST', body: '{}' });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ code: 'abc' });
    expect(waits).toEqual([30, 20]);
    expect(calls).toEqual([LOGIN, LOGIN, LOGIN]);
    // Not a sign-in: Medplum's 429 comes back as it is, not retried.
    expect((await paced('https://medplum.example/fhir/R4/Patient')).status).toBe(429);
    expect(calls).toHaveLength(4);
  });

  it('a wait longer than the caller accepts returns the 429 for her app to show', async () => {
    const paced = waitingOnSignInLimit((async () => limited(50_000)) as unknown as typeof fetch, { maxWaitMs: 1000 });
    const answer = await paced(LOGIN, { method: 'POST', body: '{}' });
    expect(answer.status).toBe(429);
    expect(await signInRetryAfterMs(answer)).toBe(50_000);
  });
});
