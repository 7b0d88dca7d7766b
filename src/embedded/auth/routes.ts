import { createHash, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { WithId } from '@medplum/core';
import {
  badRequest,
  createReference,
  getRateLimitReset,
  getReferenceString,
  OperationOutcomeError,
  Operator,
  unauthorized,
} from '@medplum/core';
import type {
  ClientApplication,
  Login,
  Patient,
  Project,
  ProjectMembership,
  Reference,
  User,
  UserConfiguration,
} from '@medplum/fhirtypes';
import type { Context, MiddlewareHandler } from 'hono';
import { Hono } from 'hono';
import { thrownResponse } from '../fhir-http';
import type { SqliteRepository } from '../store/repo';
import { authenticate, contextForLogin } from './authenticate';
import type { CallerCache } from './cache';
import type { SigningKey } from './keys';
import { jwks } from './keys';
import { AuthThrottle, type AuthThrottleLimits, addressBucket, type SecretAttempt, userIdentity } from './throttle';
import { ACCESS_TOKEN_SECONDS, issueAccessToken, issueRefreshToken, verifyToken } from './tokens';

export interface AuthDeps {
  systemRepo: SqliteRepository;
  key: SigningKey;
  issuer: string;
  now: () => Date;
  callers: CallerCache;
  /** The auth throttle's limits (default AUTH_THROTTLE_LIMITS; the sign-in limit is Medplum's `defaultLoginRateLimit`). */
  throttleLimits?: AuthThrottleLimits;
}

const CODE_TTL_MS = 5 * 60 * 1000;

/** An OAuth error of the token endpoint (RFC 6749 section 5.2), as Medplum's `sendTokenError` answers it. */
class TokenError extends Error {
  constructor(
    readonly error: 'invalid_request' | 'invalid_grant' | 'invalid_client',
    description: string,
    readonly status: 400 | 401 = 400,
  ) {
    super(description);
  }
}

/** Starts one secret check (password, client secret) for an identity from this request's address. */
type SecretCheck = (identity: string | undefined) => SecretAttempt;

/** Medplum's auth surface: JWKS, /oauth2/token, registration, password login, /auth/me, logout. */
export function createAuthRoutes(deps: AuthDeps): Hono {
  const app = new Hono();
  const throttle = new AuthThrottle(deps.now, deps.throttleLimits);
  const secretCheck =
    (c: Context): SecretCheck =>
    (identity) =>
      throttle.beginSecretCheck(identity, addressBucket(peerAddress(c)));
  // Medplum 5.1's per-address sign-in and auth rate limits (`packages/server/src/ratelimit.ts`), for callers
  // with a connection.
  const authRateLimit: MiddlewareHandler = async (c, next) => {
    const address = peerAddress(c);
    if (address === undefined || c.req.path === '/auth/me') {
      return next();
    }
    const { refusal, rateLimit } = throttle.countRequest(addressBucket(address), c.req.path);
    if (refusal) {
      const refused = errorResponse(refusal);
      refused.headers.set('RateLimit', rateLimit);
      return refused;
    }
    await next();
    c.res.headers.set('RateLimit', rateLimit);
  };
  app.use('/auth/*', authRateLimit);
  app.use('/oauth2/*', authRateLimit);
  app.get('/.well-known/jwks.json', (c) => c.json(jwks(deps.key)));
  // Medplum's discovery documents (packages/server/src/wellknown.ts), naming only what this server serves.
  app.get('/.well-known/openid-configuration', (c) => c.json(oauthConfiguration(deps.issuer)));
  app.get('/.well-known/oauth-authorization-server', (c) => c.json(oauthConfiguration(deps.issuer)));
  // The sign-in's first step in Medplum's app (packages/server/src/auth/method.ts): which way this email
  // signs in. No external identity providers here (no DomainConfiguration), so `{}`: the password form.
  app.post('/auth/method', (c) =>
    respond(c, async () => {
      const { email } = await jsonBody(c);
      if (typeof email !== 'string' || !EMAIL.test(email)) {
        throw new OperationOutcomeError(badRequest('Valid email address is required', 'email'));
      }
      return {};
    }),
  );
  app.post('/oauth2/token', async (c) => {
    // Medplum's token endpoint (packages/server/src/oauth/token.ts tokenHandler): a form, and errors as
    // OAuth's `{error, error_description}`, not OperationOutcomes.
    if (!(c.req.header('content-type') ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
      return c.text('Unsupported content type', 400);
    }
    try {
      return c.json(await token(c, deps, secretCheck(c)));
    } catch (err) {
      return err instanceof TokenError
        ? c.json({ error: err.error, error_description: err.message }, err.status)
        : errorResponse(err);
    }
  });
  app.post('/auth/newuser', (c) => respond(c, async () => newUser(await jsonBody(c), deps, secretCheck(c))));
  app.post('/auth/newpatient', (c) => respond(c, async () => newPatient(await jsonBody(c), deps)));
  app.post('/auth/login', (c) => respond(c, async () => passwordLogin(await jsonBody(c), deps, secretCheck(c))));
  app.get('/auth/me', (c) => respond(c, () => me(c, deps)));
  // Medplum signs out at /oauth2/logout (packages/server/src/oauth/logout.ts); there is no /auth/logout.
  app.post('/oauth2/logout', (c) => respond(c, () => logout(c, deps)));
  return app;
}

/**
 * The caller's address: the peer of the connection when @hono/node-server serves the request
 * (`npm run embedded`, `npm start`'s HTTP port), never a header such as X-Forwarded-For, which any
 * client can write. In-process calls have no connection (undefined: see UNKNOWN_ADDRESS).
 */
export function peerAddress(c: Context): string | undefined {
  return (c.env as { incoming?: unknown } | undefined)?.incoming ? getConnInfo(c).remote.address : undefined;
}

async function respond(c: Context, work: () => Promise<unknown>): Promise<Response> {
  try {
    return c.json(await work());
  } catch (err) {
    return errorResponse(err);
  }
}

/** A thrown error as an answer; a throttled one (429) also says when to come back (`Retry-After`, seconds). */
function errorResponse(err: unknown): Response {
  const response = thrownResponse(err);
  const resetMs = err instanceof OperationOutcomeError ? getRateLimitReset(err.outcome) : undefined;
  if (resetMs !== undefined) {
    response.headers.set('Retry-After', String(Math.max(1, Math.ceil(resetMs / 1000))));
  }
  return response;
}

async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  try {
    const body = (await c.req.json()) as unknown;
    if (body && typeof body === 'object' && !Array.isArray(body)) {
      return body as Record<string, unknown>;
    }
  } catch {
    // fall through
  }
  throw new OperationOutcomeError(badRequest('Request body must be a JSON object'));
}

function requireString(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  if (typeof value !== 'string' || value.length === 0) {
    throw new OperationOutcomeError(badRequest(`Missing ${name}`, name));
  }
  return value;
}

const optionalString = (body: Record<string, unknown>, name: string): string | undefined =>
  typeof body[name] === 'string' ? (body[name] as string) : undefined;

/**
 * The scope a sign-in asks for, `openid` by default. SMART resource scopes (`patient/...`, `user/...`,
 * `system/...`) narrow a login's access policy on Medplum (packages/server/src/fhir/accesspolicy.ts
 * `applySmartScopes`; since 5.1.12, #9123, `patient/` scopes also hold it to the patient's compartment).
 * The embedded Medplum does not apply them, so it refuses them rather than grant a login more than Medplum
 * would: nothing of the platform asks for them (patients and clinicians are held by their access policies).
 */
function loginScope(body: Record<string, unknown>): string {
  const scope = optionalString(body, 'scope') ?? 'openid';
  if (scope.split(/\s+/).some((s) => /^(patient|user|system)\//.test(s))) {
    throw new OperationOutcomeError(
      badRequest('SMART resource scopes (patient/, user/, system/) are not supported by this server', 'scope'),
    );
  }
  return scope;
}

// ------------------------------------------------------------------ passwords and codes

export function hashPassword(password: string): string {
  const salt = randomBytes(16);
  return `scrypt$${salt.toString('base64')}$${scryptSync(password, salt, 32).toString('base64')}`;
}

/** Checked against when there is no such user, so that an unknown email costs the same scrypt as a known one. */
let noUserHash: string | undefined;

function verifyPassword(password: string, stored: string | undefined): boolean {
  noUserHash ??= hashPassword(randomBytes(16).toString('hex'));
  const [scheme, salt, hash] = (stored ?? noUserHash).split('$');
  if (scheme !== 'scrypt' || !salt || !hash) {
    return false;
  }
  const actual = scryptSync(password, Buffer.from(salt, 'base64'), 32);
  return timingSafeEqual(actual, Buffer.from(hash, 'base64'));
}

const randomSecret = (): string => randomBytes(32).toString('hex');

function pkceMatches(login: Login, verifier: string | undefined): boolean {
  if (!login.codeChallenge) {
    return true;
  }
  if (!verifier) {
    return false;
  }
  const computed =
    login.codeChallengeMethod === 'S256' ? createHash('sha256').update(verifier).digest('base64url') : verifier;
  return computed === login.codeChallenge;
}

// ------------------------------------------------------------------ logins and tokens

async function createLogin(
  deps: AuthDeps,
  fields: Omit<Login, 'resourceType' | 'authTime'> & { authMethod: Login['authMethod'] },
): Promise<WithId<Login>> {
  return deps.systemRepo.createResource<Login>({
    resourceType: 'Login',
    authTime: deps.now().toISOString(),
    scope: 'openid',
    ...fields,
  });
}

/** Medplum issues a refresh token only when the login asked for it (scope `offline` or `offline_access`). */
const wantsRefresh = (scope: string | undefined): boolean =>
  (scope ?? '').split(/\s+/).some((s) => s === 'offline' || s === 'offline_access');

async function tokensForLogin(deps: AuthDeps, login: WithId<Login>): Promise<Record<string, unknown>> {
  const caller = await contextForLogin(deps.systemRepo, login.id);
  const refreshSecret = wantsRefresh(login.scope) ? randomSecret() : undefined;
  // The code stays on the Login: a second use is recognised, refused and revokes the session (Medplum).
  await deps.systemRepo.updateResource<Login>({ ...login, refreshSecret, granted: true });
  const now = deps.now();
  const clientId = login.client ? login.client.reference?.split('/')[1] : undefined;
  const accessToken = await issueAccessToken(
    deps.key,
    deps.issuer,
    {
      userId: login.user.reference?.split('/')[1] ?? '',
      loginId: login.id,
      profile: getReferenceString(caller.profile) ?? '',
      scope: login.scope ?? 'openid',
      clientId,
    },
    now,
  );
  return {
    token_type: 'Bearer',
    access_token: accessToken,
    refresh_token: refreshSecret
      ? await issueRefreshToken(deps.key, deps.issuer, login.id, refreshSecret, now)
      : undefined,
    expires_in: ACCESS_TOKEN_SECONDS,
    scope: login.scope ?? 'openid',
    project: createReference(caller.project),
    profile: caller.profile,
  };
}

/**
 * Signs a membership in without a password (demo patients, bots, tests): a Login with
 * `authMethod: 'execute'`, then a normal access token for it. Never reachable over HTTP.
 */
export async function mintTokenForMembership(
  deps: AuthDeps,
  membership: WithId<ProjectMembership> | ProjectMembership,
  clientId?: string,
): Promise<string> {
  const login = await createLogin(deps, {
    user: membership.user as Reference<User>,
    membership: createReference(membership as WithId<ProjectMembership>),
    project: membership.project,
    client: clientId ? { reference: `ClientApplication/${clientId}` } : undefined,
    authMethod: 'execute',
  });
  const tokens = await tokensForLogin(deps, login);
  return tokens.access_token as string;
}

async function token(c: Context, deps: AuthDeps, secretCheck: SecretCheck): Promise<unknown> {
  const form = Object.fromEntries(new URLSearchParams(await c.req.text()));
  switch (form.grant_type) {
    case 'client_credentials':
      return clientCredentials(c, form, deps, secretCheck);
    case 'authorization_code':
      return authorizationCode(form, deps);
    case 'refresh_token':
      return refreshToken(form, deps);
    default:
      throw new TokenError('invalid_request', form.grant_type ? 'Unsupported grant_type' : 'Missing grant_type');
  }
}

async function clientCredentials(
  c: Context,
  form: Record<string, string>,
  deps: AuthDeps,
  secretCheck: SecretCheck,
): Promise<unknown> {
  let clientId = form.client_id;
  let clientSecret = form.client_secret;
  const basic = /^Basic (.+)$/i.exec(c.req.header('authorization') ?? '')?.[1];
  if (basic) {
    [clientId, clientSecret] = Buffer.from(basic, 'base64').toString('utf8').split(':');
  }
  // Per address only (throttle.ts): a lockout per client id would let anyone lock a client out.
  const attempt = secretCheck(undefined);
  const client = clientId
    ? await deps.systemRepo.readResource<ClientApplication>('ClientApplication', clientId).catch(() => undefined)
    : undefined;
  const expected = Buffer.from(client?.secret ?? '');
  const given = Buffer.from(clientSecret ?? '');
  if (!client || expected.length === 0 || expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new OperationOutcomeError(unauthorized);
  }
  attempt.succeeded();
  const membership = await deps.systemRepo.searchOne<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'profile', operator: 'eq', value: `ClientApplication/${client.id}` }],
  });
  if (!membership) {
    throw new OperationOutcomeError(unauthorized);
  }
  const login = await createLogin(deps, {
    user: createReference(client),
    client: createReference(client),
    membership: createReference(membership),
    project: membership.project,
    authMethod: 'client',
  });
  return tokensForLogin(deps, login);
}

