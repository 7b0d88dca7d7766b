import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { delay, HttpResponse, http } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AccessLogEntry, createApp, DEFAULT_LIMITS } from '../../src/app';
import { createTokenVerifier } from '../../src/auth/verify';
import { startTestGateway, type TestGateway } from '../support/gateway';

let gw: TestGateway;
const logs: AccessLogEntry[] = [];
beforeAll(async () => {
  gw = await startTestGateway({
    log: (entry) => logs.push(entry),
    limits: { ...DEFAULT_LIMITS, bodyBytes: 64 * 1024 },
  });
});
afterAll(() => gw?.close());

describe('the frame', () => {
  it('refuses a body over the limit with 413 and details.limit, before anything else', async () => {
    const patient = gw.backend.patients.alice.patient;
    const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
      body: { ...patient, text: { status: 'generated', div: 'x'.repeat(100 * 1024) } },
    });
    expect(res.status).toBe(413);
    expect((res.body as { error: { code: string; details: { limit: number } } }).error).toMatchObject({
      code: 'payload_too_large',
      details: { limit: 64 * 1024 },
    });
  });

  it('access logs carry request id, method, route pattern, status and duration, and no PHI or tokens', async () => {
    logs.length = 0;
    const { alice } = gw.backend.patients;
    await gw.call('GET', '/v1/patient/profile');
    await gw.call('GET', `/v1/fhir/Patient/${alice.patient.id}?name=Nguyen`);
    expect(logs.map((l) => [l.method, l.route, l.status])).toEqual([
      ['GET', '/v1/patient/profile', 200],
      ['GET', '/v1/fhir/:type/:id', 200],
    ]);
    const text = JSON.stringify(logs);
    for (const secret of [alice.patient.id, 'Nguyen', 'Alice', alice.token, alice.token.split('.')[1]]) {
      expect(text).not.toContain(secret);
    }
    expect(logs.every((l) => typeof l.requestId === 'string' && typeof l.durationMs === 'number')).toBe(true);
  });

  it('a call answered before its route (a replay, a reused key, a call in progress) is logged under its route, not `/v1/*`', async () => {
    logs.length = 0;
    const key = { 'idempotency-key': `frame-${crypto.randomUUID()}` };
    const first = await gw.call('POST', '/v1/patient/home', { headers: key });
    const replay = await gw.call('POST', '/v1/patient/home', { headers: key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const reused = await gw.call('POST', '/v1/patient/home', { headers: key, body: { other: true } });
    expect(reused.status).toBe(422);
    expect(logs.map((l) => [l.route, l.status])).toEqual([
      ['/v1/patient/home', first.status],
      ['/v1/patient/home', first.status],
      ['/v1/patient/home', 422],
    ]);
  });

  it('an unexpected error is a 500 `internal` with the request id and nothing of the error', async () => {
    const broken = createApp({
      medplum: { baseUrl: 'http://medplum.test/' },
      issuer: 'http://medplum.test/',
      projectId: 'p',
      limits: DEFAULT_LIMITS,
      verifier: async () => {
        throw new TypeError('internal secret: connection string postgres://user:pw@db');
      },
    });
    const res = await broken.request('http://gateway.test/v1/patient/profile', {
      headers: { authorization: 'Bearer abc.def.ghi', 'x-request-id': 'req-abcdef12' },
    });
    expect(res.status).toBe(500);
    const body = await res.text();
    expect(JSON.parse(body)).toEqual({
      error: { code: 'internal', message: 'Internal error', details: { requestId: 'req-abcdef12' } },
    });
    expect(body).not.toContain('secret');
  });
});

describe('key set handling', () => {
  const ISSUER = 'https://keys.remote.test/';
  const server = setupServer();
  beforeAll(() => server.listen({ onUnhandledFrame: 'bypass' }));
  afterEach(() => server.resetHandlers());
  afterAll(() => server.close());

  it('caches the JWKS and fetches it again when a token names an unknown kid (key rotation)', async () => {
    const first = await generateKeyPair('RS256');
    const second = await generateKeyPair('RS256');
    const jwk = async (key: CryptoKey, kid: string) => ({ ...(await exportJWK(key)), kid, alg: 'RS256', use: 'sig' });
    let keys = [await jwk(first.publicKey, 'k1')];
    let fetches = 0;
    server.use(
      http.get(`${ISSUER}.well-known/jwks.json`, async () => {
        fetches++;
        await delay(1);
        return HttpResponse.json({ keys });
      }),
    );
    const sign = (key: CryptoKey, kid: string) =>
      new SignJWT({ login_id: 'l', profile: 'Patient/p1', scope: 'openid' })
        .setProtectedHeader({ alg: 'RS256', kid })
        .setIssuer(ISSUER)
        .setExpirationTime('1h')
        .sign(key);
    const verify = createTokenVerifier({
      issuer: ISSUER,
      jwksUrl: `${ISSUER}.well-known/jwks.json`,
      jwksCooldownMs: 0,
    });
    expect((await verify(await sign(first.privateKey, 'k1'))).patientId).toBe('p1');
    expect((await verify(await sign(first.privateKey, 'k1'))).patientId).toBe('p1');
    expect(fetches).toBe(1);
    keys = [...keys, await jwk(second.publicKey, 'k2')];
    expect((await verify(await sign(second.privateKey, 'k2'))).patientId).toBe('p1');
    expect(fetches).toBe(2);
  });
});
