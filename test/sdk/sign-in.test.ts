import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_PASSWORD, DEMO_TENANTS, demoEmail } from '../../src/provision/demo';
import { createPatientCareClient, type MedplumSignIn, pkce, refreshSignIn, register, signIn } from '../../src/sdk';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * The SDK on its own (issue 51 item 3): a patient app signs in, registers and refreshes without
 * `@medplum/core` (PKCE S256 with Web Crypto, never `plain`), gives the SDK a hook for a fresh token, and
 * sends its own Idempotency-Key.
 */
let gw: TestGateway;
let at: MedplumSignIn;
const gatewayFetch = (seen?: Headers[]) =>
  (async (input: RequestInfo | URL, init?: RequestInit) => {
    seen?.push(new Headers(init?.headers));
    return gw.app.request(String(input), init);
  }) as typeof fetch;

beforeAll(async () => {
  gw = await startTestGateway();
  at = {
    medplumBaseUrl: gw.backend.baseUrl,
    projectId: gw.backend.project.id,
    clientId: DEMO_TENANTS[0].appId,
    fetch: gw.backend.fetch as typeof fetch,
  };
});
afterAll(() => gw?.close());

describe('signing in with the SDK alone', () => {
  it('PKCE is S256: the challenge is the SHA-256 of the verifier, base64url, and each pair is new', async () => {
    const pair = await pkce();
    expect(pair.method).toBe('S256');
    expect(pair.verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(pair.challenge).toBe(createHash('sha256').update(pair.verifier).digest('base64url'));
    expect((await pkce()).verifier).not.toBe(pair.verifier);
  });

  it('signs a patient in, calls the API with a token hook, and refreshes her session', async () => {
    const tokens = await signIn(at, { email: demoEmail('alice', 'northwind'), password: DEMO_PASSWORD });
    expect(tokens.refreshToken).toBeDefined();
    let current = tokens.accessToken;
    let asked = 0;
    const sdk = createPatientCareClient({
      baseUrl: 'http://gateway.test',
      fetch: gatewayFetch(),
      accessToken: () => {
        asked++;
        return current;
      },
    });
    expect((await sdk.patient.profile()).id).toBe(gw.backend.patients.alice.patient.id);
    const refreshed = await refreshSignIn(at, tokens.refreshToken as string);
    expect(refreshed.accessToken).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    current = refreshed.accessToken;
    expect((await sdk.patient.profile()).id).toBe(gw.backend.patients.alice.patient.id);
    expect(asked).toBe(2);
    // A wrong password is Medplum's refusal, said.
    await expect(signIn(at, { email: demoEmail('alice', 'northwind'), password: 'wrong-password' })).rejects.toThrow(
      /Medplum refused auth\/login \(400\)/,
    );
  });

  it('registers a new patient through her tenant’s app; homed once, with the Idempotency-Key the app chose', async () => {
    const tokens = await register(at, {
      firstName: 'Ines',
      lastName: 'Duarte',
      email: `ines-${Date.now()}@example.com`,
      password: 'a long enough password',
    });
    const seen: Headers[] = [];
    const key = `home-${Date.now()}`;
    const sdk = createPatientCareClient({
      baseUrl: 'http://gateway.test',
      fetch: gatewayFetch(seen),
      accessToken: tokens.accessToken,
      idempotencyKey: key,
    });
    const first = await sdk.patient.home();
    const again = await createPatientCareClient({
      baseUrl: 'http://gateway.test',
      fetch: gatewayFetch(seen),
      accessToken: tokens.accessToken,
      idempotencyKey: key,
    }).patient.home();
    expect(again).toEqual(first);
    expect(seen.map((h) => h.get('idempotency-key'))).toEqual([key, key]);
    expect((await sdk.patient.profile()).managingOrganization?.reference).toMatch(/^Organization\//);
  });
});