/**
 * As Medplum's handleAuthorizationCode (packages/server/src/oauth/token.ts): a code is used once (a second
 * use revokes its login), and PKCE is required unless the client application opts out (`pkceOptional`).
 */
async function authorizationCode(form: Record<string, string>, deps: AuthDeps): Promise<unknown> {
  if (!form.code) {
    throw new TokenError('invalid_request', 'Missing code');
  }
  const login = await deps.systemRepo.searchOne<Login>({
    resourceType: 'Login',
    filters: [{ code: 'code', operator: 'eq', value: form.code }],
  });
  const fresh = login && Date.parse(login.authTime) + CODE_TTL_MS > deps.now().getTime();
  if (!login || !fresh) {
    throw new TokenError('invalid_request', 'Invalid code');
  }
  if (form.client_id && login.client?.reference !== `ClientApplication/${form.client_id}`) {
    throw new TokenError('invalid_request', 'Invalid client');
  }
  if (!login.membership) {
    throw new TokenError('invalid_request', 'Invalid profile');
  }
  if (login.granted) {
    await deps.systemRepo.updateResource<Login>({ ...login, revoked: true });
    throw new TokenError('invalid_grant', 'Token already granted');
  }
  if (login.revoked) {
    throw new TokenError('invalid_grant', 'Token revoked');
  }
  const client = login.client ? await readClient(deps, login.client.reference?.split('/')[1]) : undefined;
  if (!client?.pkceOptional) {
    if (!login.codeChallenge) {
      throw new TokenError('invalid_request', 'Missing verification context');
    }
    if (!form.code_verifier) {
      throw new TokenError('invalid_request', 'Missing code verifier');
    }
    if (!pkceMatches(login, form.code_verifier)) {
      throw new TokenError('invalid_request', 'Invalid code verifier');
    }
  }
  return tokensForLogin(deps, login);
}

