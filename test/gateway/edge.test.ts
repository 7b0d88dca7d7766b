import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { parseJWTPayload } from '@medplum/core';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { createTokenVerifier } from '../../src/auth/verify';
import { pooledFetch } from '../../src/medplum/node-fetch';
import { openApiDocument } from '../../src/routes/docs';
import { startTestBackend, type TestBackend } from '../support/backend';
import { createCaller, startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Edge hygiene (issue 10, item 4, the gateway's part): what the gateway takes from the network
 * (Host, X-Forwarded-For, User-Agent, the query, the token's claims) is checked before it is used.
 */

describe('queries are forwarded only when Medplum can take them', () => {
  let backend: TestBackend;
  let server: ReturnType<typeof serve>;
  let call: TestGateway['call'];

  beforeAll(async () => {
    // The embedded Medplum behind Node's HTTP server (16 KiB of request line and headers), as a real one is.
    let handler: (request: Request) => Response | Promise<Response> = () => new Response(null, { status: 503 });
    server = serve({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    backend = await startTestBackend({ baseUrl });
    handler = (request) => backend.app.fetch(request);
    const app = createApp({
      medplum: { baseUrl, fetch: pooledFetch() },
      issuer: baseUrl,
      projectId: backend.project.id,
      limits: DEFAULT_LIMITS,
    });
    call = createCaller(app, openApiDocument(app), () => backend.patients.alice.token);
  });
  afterAll(() => {
    server?.close();
    backend?.close();
  });

  it('a 10 KB _elements query that would grow past the header limit is 400 naming the limit, not 502', async () => {
    const elements = Array.from({ length: 5_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(',');
    expect(elements.length).toBeGreaterThan(9_900);
    const res = await call('GET', `/v1/fhir/Observation?_elements=${elements}`);
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ error: { code: 'invalid_request', details: { limit: 8192 } } });
  });

  it('a query just under the limit once encoded reaches Medplum and is answered', async () => {
    // 8,192 bytes as forwarded: `_count=20&_elements=` + the value, each comma encoded as %2C.
    const prefix = '_count=20&_elements=';
    const names: string[] = [];
    let encoded = prefix.length;
    while (encoded + 4 <= 8192) {
      names.push('id');
      encoded += names.length === 1 ? 2 : 5;
    }
    const res = await call('GET', `/v1/fhir/Observation?_elements=${names.join(',')}`);
    expect(res.status, res.text).toBe(200);
  });
});

describe('tokens carry what Medplum issues', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  /** Alice's own claims, changed, signed with the issuer's real key: only the claims are wrong. */
  async function resigned(change: (claims: JWTPayload) => JWTPayload): Promise<string> {
    const claims = change({ ...(parseJWTPayload(gw.backend.patients.alice.token) as JWTPayload) });
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: gw.backend.key.kid, typ: 'JWT' })
      .sign(gw.backend.key.privateKey);
  }
  const profile = (token: string) => gw.call('GET', '/v1/patient/profile', { token });

  it('a correctly signed token without exp is 401', async () => {
    const res = await profile(await resigned(({ exp: _exp, ...claims }) => claims));
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
  });

  it('aud is the issuer (current Medplum) or the token’s own client_id (older Medplum); anything else is 401', async () => {
    const issuer = gw.backend.baseUrl;
    expect((await profile(await resigned((c) => ({ ...c, aud: issuer })))).status).toBe(200);
    expect((await profile(await resigned((c) => ({ ...c, aud: 'app-1', client_id: 'app-1' })))).status).toBe(200);
    for (const claims of [
      { aud: 'https://other-service.example/' },
      { aud: 'app-1' },
      { aud: 'app-2', client_id: 'app-1' },
      { aud: [issuer, 'https://other-service.example/'] },
      { client_id: 'app-1' },
    ]) {
      const res = await profile(await resigned((c) => ({ ...c, ...claims })));
      expect(res.status, JSON.stringify(claims)).toBe(401);
    }
  });

  it('a token without scope (an ID or refresh token shape) is 401', async () => {
    const res = await profile(await resigned(({ scope: _scope, ...claims }) => claims));
    expect(res.status).toBe(401);
  });

  it("accepts the algorithms of Medplum's keys (RS256, ES256, ES384) and nothing else", async () => {
    const issuer = 'https://medplum.example/';
    const keys = await Promise.all(
      (['RS256', 'ES256', 'ES384', 'PS256', 'ES512'] as const).map(async (alg) => {
        const pair = await generateKeyPair(alg, { extractable: true });
        return {
          alg,
          kid: `key-${alg}`,
          ...pair,
          jwk: { ...(await exportJWK(pair.publicKey)), alg, kid: `key-${alg}` },
        };
      }),
    );
    const jwks = JSON.stringify({ keys: keys.map((k) => k.jwk) });
    const verify = createTokenVerifier({
      issuer,
      jwksUrl: `${issuer}.well-known/jwks.json`,
      fetch: (async () => new Response(jwks, { headers: { 'content-type': 'application/json' } })) as typeof fetch,
    });
    const results: Record<string, string> = {};
    for (const key of keys) {
      const token = await new SignJWT({ login_id: 'l-1', profile: 'Patient/p-1', scope: 'openid' })
        .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
        .setIssuer(issuer)
        .setAudience(issuer)
        .setSubject('u-1')
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(key.privateKey);
      results[key.alg] = await verify(token).then(
        (session) => session.patientId,
        (err: { code?: string }) => err.code ?? 'error',
      );
    }
    expect(results).toEqual({
      RS256: 'p-1',
      ES256: 'p-1',
      ES384: 'p-1',
      PS256: 'unauthenticated',
      ES512: 'unauthenticated',
    });
  });
});
