import { parseJWTPayload } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueAccessToken } from '../../src/embedded/auth/tokens';
import { startTestBackend, type TestBackend } from '../support/backend';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend({ maxBodyBytes: 256 * 1024 });
});
afterAll(() => backend?.close());

async function call(
  path: string,
  init: RequestInit & { token?: string } = {},
): Promise<{ status: number; body: OperationOutcome }> {
  const headers = new Headers(init.headers);
  const token = init.token ?? backend.patients.alice.token;
  if (token) {
    headers.set('authorization', `Bearer ${token}`);
  }
  if (init.body && !headers.has('content-type')) {
    headers.set('content-type', 'application/fhir+json');
  }
  const response = await backend.fetch(new URL(path, backend.baseUrl), { ...init, headers });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) as OperationOutcome };
}

function expectClientError(result: { status: number; body: OperationOutcome }, status: number): void {
  expect(result.status).toBe(status);
  expect(result.body.resourceType).toBe('OperationOutcome');
  expect(result.body.issue?.[0]?.severity).toBe('error');
}

describe('bad input gets a clear 4xx OperationOutcome, never a 500', () => {
  it('malformed JSON', async () => {
    expectClientError(
      await call('fhir/R4/QuestionnaireResponse', { method: 'POST', body: '{"resourceType": "Questionn' }),
      400,
    );
  });

  it('unknown resource type: 400, as Medplum answers it', async () => {
    // @medplum/core validateResourceType ("Unknown resource type", a structure issue), which Medplum's
    // search (packages/server/src/fhir/search.ts) and writes run before any access check.
    const unknown = { code: 'structure', text: 'Unknown resource type' };
    const search = await call('fhir/R4/NotAType?_count=1');
    expectClientError(search, 400);
    expect(search.body.issue?.[0]).toMatchObject({ code: unknown.code, details: { text: unknown.text } });
    const create = await call('fhir/R4/NotAType', {
      method: 'POST',
      body: JSON.stringify({ resourceType: 'NotAType' }),
    });
    expectClientError(create, 400);
    expect(create.body.issue?.[0]).toMatchObject({ code: unknown.code, details: { text: unknown.text } });
  });

  it('wrong resourceType in the body', async () => {
    const { alice } = backend.patients;
    const body = JSON.stringify({ resourceType: 'Patient', subject: { reference: `Patient/${alice.patient.id}` } });
    expectClientError(await call('fhir/R4/QuestionnaireResponse', { method: 'POST', body }), 400);
  });

  it('oversized body', async () => {
    const body = JSON.stringify({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      text: { status: 'generated', div: 'x'.repeat(300 * 1024) },
    });
    expectClientError(await call('fhir/R4/QuestionnaireResponse', { method: 'POST', body }), 413);
  });

  it('invalid, missing and foreign tokens', async () => {
    expectClientError(await call('fhir/R4/Patient', { token: 'not-a-jwt' }), 401);
    expectClientError(await call('fhir/R4/Patient', { token: '' }), 401);
    const [header, payload] = backend.patients.alice.token.split('.');
    expectClientError(await call('fhir/R4/Patient', { token: `${header}.${payload}.AAAA` }), 401);
  });
});

describe('tokens', () => {
  const aliceClaims = () =>
    parseJWTPayload(backend.patients.alice.token) as { sub: string; login_id: string; profile: string };

  it('an expired token gets 401', async () => {
    const claims = aliceClaims();
    const expired = await issueAccessToken(
      backend.key,
      backend.baseUrl,
      { userId: claims.sub, loginId: claims.login_id, profile: claims.profile, scope: 'openid' },
      new Date(Date.now() - 2 * 3600 * 1000),
    );
    expectClientError(await call('fhir/R4/Patient', { token: expired }), 401);
  });

  it('a token signed by another key (same kid, same claims) gets 401', async () => {
    const claims = aliceClaims();
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({ login_id: claims.login_id, profile: claims.profile, scope: 'openid' })
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .setIssuer(backend.baseUrl)
      .setSubject(claims.sub)
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    expectClientError(await call('fhir/R4/Patient', { token: forged }), 401);
  });

  it('a revoked login gets 401 on its next call though its signature is valid', async () => {
    const { medplum, token } = await backend.login(backend.patients.bob.membership);
    expect((await call('fhir/R4/Patient', { token })).status).toBe(200);
    await medplum.post('oauth2/logout', {});
    expectClientError(await call('fhir/R4/Patient', { token }), 401);
  });
});

describe('Binary', () => {
  it('stores raw bytes and reads them back as bytes, or as a FHIR Binary', async () => {
    const bytes = new Uint8Array([0, 1, 2, 250, 251, 255]);
    const created = await backend.fetch(new URL('fhir/R4/Binary', backend.baseUrl), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${backend.admin.getAccessToken()}`,
        'content-type': 'application/octet-stream',
      },
      body: bytes,
    });
    expect(created.status).toBe(201);
    const { id, contentType } = (await created.json()) as { id: string; contentType: string };
    expect(contentType).toBe('application/octet-stream');
    const raw = await backend.fetch(new URL(`fhir/R4/Binary/${id}`, backend.baseUrl), {
      headers: { authorization: `Bearer ${backend.admin.getAccessToken()}` },
    });
    expect(raw.headers.get('content-type')).toBe('application/octet-stream');
    expect(new Uint8Array(await raw.arrayBuffer())).toEqual(bytes);
    const asFhir = await backend.admin.readResource('Binary', id);
    expect(Buffer.from(asFhir.data as string, 'base64')).toEqual(Buffer.from(bytes));
  });

  it('a body sent without a type is typed the way fetch types it, in process as over HTTP', async () => {
    const upload = async (body: BodyInit) => {
      const created = await backend.fetch(new URL('fhir/R4/Binary', backend.baseUrl), {
        method: 'POST',
        headers: { authorization: `Bearer ${backend.admin.getAccessToken()}` },
        body,
      });
      expect(created.status).toBe(201);
      return ((await created.json()) as { contentType: string }).contentType;
    };
    expect(await upload('plain words')).toBe('text/plain');
    expect(await upload(new Blob([new Uint8Array([137, 80, 78, 71])], { type: 'image/png' }))).toBe('image/png');
  });
});
