import type { WithId } from '@medplum/core';
import { isGone, isNotFound, OperationOutcomeError, unauthorized } from '@medplum/core';
import type { Login, Project, ProjectMembership } from '@medplum/fhirtypes';
import { buildAccessPolicy } from '../access/policy';
import type { CallerContext } from '../context';
import type { SqliteRepository } from '../store/repo';
import type { CallerCache, CallerReader, VerifiedToken } from './cache';
import type { SigningKey } from './keys';
import { type AccessTokenClaims, verifyToken } from './tokens';

export function systemContext(project: Project): CallerContext {
  return {
    system: true,
    project,
    membership: {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${project.id}` },
      user: { reference: 'system' },
      profile: { reference: 'system' },
    },
    profile: { reference: 'system' },
  };
}

export interface Authenticator {
  systemRepo: SqliteRepository;
  key: SigningKey;
  issuer: string;
  now: () => Date;
  callers: CallerCache;
}

/**
 * Resolves a bearer token to the caller, like Medplum's auth middleware: signature, issuer and
 * expiry first, then the Login it names must exist and not be revoked (a signature cannot tell),
 * then its membership and effective access policy. Every failure is the same 401.
 *
 * Both halves are remembered (auth/cache.ts): a verified token until it expires, and the caller of a
 * login until one of the resources it was built from is written. The returned caller is frozen.
 */
export async function authenticate(deps: Authenticator, authorization: string | undefined): Promise<CallerContext> {
  const token = /^Bearer (\S+)$/i.exec(authorization ?? '')?.[1];
  if (!token) {
    throw new OperationOutcomeError(unauthorized);
  }
  const now = deps.now();
  const verified = deps.callers.verifiedToken(token, now) ?? (await verifyAccessToken(deps, token, now));
  const cached = deps.callers.caller(verified);
  if (cached) {
    return cached;
  }
  const build = deps.callers.beginBuild();
  let caller: CallerContext;
  try {
    caller = await contextForLogin(build.reader(deps.systemRepo), verified.loginId);
  } catch (err) {
    deps.callers.abandonBuild(build);
    throw err;
  }
  return deps.callers.endBuild(build, verified, caller, now);
}

async function verifyAccessToken(deps: Authenticator, token: string, now: Date): Promise<VerifiedToken> {
  let claims: AccessTokenClaims;
  try {
    claims = await verifyToken<AccessTokenClaims>(deps.key, deps.issuer, token, now);
  } catch {
    throw new OperationOutcomeError(unauthorized);
  }
  if (typeof claims.login_id !== 'string' || typeof claims.refresh_secret === 'string') {
    throw new OperationOutcomeError(unauthorized);
  }
  const verified: VerifiedToken = { loginId: claims.login_id, expiresAt: claims.exp ?? 0, notBefore: claims.nbf };
  // Our tokens always expire; one that does not is verified on every call rather than remembered forever.
  if (claims.exp !== undefined) {
    deps.callers.rememberToken(token, verified);
  }
  return verified;
}

export async function contextForLogin(systemRepo: CallerReader, loginId: string): Promise<CallerContext> {
  const login = await systemRepo.readResource<Login>('Login', loginId).catch(missingAsUndefined);
  if (!login || login.revoked || !login.membership) {
    throw new OperationOutcomeError(unauthorized);
  }
  const membership = await systemRepo.readReference<ProjectMembership>(login.membership).catch(missingAsUndefined);
  if (!membership || membership.active === false) {
    throw new OperationOutcomeError(unauthorized);
  }
  const project = await systemRepo.readReference<Project>(membership.project);
  return {
    project,
    membership,
    login,
    profile: membership.profile,
    accessPolicy: await buildAccessPolicy(systemRepo, project as WithId<Project>, membership),
  };
}

/** A login or membership that is not there is a 401; the store failing is not the caller's doing. */
function missingAsUndefined(err: unknown): undefined {
  if (err instanceof OperationOutcomeError && (isNotFound(err.outcome) || isGone(err.outcome))) {
    return undefined;
  }
  throw err;
}