async function refreshToken(form: Record<string, string>, deps: AuthDeps): Promise<unknown> {
  let claims: { login_id?: string; refresh_secret?: string };
  try {
    claims = await verifyToken(deps.key, deps.issuer, form.refresh_token ?? '', deps.now());
  } catch {
    throw new TokenError('invalid_request', 'Invalid refresh token');
  }
  const login = claims.login_id
    ? await deps.systemRepo.readResource<Login>('Login', claims.login_id).catch(() => undefined)
    : undefined;
  if (!login || !claims.refresh_secret || login.refreshSecret === undefined) {
    throw new TokenError('invalid_request', 'Invalid refresh token');
  }
  if (login.revoked) {
    throw new TokenError('invalid_grant', 'Token revoked');
  }
  const stored = Buffer.from(login.refreshSecret);
  const given = Buffer.from(claims.refresh_secret);
  if (stored.length !== given.length || !timingSafeEqual(stored, given)) {
    throw new TokenError('invalid_request', 'Invalid token');
  }
  return tokensForLogin(deps, login);
}

// ------------------------------------------------------------------ registration and login

/**
 * The User an email names, as Medplum looks it up (packages/server/src/oauth/utils.ts getUserByEmail:
 * getUserByEmailInProject / getUserByEmailWithoutProject): with a project, that project's own user of
 * the email, else the server-wide one (a User without a project); without a project, the server-wide one
 * only. A project-scoped user (a patient, a user invited with `scope: 'project'` or an externalId) is
 * therefore never found without their project, and a user of another project never.
 */
