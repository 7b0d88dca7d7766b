import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { parseJWTPayload } from '@medplum/core';
import type { Bundle, Consent } from '@medplum/fhirtypes';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS } from '../../contracts/systems';
import { type App, createApp, DEFAULT_LIMITS } from '../../src/app';
import { createTokenVerifier } from '../../src/auth/verify';
import { clientAddressResolver, trustedProxyList } from '../../src/edge/client-address';
import { formatIp, inRange, parseIp, parseIpRange } from '../../src/edge/ip';
import { nodePeerAddress } from '../../src/edge/node-peer';
import { parsePublicUrl } from '../../src/edge/public-url';
import { clientAddress, userAgent } from '../../src/edge/request';
import { cleanUserAgent } from '../../src/edge/user-agent';
import { createResponseValidator, startTestGateway, type TestGateway } from '../support/gateway';
import { type HttpGateway, startHttpGateway } from '../support/http-gateway';

/**
 * Edge hygiene (issue 10, item 4, the gateway's part): what the gateway takes from the network
 * (Host, X-Forwarded-For, User-Agent, the query, the token's claims) is checked before it is used.
 */

const PUBLIC_URL = 'https://care.example.org';

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request over a real socket, so that the Host header and the peer address are what Node sees. */
function overHttp(
  origin: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<HttpAnswer> {
  const url = new URL(path, origin);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: `${url.pathname}${url.search}`, method, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function listen(app: App): Promise<{ origin: string; close: () => Promise<void> }> {
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('links name PUBLIC_URL, never the Host header', () => {
  let gw: TestGateway;
  let served: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    gw = await startTestGateway({ publicUrl: PUBLIC_URL });
    served = await listen(gw.app);
  });
  afterAll(async () => {
    await served?.close();
    gw?.close();
  });

  it('every link and fullUrl of a search Bundle is under PUBLIC_URL whatever Host says', async () => {
    const validate = createResponseValidator(gw.doc);
    const res = await overHttp(served.origin, 'GET', '/v1/fhir/Observation?_count=1', {
      host: 'evil.example',
      authorization: `Bearer ${gw.backend.patients.alice.token}`,
    });
    const bundle = JSON.parse(res.text) as Bundle;
    const headers = new Headers({ 'content-type': String(res.headers['content-type']) });
    validate('GET', '/v1/fhir/Observation', { status: res.status, headers, body: bundle, text: res.text });
    expect(res.status).toBe(200);
    const urls = [...(bundle.link ?? []).map((l) => l.url), ...(bundle.entry ?? []).map((e) => e.fullUrl)];
    expect(urls.length).toBeGreaterThan(1);
    for (const url of urls) {
      expect(url).toMatch(/^https:\/\/care\.example\.org\/v1\/fhir\/Observation[/?]/);
    }
    expect(res.text).not.toContain('evil.example');
  });

  it('the reference page and the document name PUBLIC_URL whatever Host says', async () => {
    const page = await overHttp(served.origin, 'GET', '/', { host: 'evil.example' });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<strong id="served-from">care.example.org</strong>');
    expect(page.text).not.toContain('evil.example');
    const doc = await overHttp(served.origin, 'GET', '/v1/openapi.json', { host: 'evil.example' });
    expect((JSON.parse(doc.text) as { servers: { url: string }[] }).servers).toEqual([
      { url: PUBLIC_URL, description: 'This environment' },
    ]);
  });
});

describe('the clickwrap proof takes the client address from the connection or a trusted proxy', () => {
  const forged = `<script>alert(1)</script>${'9'.repeat(12_000)}`;

  async function proofOf(gw: TestGateway, key: string): Promise<Record<string, string | undefined>> {
    const patient = gw.backend.patients[key].patient;
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [
        { code: 'patient', operator: 'eq', value: `Patient/${patient.id}` },
        { code: 'status', operator: 'eq', value: 'active' },
      ],
    });
    expect(consents.length).toBeGreaterThan(0);
    const parts = consents[0].extension?.find((e) => e.url === EXTENSIONS.clickwrapProof)?.extension ?? [];
    const part = (url: string) => parts.find((p) => p.url === url)?.valueString;
    return { ipAddress: part('ipAddress'), userAgent: part('userAgent') };
  }

  /** Accepts the patient's unmet agreements over a real socket, with the given edge headers. */
  async function acceptOverHttp(gw: TestGateway, origin: string, key: string, headers: Record<string, string>) {
    const token = gw.backend.patients[key].token;
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token });
    const unmet = (requirements.body as { unmet: { url: string; version: string }[] }).unmet;
    expect(unmet.length).toBeGreaterThan(0);
    const res = await overHttp(
      origin,
      'POST',
      '/v1/agreements/acceptances',
      { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      JSON.stringify({ agreements: unmet.map((u) => `${u.url}|${u.version}`) }),
    );
    expect(res.status, res.text).toBe(200);
    return proofOf(gw, key);
  }

  it('with no trusted proxy, X-Forwarded-For is ignored: the address is the connection peer', async () => {
    const gw = await startTestGateway({ peerAddress: nodePeerAddress, trustedProxies: [] });
    const served = await listen(gw.app);
    try {
      const proof = await acceptOverHttp(gw, served.origin, 'alice', {
        'x-forwarded-for': forged,
        'cf-connecting-ip': '198.51.100.66',
        'user-agent': 'test-agent/2.0',
      });
      expect(proof.ipAddress).toBe('127.0.0.1');
      expect(proof.userAgent).toBe('test-agent/2.0');
    } finally {
      await served.close();
      gw.close();
    }
  });

  it('behind a trusted proxy, X-Forwarded-For is walked from the right; a value that is no IP gives no address', async () => {
    const gw = await startTestGateway({ peerAddress: nodePeerAddress, trustedProxies: ['127.0.0.0/8', '10.0.0.0/8'] });
    const served = await listen(gw.app);
    try {
      // The client wrote the first entry itself; the trusted proxies appended the rest.
      const walked = await acceptOverHttp(gw, served.origin, 'alice', {
        'x-forwarded-for': '198.51.100.1, 2001:DB8:0:0:0:0:0:7, 10.1.2.3',
        // Tab is the one control character an HTTP client lets through (the rest: unit tests below).
        'user-agent': 'agent\t/1.0',
      });
      expect(walked.ipAddress).toBe('2001:db8::7');
      expect(walked.userAgent).toBe('agent/1.0');
      const garbage = await acceptOverHttp(gw, served.origin, 'bob', { 'x-forwarded-for': `10.0.0.1, ${forged}` });
      expect(garbage.ipAddress).toBeUndefined();
    } finally {
      await served.close();
      gw.close();
    }
  });
});

