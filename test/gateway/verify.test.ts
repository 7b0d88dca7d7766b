import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../../src/auth/verify';
import { ApiError } from '../../src/errors';

/**
 * The gateway's own token check, on its own: through the gateway, Medplum checks every forwarded token
 * again, and that second check hides a mistake of the first. The verifier's clock is moved, never waited on.
 */
const ISSUER = 'https://medplum.example/';
const ISSUED_AT = Date.parse('2026-03-01T12:00:00Z');
const LIFETIME_S = 3600;
/** The verifier's allowance for clock skew against `exp` (src/auth/verify.ts). */
const TOLERANCE_S = 30;

let privateKey: CryptoKey;
let jwks: string;
beforeAll(async () => {
  const pair = await generateKeyPair('ES384', { extractable: true });
  privateKey = pair.privateKey;
  jwks = JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), alg: 'ES384', kid: 'k1', use: 'sig' }] });
});

/** A patient access token as Medplum issues it, valid from ISSUED_AT for LIFETIME_S. */
const patientToken = () =>
  new SignJWT({ login_id: 'login-1', profile: 'Patient/p-1', scope: 'openid', client_id: 'app-1' })
    .setProtectedHeader({ alg: 'ES384', kid: 'k1', typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(ISSUER)
    .setSubject('user-1')
    .setIssuedAt(ISSUED_AT / 1000)
    .setNotBefore(ISSUED_AT / 1000)
    .setExpirationTime(ISSUED_AT / 1000 + LIFETIME_S)
    .sign(privateKey);

/** A verifier whose clock reads `ISSUED_AT + at` (seconds); `at` can be changed between calls. */
function verifierAt(start: number) {
  const clock = { at: start };
  const verify = createTokenVerifier({
    issuer: ISSUER,
    jwksUrl: `${ISSUER}.well-known/jwks.json`,
    clock: () => new Date(ISSUED_AT + clock.at * 1000),
    fetch: (async () => new Response(jwks, { headers: { 'content-type': 'application/json' } })) as typeof fetch,
  });
  return { verify, clock };
}

/** What the verifier answers: the patient id, or the error code and message it refuses with. */
const outcome = (verify: (token: string) => Promise<{ patientId: string }>, token: string) =>
  verify(token).then(
    (session) => session.patientId,
    (err: unknown) => (err instanceof ApiError ? `${err.code}: ${err.message}` : `thrown: ${String(err)}`),
  );

const EXPIRED = 'unauthenticated: The session has expired';

describe('token expiry, on the verifier’s clock', () => {
  it('accepts a token from issue until exp (plus the skew allowance), and refuses it after', async () => {
    const token = await patientToken();
    for (const [at, expected] of [
      [0, 'p-1'],
      [LIFETIME_S - 1, 'p-1'],
      [LIFETIME_S + TOLERANCE_S - 1, 'p-1'],
      [LIFETIME_S + TOLERANCE_S + 1, EXPIRED],
      [LIFETIME_S + 86_400, EXPIRED],
    ] as const) {
      // A verifier of its own per instant: nothing cached from an earlier instant.
      expect(await outcome(verifierAt(at).verify, token), `at +${at}s`).toBe(expected);
    }
  });

  it('refuses a token whose exp is in the past of the real clock when no clock is given', async () => {
    const verify = createTokenVerifier({
      issuer: ISSUER,
      jwksUrl: `${ISSUER}.well-known/jwks.json`,
      fetch: (async () => new Response(jwks, { headers: { 'content-type': 'application/json' } })) as typeof fetch,
    });
    // ISSUED_AT + 1 h is long past (the token's dates are fixed in 2026-03).
    expect(Date.now()).toBeGreaterThan(ISSUED_AT + (LIFETIME_S + TOLERANCE_S) * 1000);
    expect(await outcome(verify, await patientToken())).toBe(EXPIRED);
  });

  it('the verified-token cache skips the signature check but never outlives exp', async () => {
    const token = await patientToken();
    // Verified once at +10 s, so later calls are answered from the cache (no signature check).
    const { verify, clock } = verifierAt(10);
    expect(await outcome(verify, token)).toBe('p-1');
    clock.at = LIFETIME_S - 1;
    expect(await outcome(verify, token)).toBe('p-1');
    clock.at = LIFETIME_S + TOLERANCE_S + 1;
    expect(await outcome(verify, token)).toBe(EXPIRED);
    clock.at = LIFETIME_S + 86_400;
    expect(await outcome(verify, token)).toBe(EXPIRED);
  });

  it('refuses a token without exp: it would never expire', async () => {
    const token = await new SignJWT({ login_id: 'login-1', profile: 'Patient/p-1', scope: 'openid' })
      .setProtectedHeader({ alg: 'ES384', kid: 'k1', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setAudience(ISSUER)
      .setIssuedAt(ISSUED_AT / 1000)
      .sign(privateKey);
    expect(await outcome(verifierAt(0).verify, token)).toBe('unauthenticated: The access token is not valid');
  });
});