async function userByEmail(deps: AuthDeps, email: string, projectId: string | undefined) {
  const byEmail = { code: 'email', operator: Operator.EXACT, value: email };
  if (projectId) {
    const own = await deps.systemRepo.searchOne<User>({
      resourceType: 'User',
      filters: [byEmail, { code: 'project', operator: Operator.EQUALS, value: `Project/${projectId}` }],
    });
    if (own) {
      return own;
    }
  }
  return deps.systemRepo.searchOne<User>({
    resourceType: 'User',
    filters: [byEmail, { code: 'project', operator: Operator.MISSING, value: 'true' }],
  });
}

async function newUser(body: Record<string, unknown>, deps: AuthDeps, secretCheck: SecretCheck): Promise<unknown> {
  const scope = loginScope(body);
  const email = requireString(body, 'email').toLowerCase();
  const password = requireString(body, 'password');
  if (password.length < 8) {
    throw new OperationOutcomeError(badRequest('Password must be at least 8 characters', 'password'));
  }
  const project = await readProject(deps, optionalString(body, 'projectId'));
  // No password is checked here, but "already registered" tells whether an account exists: each such
  // answer counts against the caller's address (not against the account, which the caller does not own).
  const attempt = secretCheck(undefined);
  const existing = await userByEmail(deps, email, project?.id);
  if (existing) {
    throw new OperationOutcomeError(badRequest('Email already registered', 'email'));
  }
  attempt.succeeded();
  const client = await readClient(deps, optionalString(body, 'clientId'));
  const user = await deps.systemRepo.createResource<User>({
    resourceType: 'User',
    firstName: requireString(body, 'firstName'),
    lastName: requireString(body, 'lastName'),
    email,
    passwordHash: hashPassword(password),
    project: project ? createReference(project) : undefined,
    meta: project ? { project: project.id } : undefined,
  });
  const login = await createLogin(deps, {
    user: createReference(user),
    client: client ? createReference(client) : undefined,
    authMethod: 'password',
    // Medplum's tryLogin: the scope asked for (a refresh token needs `offline`), `openid` by default.
    scope,
    codeChallenge: optionalString(body, 'codeChallenge'),
    codeChallengeMethod: optionalString(body, 'codeChallengeMethod') as Login['codeChallengeMethod'],
  });
  return { login: login.id };
}