describe('queries are forwarded only when Medplum can take them', () => {
  let http: HttpGateway;
  let call: HttpGateway['call'];

  beforeAll(async () => {
    // The embedded Medplum behind Node's HTTP server (16 KiB of request line and headers), as a real one is.
    http = await startHttpGateway();
    ({ call } = http);
  });
  afterAll(() => http?.close());

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

describe('clientAddress(c) and userAgent(c) over a real socket', () => {
  /** A bare gateway with one probe route that reports what the edge functions make of a request. */
  async function probe(trustedProxies: string[]) {
    const app = createApp({
      medplum: { baseUrl: 'http://medplum.test/' },
      issuer: 'http://medplum.test/',
      projectId: 'p',
      limits: DEFAULT_LIMITS,
      publicUrl: PUBLIC_URL,
      trustedProxies,
      peerAddress: nodePeerAddress,
    });
    app.get('/probe', (c) => c.json({ ip: clientAddress(c) ?? null, ua: userAgent(c) ?? null }));
    const served = await listen(app);
    return {
      ask: async (headers: Record<string, string>) =>
        JSON.parse((await overHttp(served.origin, 'GET', '/probe', headers)).text) as { ip: string | null },
      close: served.close,
    };
  }

  it('without trusted proxies: the socket peer, whatever X-Forwarded-For or CF-Connecting-IP say', async () => {
    const edge = await probe([]);
    try {
      expect(await edge.ask({ 'x-forwarded-for': '198.51.100.1', 'cf-connecting-ip': '198.51.100.2' })).toEqual({
        ip: '127.0.0.1',
        ua: null,
      });
    } finally {
      await edge.close();
    }
  });

  it('from a trusted peer: X-Forwarded-For read from the right up to the first untrusted entry', async () => {
    const edge = await probe(['127.0.0.1', '10.0.0.0/8']);
    try {
      expect((await edge.ask({ 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 10.0.0.5' })).ip).toBe('203.0.113.9');
      // Two headers are one list (Node joins them with ", ").
      expect((await edge.ask({ 'x-forwarded-for': '203.0.113.9,10.0.0.6' })).ip).toBe('203.0.113.9');
      expect((await edge.ask({})).ip).toBe('127.0.0.1');
      expect((await edge.ask({ 'x-forwarded-for': '203.0.113.9:443' })).ip).toBeNull();
      expect((await edge.ask({ 'x-forwarded-for': '<img src=x onerror=alert(1)>' })).ip).toBeNull();
    } finally {
      await edge.close();
    }
  });
});

describe('IP parsing (no node:net: the Worker shares it)', () => {
  it('reads IPv4 and IPv6 in every standard form and writes them canonically', () => {
    const cases: [string, string][] = [
      ['192.0.2.1', '192.0.2.1'],
      ['0.0.0.0', '0.0.0.0'],
      ['255.255.255.255', '255.255.255.255'],
      ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
      ['2001:db8::1', '2001:db8::1'],
      ['::', '::'],
      ['::1', '::1'],
      ['1::', '1::'],
      ['2001:db8:0:1:0:0:0:1', '2001:db8:0:1::1'],
      ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
      ['2001:db8:1:1:1:1:1:1', '2001:db8:1:1:1:1:1:1'],
      ['::ffff:192.0.2.1', '192.0.2.1'],
      ['::FFFF:c000:0201', '192.0.2.1'],
      ['64:ff9b::192.0.2.1', '64:ff9b::c000:201'],
      ['ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    ];
    for (const [text, canonical] of cases) {
      const bytes = parseIp(text);
      expect(bytes, text).toBeDefined();
      expect(formatIp(bytes as Uint8Array), text).toBe(canonical);
    }
  });

  it('refuses anything else: markup, huge values, ports, brackets, zones, leading zeros, odd shapes', () => {
    const hostile = [
      '',
      ' 192.0.2.1',
      '192.0.2.1 ',
      '<script>alert(1)</script>',
      '"><img src=x>',
      '9'.repeat(12_000),
      `192.0.2.1${' '.repeat(12_000)}`,
      '192.0.2.1:8080',
      '[2001:db8::1]',
      '[2001:db8::1]:443',
      'fe80::1%eth0',
      '192.0.2.01',
      '010.0.0.1',
      '256.0.0.1',
      '1.2.3',
      '1.2.3.4.5',
      '1.2.3.',
      '0x7f.0.0.1',
      '2130706433',
      '１.２.３.４',
      ':',
      ':::',
      '1::2::3',
      ':1:2:3:4:5:6:7',
      '1:2:3:4:5:6:7:',
      '1:2:3:4:5:6:7:8:9',
      '1:2:3:4:5:6:7',
      '1::2:3:4:5:6:7:8',
      '12345::1',
      'g::1',
      '1.2.3.4::',
      '::1.2.3.4:5',
      'localhost',
      'unknown',
      '192.0.2.1, 192.0.2.2',
    ];
    for (const text of hostile) {
      expect(parseIp(text), text.slice(0, 40)).toBeUndefined();
    }
  });

  it('reads trusted ranges: bare addresses and CIDR, IPv4 and IPv6; refuses malformed ones', () => {
    const contains = (range: string, ip: string) =>
      inRange(parseIp(ip) as Uint8Array, parseIpRange(range) as NonNullable<ReturnType<typeof parseIpRange>>);
    expect(contains('10.0.0.0/8', '10.255.1.2')).toBe(true);
    expect(contains('10.0.0.0/8', '11.0.0.1')).toBe(false);
    expect(contains('192.0.2.7', '192.0.2.7')).toBe(true);
    expect(contains('192.0.2.7', '192.0.2.8')).toBe(false);
    expect(contains('172.16.0.0/12', '172.31.255.255')).toBe(true);
    expect(contains('172.16.0.0/12', '172.32.0.0')).toBe(false);
    expect(contains('0.0.0.0/0', '203.0.113.1')).toBe(true);
    expect(contains('2001:db8::/32', '2001:db8:ffff::1')).toBe(true);
    expect(contains('2001:db8::/32', '2001:db9::1')).toBe(false);
    expect(contains('::ffff:10.0.0.0/104', '10.1.2.3')).toBe(true);
    expect(contains('10.0.0.0/8', '::ffff:10.1.2.3')).toBe(true);
    expect(contains('::/0', '10.1.2.3')).toBe(false);
    for (const bad of [
      '10.0.0.0/33',
      '10.0.0.0/-1',
      '10.0.0.0/08',
      '10.0.0.0/',
      '2001:db8::/129',
      '10.0.0.0/8/8',
      'x/8',
    ]) {
      expect(parseIpRange(bad), bad).toBeUndefined();
    }
  });
});

describe('the client address walk', () => {
  const peer = '10.0.0.2';
  it('believes X-Forwarded-For only from trusted proxies and reads it from the right', () => {
    const none = clientAddressResolver([]);
    expect(none(peer, '198.51.100.1')).toBe(peer);
    expect(none('::ffff:203.0.113.5', undefined)).toBe('203.0.113.5');
    expect(none(undefined, '198.51.100.1')).toBeUndefined();
    expect(none('not-an-ip', undefined)).toBeUndefined();

    const resolve = clientAddressResolver(['10.0.0.0/8', '2001:db8:ffff::/48']);
    expect(resolve('203.0.113.5', '198.51.100.1')).toBe('203.0.113.5');
    expect(resolve(peer, undefined)).toBe(peer);
    expect(resolve(peer, '198.51.100.1')).toBe('198.51.100.1');
    expect(resolve(peer, '198.51.100.1, 203.0.113.9')).toBe('203.0.113.9');
    expect(resolve(peer, '198.51.100.1, 203.0.113.9, 10.1.1.1, 2001:db8:ffff::3')).toBe('203.0.113.9');
    expect(resolve(peer, ' 2001:DB8::0:7 ,10.9.9.9')).toBe('2001:db8::7');
    // Every hop trusted: the leftmost is as far as the chain goes.
    expect(resolve(peer, '10.3.3.3, 10.4.4.4')).toBe('10.3.3.3');
    // The client's own junk left of the first untrusted entry does not matter.
    expect(resolve(peer, '<script>, 198.51.100.1')).toBe('198.51.100.1');
  });

  it('gives no address when the entry it must read is not an IP address', () => {
    const resolve = clientAddressResolver(['10.0.0.0/8']);
    for (const value of [
      '',
      ',',
      '<script>alert(1)</script>',
      '9'.repeat(12_000),
      '198.51.100.1:4711',
      '[2001:db8::1]:443',
      'unknown',
      '198.51.100.1, _hidden',
      `${'1.1.1.1,'.repeat(2_000)}x`,
    ]) {
      expect(resolve(peer, value), value.slice(0, 40)).toBeUndefined();
    }
  });

  it('refuses a TRUSTED_PROXIES entry that is not an address or range, naming it', () => {
    expect(trustedProxyList(' 10.0.0.0/8, ,192.0.2.7 ')).toEqual(['10.0.0.0/8', '192.0.2.7']);
    expect(trustedProxyList(undefined)).toEqual([]);
    expect(() => clientAddressResolver(['10.0.0.0/8', 'proxy.internal'])).toThrow(/proxy\.internal/);
  });
});

describe('user agent and PUBLIC_URL', () => {
  it('drops control and format characters and keeps at most 512 characters', () => {
    expect(cleanUserAgent('Mozilla/5.0 (X11)')).toBe('Mozilla/5.0 (X11)');
    expect(cleanUserAgent('a\r\nSet-Cookie: x\u0000\u001b[2J\u007f\u0085b')).toBe('aSet-Cookie: x[2Jb');
    expect(cleanUserAgent('safe\u202egnp.exe')).toBe('safegnp.exe');
    expect(cleanUserAgent('\u0000\u0001 ')).toBeUndefined();
    expect(cleanUserAgent(undefined)).toBeUndefined();
    expect(cleanUserAgent('x'.repeat(12_000))).toHaveLength(512);
    expect(cleanUserAgent(`${'x'.repeat(511)}😀`)).toHaveLength(511);
  });

  it('takes PUBLIC_URL as an http(s) origin with an optional path, without a trailing slash', () => {
    expect(parsePublicUrl('https://care.example.org/')).toBe('https://care.example.org');
    expect(parsePublicUrl('https://Example.org:8443/care/')).toBe('https://example.org:8443/care');
    expect(parsePublicUrl('http://localhost:8080')).toBe('http://localhost:8080');
    for (const bad of ['care.example.org', 'ftp://x.example', 'https://u:p@x.example', 'https://x.example/?a=1', '']) {
      expect(() => parsePublicUrl(bad), bad).toThrow(/PUBLIC_URL/);
    }
  });
});
