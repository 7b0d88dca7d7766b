import type { CapabilityStatement, OperationOutcome } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * What Medplum's app calls before and around its sign-in (issue 26), served by the embedded Medplum with
 * Medplum's semantics; each test names the Medplum source it follows.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const get = (path: string) => backend.fetch(new URL(path, backend.baseUrl));
const post = (path: string, body: unknown) =>
  backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('POST auth/method (packages/server/src/auth/method.ts)', () => {
  it('answers {} for an email, known or not (no external identity provider here: the password form follows), and 400 for no email', async () => {
    for (const email of ['clinician@northwind.example', 'nobody-here@example.org']) {
      const answer = await post('auth/method', { email });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({});
    }
    for (const body of [{}, { email: 'not an email' }, { email: 42 }]) {
      const answer = await post('auth/method', body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      const outcome = (await answer.json()) as OperationOutcome;
      expect(outcome.issue?.[0]).toMatchObject({ severity: 'error', expression: ['email'] });
    }
  });
});

describe('OAuth discovery (packages/server/src/wellknown.ts)', () => {
  it('openid-configuration and oauth-authorization-server name this issuer and only endpoints it serves', async () => {
    for (const path of ['.well-known/openid-configuration', '.well-known/oauth-authorization-server']) {
      const answer = await get(path);
      expect(answer.status).toBe(200);
      const config = (await answer.json()) as Record<string, unknown>;
      expect(config).toMatchObject({
        issuer: backend.baseUrl,
        token_endpoint: `${backend.baseUrl}oauth2/token`,
        jwks_uri: `${backend.baseUrl}.well-known/jwks.json`,
      });
      expect(config.authorization_endpoint).toBeUndefined();
      const keys = await backend.fetch(config.jwks_uri as string);
      expect(((await keys.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
      // The token endpoint is there: a form without a grant is OAuth's invalid_request, not a 404.
      const token = await backend.fetch(config.token_endpoint as string, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
      });
      expect(await token.json()).toMatchObject({ error: 'invalid_request' });
    }
  });
});

describe('GET fhir/R4/metadata (packages/server/src/fhir/routes.ts: served without a token)', () => {
  it('is the CapabilityStatement with or without a token: every type a caller may be granted, with its search parameters; none of the server’s own', async () => {
    const anonymous = await get('fhir/R4/metadata');
    expect(anonymous.status).toBe(200);
    const statement = (await anonymous.json()) as CapabilityStatement;
    expect(statement).toMatchObject({ resourceType: 'CapabilityStatement', kind: 'instance', fhirVersion: '4.0.1' });
    const types = new Map<string, NonNullable<NonNullable<CapabilityStatement['rest']>[number]['resource']>[number]>(
      statement.rest?.[0]?.resource?.map((r) => [r.type, r]),
    );
    expect(types.get('Patient')?.searchParam?.map((p) => p.name)).toEqual(
      expect.arrayContaining(['name', 'birthdate']),
    );
    expect(types.get('Task')?.interaction?.map((i) => i.code)).toEqual(expect.arrayContaining(['read', 'search-type']));
    for (const own of ['Login', 'JsonWebKey']) {
      expect(types.has(own), own).toBe(false);
    }
    const signedIn = await backend.fetch(new URL('fhir/R4/metadata', backend.baseUrl), {
      headers: { authorization: `Bearer ${backend.patients.alice.token}` },
    });
    expect(((await signedIn.json()) as CapabilityStatement).id).toBe(statement.id);
    // Everything else under fhir/R4 still needs a token.
    expect((await get('fhir/R4/Patient')).status).toBe(401);
  });
});

describe('GET auth/me: the app’s side menu (packages/server/src/auth/me.ts getUserConfigurationMenu)', () => {
  const me = async (token: string) =>
    (await (
      await backend.fetch(new URL('auth/me', backend.baseUrl), { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { config: { menu?: { title: string; link: { name: string; target: string }[] }[] } };

  it('a clinician (no UserConfiguration of her own) gets Medplum’s default menu: Favorites, no Admin', async () => {
    const { config } = await me(backend.clinicians.northwind.token);
    expect(config.menu?.map((m) => m.title)).toEqual(['Favorites']);
    expect(config.menu?.[0].link.map((l) => l.target)).toEqual([
      '/Patient',
      '/Practitioner',
      '/Organization',
      '/ServiceRequest',
      '/DiagnosticReport',
      '/Questionnaire',
    ]);
  });
});
