import type { JWTPayload } from 'jose';
import { jwtVerify, SignJWT } from 'jose';
import type { SigningKey } from './keys';

/** Medplum's access-token claims. */
export interface AccessTokenClaims extends JWTPayload {
  login_id: string;
  profile: string;
  scope: string;
  client_id?: string;
}

export const ACCESS_TOKEN_SECONDS = 3600;
export const REFRESH_TOKEN_SECONDS = 14 * 24 * 3600;

export interface TokenSubject {
  userId: string;
  loginId: string;
  profile: string;
  scope: string;
  clientId?: string;
}

/**
 * An access token of the login. `extraClaims` are added as they are (the WebSocket binding token's
 * `subscription_id` and `membership_id`, ../websocket-subscriptions.ts).
 */
export async function issueAccessToken(
  key: SigningKey,
  issuer: string,
  subject: TokenSubject,
  now: Date,
  extraClaims: Record<string, string> = {},
): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  const claims: AccessTokenClaims = {
    ...extraClaims,
    login_id: subject.loginId,
    profile: subject.profile,
    scope: subject.scope,
    ...(subject.clientId ? { client_id: subject.clientId } : {}),
  };
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(subject.userId)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ACCESS_TOKEN_SECONDS);
  if (subject.clientId) {
    jwt.setAudience(subject.clientId);
  }
  return jwt.sign(key.privateKey);
}

/** Refresh tokens are bound to one Login and its current secret: rotating the secret invalidates them. */
export async function issueRefreshToken(
  key: SigningKey,
  issuer: string,
  loginId: string,
  refreshSecret: string,
  now: Date,
): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ login_id: loginId, refresh_secret: refreshSecret })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setIssuedAt(iat)
    .setExpirationTime(iat + REFRESH_TOKEN_SECONDS)
    .sign(key.privateKey);
}

/** Verifies signature (RS256 only: `none` and HS256 are refused), issuer and expiry. */
export async function verifyToken<T extends JWTPayload>(
  key: SigningKey,
  issuer: string,
  token: string,
  now: Date,
): Promise<T> {
  const { payload } = await jwtVerify(token, key.publicKey, {
    issuer,
    algorithms: ['RS256'],
    currentDate: now,
  });
  return payload as T;
}
