import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { ClientApplication } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * The embedded Medplum's OAuth endpoints behave as Medplum's (packages/server/src/oauth/token.ts
 * tokenHandler / handleAuthorizationCode / handleRefreshToken / sendTokenError, oauth/utils.ts
 * getAuthTokens, oauth/logout.ts), never more permissively.
 */
let backend: TestBackend;
let appId: string;

beforeAll(async () => {
  backend = await startTestBackend();
  appId = (await backend.admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.provisioning}|app-northwind` }))
    ?.id as string;
});
afterAll(() => backend?.close());

const post = async (path: string, body: Record<string, string>, form = false) => {
  const response = await backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json' },
    body: form ? new URLSearchParams(body).toString() : JSON.stringify(body),
  });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: response.status, json, text };
};

/** Registers a patient through `clientId` and answers the authorization code (and the PKCE verifier, if any). */
async function registerForCode(clientId: string, options: { pkce: boolean; scope?: string }) {
  const verifier = randomBytes(32).toString('base64url');
  const user = await post('auth/newuser', {
    firstName: 'Ola',
    lastName: 'Auth',
    email: `ola-${randomUUID()}@example.test`,
    password: 'correct horse battery',
    projectId: backend.project.id as string,
    clientId,
    ...(options.scope ? { scope: options.scope } : {}),
    ...(options.pkce
      ? { codeChallenge: createHash('sha256').update(verifier).digest('base64url'), codeChallengeMethod: 'S256' }
      : {}),
  });
  expect(user.status).toBe(200);
  const patient = await post('auth/newpatient', {
    login: user.json.login as string,
    projectId: backend.project.id as string,
  });
  expect(patient.status).toBe(200);
  return { code: patient.json.code as string, verifier };
}

const exchange = (code: string, verifier?: string) =>
  post(
    'oauth2/token',
    { grant_type: 'authorization_code', code, ...(verifier ? { code_verifier: verifier } : {}) },
    true,
  );

describe('the token endpoint, as Medplum answers it', () => {
  it('takes only a form, and answers errors as {error, error_description}', async () => {
    const json = await post('oauth2/token', { grant_type: 'client_credentials' });
    expect(json.status).toBe(400);
    expect(json.text).toBe('Unsupported content type');
    const unknown = await post('oauth2/token', { grant_type: 'password' }, true);
    expect(unknown.status).toBe(400);
    expect(unknown.json).toEqual({ error: 'invalid_request', error_description: 'Unsupported grant_type' });
  });

  it('requires PKCE unless the client application opts out', async () => {
    const withoutPkce = await registerForCode(appId, { pkce: false });
    expect((await exchange(withoutPkce.code)).json).toEqual({
      error: 'invalid_request',
      error_description: 'Missing verification context',
    });
    const withPkce = await registerForCode(appId, { pkce: true });
    expect((await exchange(withPkce.code)).json).toMatchObject({
      error: 'invalid_request',
      error_description: 'Missing code verifier',
    });
    expect((await exchange(withPkce.code, 'wrong')).json).toMatchObject({ error_description: 'Invalid code verifier' });
    expect((await exchange(withPkce.code, withPkce.verifier)).status).toBe(200);

    const optOut = await backend.admin.createResource<ClientApplication>({
      resourceType: 'ClientApplication',
      name: 'confidential test app',
      pkceOptional: true,
    });
    const optedOut = await registerForCode(optOut.id as string, { pkce: false });
    expect((await exchange(optedOut.code)).status).toBe(200);
  });

  it('a code works once: a second use is invalid_grant and revokes the session it gave', async () => {
    const { code, verifier } = await registerForCode(appId, { pkce: true });
    const first = await exchange(code, verifier);
    expect(first.status).toBe(200);
    const again = await exchange(code, verifier);
    expect(again.json).toEqual({ error: 'invalid_grant', error_description: 'Token already granted' });
    const me = await backend.fetch(new URL('auth/me', backend.baseUrl), {
      headers: { authorization: `Bearer ${first.json.access_token}` },
    });
    expect(me.status).toBe(401);
  });

  it("refuses SMART resource scopes, which Medplum applies to the login's policy and this server does not (packages/server/src/fhir/accesspolicy.ts applySmartScopes; 5.1.12 #9123 holds patient/ scopes to her compartment): never a login granted more than Medplum would", async () => {
    const email = `sam-${randomUUID()}@example.test`;
    const password = 'correct horse battery';
    const signUp = await post('auth/newuser', {
      firstName: 'Sam',
      lastName: 'Scope',
      email,
      password,
      projectId: backend.project.id as string,
      clientId: appId,
    });
    expect(signUp.status).toBe(200);
    expect(
      (await post('auth/newpatient', { login: signUp.json.login as string, projectId: backend.project.id as string }))
        .status,
    ).toBe(200);
    for (const scope of ['openid patient/*.read', 'openid user/Observation.rs', 'system/*.*']) {
      const asked = { projectId: backend.project.id as string, clientId: appId, scope };
      for (const [path, body] of [
        [
          'auth/newuser',
          { ...asked, firstName: 'Sam', lastName: 'Scope', email: `s-${randomUUID()}@example.test`, password },
        ],
        ['auth/login', { ...asked, email, password }],
      ] as const) {
        const answer = await post(path, body);
        expect(answer.status, `${path} ${scope}`).toBe(400);
        expect(answer.text).toContain('SMART resource scopes');
      }
    }
    // The refused registrations made no account: the same email registers once it asks for no such scope.
    const refusedEmail = `refused-${randomUUID()}@example.test`;
    const refused = {
      firstName: 'Sam',
      lastName: 'Scope',
      email: refusedEmail,
      password,
      projectId: backend.project.id as string,
    };
    expect((await post('auth/newuser', { ...refused, scope: 'openid patient/*.read' })).status).toBe(400);
    expect(
      (await post('auth/login', { email: refusedEmail, password, projectId: backend.project.id as string })).status,
    ).toBe(400);
    expect((await post('auth/newuser', refused)).status).toBe(200);
    // What the platform's apps ask for still works.
    expect((await registerForCode(appId, { pkce: true, scope: 'openid offline' })).code).toBeTruthy();
  });

  it('issues a refresh token only for the offline scope', async () => {
    const online = await registerForCode(appId, { pkce: true });
    const onlineTokens = await exchange(online.code, online.verifier);
    expect(onlineTokens.status).toBe(200);
    expect(onlineTokens.json.refresh_token).toBeUndefined();

    const offline = await registerForCode(appId, { pkce: true, scope: 'openid offline' });
    const offlineTokens = await exchange(offline.code, offline.verifier);
    expect(typeof offlineTokens.json.refresh_token).toBe('string');
    const refreshed = await post(
      'oauth2/token',
      { grant_type: 'refresh_token', refresh_token: offlineTokens.json.refresh_token as string },
      true,
    );
    expect(refreshed.status).toBe(200);
    expect(typeof refreshed.json.access_token).toBe('string');
  });

  it('signs out at /oauth2/logout; there is no /auth/logout', async () => {
    const { code, verifier } = await registerForCode(appId, { pkce: true });
    const token = (await exchange(code, verifier)).json.access_token as string;
    const authorized = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const legacy = await backend.fetch(new URL('auth/logout', backend.baseUrl), {
      method: 'POST',
      headers: authorized,
      body: '{}',
    });
    expect(legacy.status).toBe(404);
    const out = await backend.fetch(new URL('oauth2/logout', backend.baseUrl), {
      method: 'POST',
      headers: authorized,
      body: '{}',
    });
    expect(out.status).toBe(200);
    const me = await backend.fetch(new URL('auth/me', backend.baseUrl), {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(me.status).toBe(401);
  });
});