async function newPatient(body: Record<string, unknown>, deps: AuthDeps): Promise<unknown> {
  const project = await readProject(deps, requireString(body, 'projectId'));
  if (!project) {
    throw new OperationOutcomeError(badRequest('Project not found', 'projectId'));
  }
  if (!project.defaultPatientAccessPolicy) {
    throw new OperationOutcomeError(badRequest('Project does not allow open registration', 'projectId'));
  }
  const login = await deps.systemRepo.readResource<Login>('Login', requireString(body, 'login')).catch(() => undefined);
  if (!login || login.membership || login.revoked || login.granted) {
    throw new OperationOutcomeError(badRequest('Invalid login', 'login'));
  }
  const user = await deps.systemRepo.readReference<User>(login.user as Reference<User>);
  const patient = await deps.systemRepo.createResource<Patient>({
    resourceType: 'Patient',
    meta: { project: project.id },
    name: [{ given: [user.firstName], family: user.lastName }],
    // As Medplum's createProfile writes it (packages/server/src/auth/utils.ts): the sign-up email, use `work`.
    telecom: user.email ? [{ system: 'email', use: 'work', value: user.email }] : undefined,
  });
  const membership = await deps.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: project.id },
    project: createReference(project),
    user: createReference(user),
    profile: createReference(patient),
    accessPolicy: project.defaultPatientAccessPolicy,
  });
  const code = randomSecret();
  await deps.systemRepo.updateResource<Login>({
    ...login,
    project: createReference(project),
    membership: createReference(membership),
    code,
  });
  return { login: login.id, code };
}

