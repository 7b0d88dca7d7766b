import { createRemoteJWKSet, customFetch, errors, type JWTPayload, jwtVerify } from 'jose';
import { ApiError, forbidden, unauthenticated } from '../errors';

export interface SessionClaims {
  /** `Patient/<id>`: the only profile the API serves. */
  profile: string;
  patientId: string;
  loginId: string;
  /** The app the session was issued to (verified claim; decides the tenant at registration). */
  clientId?: string;
}

export type TokenVerifier = (token: string) => Promise<SessionClaims>;

/** The algorithms of Medplum's signing keys (RS256 before 2025, then ES256, now ES384); never `none` or HMAC. */
const MEDPLUM_ALGORITHMS = ['RS256', 'ES256', 'ES384'];

/** Clock skew allowed against Medplum's `nbf`/`exp` (Medplum sets `nbf` to the moment of issue). */
const CLOCK_TOLERANCE_SECONDS = 30;

/**
 * Verifies Medplum access tokens locally: Medplum's algorithms, the issuer's JWKS (cached; fetched
 * again when an unknown `kid` shows up, at most every 30 s), issuer, expiry (`exp` required), audience
 * and the access-token shape (`scope`, `login_id`, `profile`). Only patient sessions pass; staff, bot
 * and machine tokens are 403. Medplum still checks the login on every forwarded call (a revoked
 * session fails there), so this is the fast first gate, not the only one.
 */
export function createTokenVerifier(options: {
  issuer: string;
  jwksUrl: string;
  fetch?: typeof fetch;
  clock?: () => Date;
  /** Least time between two fetches of the key set (default 30 s). */
  jwksCooldownMs?: number;
}): TokenVerifier {
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), {
    cooldownDuration: options.jwksCooldownMs ?? 30_000,
    cacheMaxAge: 10 * 60_000,
    ...(options.fetch ? { [customFetch]: options.fetch } : {}),
  });
  const verified = new Map<string, { claims: SessionClaims; expiresAt: number }>();
  const now = () => (options.clock?.() ?? new Date()).getTime();
  return async (token) => {
    // A token verified once stays valid until it expires: skip the RSA check on repeat calls
    // (revocation is Medplum's check on the forwarded call either way). Bounded, oldest out first.
    const hit = verified.get(token);
    if (hit && hit.expiresAt > now()) {
      return hit.claims;
    }
    const claims = await verifyOnce(token);
    if (verified.size >= 10_000) {
      verified.delete(verified.keys().next().value as string);
    }
    verified.set(token, { claims: claims.session, expiresAt: claims.expiresAt });
    return claims.session;
  };

  async function verifyOnce(token: string): Promise<{ session: SessionClaims; expiresAt: number }> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, jwks, {
        issuer: options.issuer,
        algorithms: MEDPLUM_ALGORITHMS,
        requiredClaims: ['exp', 'scope'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: options.clock?.(),
      }));
    } catch (err) {
      if (err instanceof errors.JWKSTimeout || (err instanceof TypeError && !(err instanceof errors.JOSEError))) {
        throw new ApiError('upstream_unavailable', 'The sign-in service is unreachable');
      }
      throw err instanceof errors.JWTExpired
        ? unauthenticated('expired', 'The session has expired')
        : unauthenticated('invalid_token', 'The access token is not valid');
    }
    if (!issuedForThisApi(payload)) {
      throw unauthenticated('invalid_token', 'The access token is not valid');
    }
    const profile = typeof payload.profile === 'string' ? payload.profile : '';
    const loginId = typeof payload.login_id === 'string' ? payload.login_id : '';
    if (!profile || !loginId || typeof payload.scope !== 'string') {
      throw unauthenticated('invalid_token', 'The access token is not a session token');
    }
    const patient = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(profile);
    if (!patient) {
      throw forbidden('not_a_patient', 'Only patient sessions may use this API');
    }
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : undefined;
    return { session: { profile, patientId: patient[1], loginId, clientId }, expiresAt: (payload.exp ?? 0) * 1000 };
  }
}

/**
 * `aud` as Medplum sets it on an access token: its issuer (current Medplum: `aud: issuer` in
 * packages/server/src/oauth/keys.ts), or, from older servers, the token's own `client_id` (they set
 * `aud` from `client_id`, so a token issued without a client has neither). One string, never a list.
 * Any other audience is a token meant for someone else. ID tokens (`aud` = client, no `scope`) and
 * refresh tokens (no `scope`, no `profile`) fail the shape checks after this one.
 */
function issuedForThisApi(payload: JWTPayload): boolean {
  const clientId = payload.client_id;
  if (payload.aud === undefined) {
    return clientId === undefined;
  }
  return payload.aud === payload.iss || (typeof clientId === 'string' && payload.aud === clientId);
}
