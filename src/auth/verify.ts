import { createRemoteJWKSet, customFetch, errors, type JWTPayload, jwtVerify } from 'jose';
import { ApiError } from '../errors';

export interface SessionClaims {
  /** `Patient/<id>`: the only profile the API serves. */
  profile: string;
  patientId: string;
  loginId: string;
  /** The app the session was issued to (verified claim; decides the tenant at registration). */
  clientId?: string;
}

export type TokenVerifier = (token: string) => Promise<SessionClaims>;

const unauthenticated = (message: string) =>
  new ApiError('unauthenticated', message, undefined, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });

/**
 * Verifies Medplum access tokens locally: RS256 only, the issuer's JWKS (cached; fetched again when
 * an unknown `kid` shows up, at most every 30 s), issuer and expiry. Only patient sessions pass;
 * staff, bot and machine tokens are 403. Medplum still checks the login on every forwarded call
 * (a revoked session fails there), so this is the fast first gate, not the only one.
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
        algorithms: ['RS256'],
        currentDate: options.clock?.(),
      }));
    } catch (err) {
      if (err instanceof errors.JWKSTimeout || (err instanceof TypeError && !(err instanceof errors.JOSEError))) {
        throw new ApiError('upstream_unavailable', 'The sign-in service is unreachable');
      }
      throw unauthenticated(
        err instanceof errors.JWTExpired ? 'The session has expired' : 'The access token is not valid',
      );
    }
    const profile = typeof payload.profile === 'string' ? payload.profile : '';
    const loginId = typeof payload.login_id === 'string' ? payload.login_id : '';
    if (!profile || !loginId) {
      throw unauthenticated('The access token is not a session token');
    }
    const patient = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(profile);
    if (!patient) {
      throw new ApiError('forbidden', 'Only patient sessions may use this API');
    }
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : undefined;
    return { session: { profile, patientId: patient[1], loginId, clientId }, expiresAt: (payload.exp ?? 0) * 1000 };
  }
}