async function passwordLogin(
  body: Record<string, unknown>,
  deps: AuthDeps,
  secretCheck: SecretCheck,
): Promise<unknown> {
  const scope = loginScope(body);
  const email = requireString(body, 'email').toLowerCase();
  const password = requireString(body, 'password');
  // Reserved before anything is looked up: while throttled the answer is 429 whatever the password,
  // and an unknown email is throttled exactly like a known one.
  const attempt = secretCheck(userIdentity(email));
  const client = await readClient(deps, optionalString(body, 'clientId'));
  const projectId = loginProjectId(client, optionalString(body, 'projectId'));
  const user = await userByEmail(deps, email, projectId);
  // The password is checked even without a user: the answer's timing tells nothing. Medplum answers
  // "User not found" before checking a password (oauth/utils.ts tryLogin), which tells who has an
  // account; here every failed lookup or password is the same 400, as strict and telling nothing.
  const matches = verifyPassword(password, user?.passwordHash);
  if (!user || !matches) {
    throw new OperationOutcomeError(badRequest('Email or password is invalid'));
  }
  attempt.succeeded();
  const membership = await loginMembership(deps, user, projectId);
  const code = randomSecret();
  const login = await createLogin(deps, {
    user: createReference(user),
    client: client ? createReference(client) : undefined,
    membership: createReference(membership),
    project: membership.project,
    authMethod: 'password',
    // Medplum's tryLogin: the scope asked for (a refresh token needs `offline`), `openid` by default.
    scope,
    code,
    codeChallenge: optionalString(body, 'codeChallenge'),
    codeChallengeMethod: optionalString(body, 'codeChallengeMethod') as Login['codeChallengeMethod'],
  });
  return { login: login.id, code };
}

/**
 * The project a sign-in is for, as Medplum's getProjectIdByClientId (packages/server/src/auth/utils.ts):
 * the client application's own project, and a `projectId` naming another is refused; else `projectId`.
 */
function loginProjectId(client: ClientApplication | undefined, projectId: string | undefined): string | undefined {
  if (!client) {
    return projectId;
  }
  const own = client.meta?.project;
  if (projectId !== undefined && projectId !== own) {
    throw new OperationOutcomeError(badRequest('Invalid projectId'));
  }
  return own;
}

/**
 * The membership a password sign-in gets, as Medplum's tryLogin and setLoginMembership
 * (packages/server/src/oauth/utils.ts): the user's memberships (of the project, when one is named);
 * none is "User not found", one is taken, and an inactive one is "Profile not active". With several,
 * Medplum answers a login without a code and waits for `auth/profile`, which this server does not
 * serve: the sign-in must name its project.
 */
async function loginMembership(
  deps: AuthDeps,
  user: WithId<User>,
  projectId: string | undefined,
): Promise<WithId<ProjectMembership>> {
  const memberships = await deps.systemRepo.searchResources<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [
      { code: 'user', operator: Operator.EQUALS, value: getReferenceString(user) },
      ...(projectId ? [{ code: 'project', operator: Operator.EQUALS, value: `Project/${projectId}` }] : []),
    ],
    count: 2,
  });
  if (memberships.length === 0) {
    throw new OperationOutcomeError(badRequest('User not found'));
  }
  if (memberships.length > 1) {
    throw new OperationOutcomeError(badRequest('Several memberships: sign in with a projectId', 'projectId'));
  }
  if (memberships[0].active === false) {
    throw new OperationOutcomeError(badRequest('Profile not active'));
  }
  return memberships[0];
}

async function me(c: Context, deps: AuthDeps): Promise<unknown> {
  const caller = await authenticate(deps, c.req.header('authorization'));
  const profile = await deps.systemRepo.readReference(caller.profile).catch(() => undefined);
  const user = await deps.systemRepo.readReference(caller.membership.user as Reference<User>).catch(() => undefined);
  // Exactly the fields Medplum's /auth/me answers (packages/server/src/auth/me.ts), no more: the
  // Project's `secret` (the edge-statement key among them) and the user's password hash stay inside.
  const { project, membership } = caller;
  return {
    project: {
      resourceType: 'Project',
      id: project.id,
      name: project.name,
      description: project.description,
      strictMode: project.strictMode,
      superAdmin: project.superAdmin,
    },
    membership: {
      resourceType: 'ProjectMembership',
      id: membership.id,
      identifier: membership.identifier,
      user: membership.user,
      profile: membership.profile,
      admin: membership.admin,
    },
    profile,
    user: user ? { resourceType: 'User', id: user.id, email: user.email, identifier: user.identifier } : undefined,
    config: await userConfiguration(deps, project, membership),
    accessPolicy: caller.accessPolicy,
  };
}

/**
 * Her UserConfiguration, as Medplum's /auth/me answers it (packages/server/src/auth/me.ts
 * getUserConfiguration): the membership's own, else an empty one; without a menu, Medplum's default one
 * (the app's side menu): Favorites, and Admin for a project admin, Super Admin for a super admin project.
 */
async function userConfiguration(
  deps: AuthDeps,
  project: Project,
  membership: ProjectMembership,
): Promise<UserConfiguration> {
  const own = membership.userConfiguration
    ? await deps.systemRepo
        .readReference(membership.userConfiguration as Reference<UserConfiguration>)
        .catch(() => undefined)
    : undefined;
  const config: UserConfiguration = own ?? { resourceType: 'UserConfiguration' };
  if (config.menu) {
    return config;
  }
  const link = (names: [string, string][]) => names.map(([name, target]) => ({ name, target }));
  const favorites = ['Patient', 'Practitioner', 'Organization', 'ServiceRequest', 'DiagnosticReport', 'Questionnaire'];
  return {
    ...config,
    menu: [
      { title: 'Favorites', link: link(favorites.map((type) => [type, `/${type}`])) },
      ...(membership.admin
        ? [
            {
              title: 'Admin',
              link: link([
                ['Project', '/admin/project'],
                ['AccessPolicy', '/AccessPolicy'],
                ['Subscriptions', '/Subscription'],
                ['Batch', '/batch'],
                ...(project.superAdmin ? [] : ([['Config', '/admin/config']] as [string, string][])),
              ]),
            },
          ]
        : []),
      ...(project.superAdmin
        ? [
            {
              title: 'Super Admin',
              link: link([
                ['Projects', '/Project'],
                ['Super Config', '/admin/super'],
                ['Super AsyncJob', '/admin/super/asyncjob'],
                ['Super DB', '/admin/super/db'],
              ]),
            },
          ]
        : []),
    ],
  };
}

async function logout(c: Context, deps: AuthDeps): Promise<unknown> {
  const caller = await authenticate(deps, c.req.header('authorization'));
  if (caller.login) {
    await deps.systemRepo.updateResource<Login>({ ...caller.login, revoked: true });
  }
  return { ok: true };
}

async function readProject(deps: AuthDeps, projectId: string | undefined): Promise<WithId<Project> | undefined> {
  if (!projectId) {
    return undefined;
  }
  const project = await deps.systemRepo.readResource<Project>('Project', projectId).catch(() => undefined);
  if (!project) {
    throw new OperationOutcomeError(badRequest('Project not found', 'projectId'));
  }
  return project;
}

async function readClient(
  deps: AuthDeps,
  clientId: string | undefined,
): Promise<WithId<ClientApplication> | undefined> {
  if (!clientId) {
    return undefined;
  }
  const client = await deps.systemRepo
    .readResource<ClientApplication>('ClientApplication', clientId)
    .catch(() => undefined);
  if (!client) {
    throw new OperationOutcomeError(badRequest('Client not found', 'clientId'));
  }
  return client;
}

/** An email as express-validator's `isEmail` broadly takes it: one `@`, a dotted domain, no spaces. */
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/;

/**
 * OAuth 2.0 / OpenID discovery as Medplum answers it, limited to what this server implements: the token
 * endpoint with the grants `oauth2/token` takes, the key set, PKCE. Medplum's authorization, userinfo,
 * introspection and registration endpoints are not served here, so they are not named.
 */
function oauthConfiguration(issuer: string): Record<string, unknown> {
  return {
    issuer,
    token_endpoint: `${issuer}oauth2/token`,
    jwks_uri: `${issuer}.well-known/jwks.json`,
    id_token_signing_alg_values_supported: ['RS256'],
    grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
    response_types_supported: ['code'],
    subject_types_supported: ['public'],
    scopes_supported: ['openid', 'profile', 'email'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    code_challenge_methods_supported: ['S256', 'plain'],
  };
}
