import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { delay, getResponse, HttpResponse, http, RequestHandler } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { pooledFetch } from '../../src/medplum/node-fetch';
import { openApiDocument } from '../../src/routes/docs';
import { createResponseValidator } from '../support/gateway';

/** A REMOTE Medplum (msw intercepts the network): its faults must become 502/503/504, never a hang or a 500. */
const REMOTE = 'https://medplum.remote.test/';
const TIMEOUT_MS = 300;
const PATIENT = 'Patient/remote-patient-1';

const { privateKey, publicKey } = await generateKeyPair('RS256');
const jwk = { ...(await exportJWK(publicKey)), kid: 'remote-key', alg: 'RS256', use: 'sig' };
const tokenFrom = (issuer: string) =>
  new SignJWT({ login_id: 'login-1', profile: PATIENT, scope: 'openid', client_id: 'app-1' })
    .setProtectedHeader({ alg: 'RS256', kid: 'remote-key' })
    .setIssuer(issuer)
    .setAudience(issuer)
    .setSubject('user-1')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(privateKey);

const calls: string[] = [];
const server = setupServer(http.get(`${REMOTE}.well-known/jwks.json`, () => HttpResponse.json({ keys: [jwk] })));

/**
 * undici's pool (the Node entry's fetch) opens its own sockets, which msw does not intercept. So
 * that path reaches the same msw handlers over a real socket: a local server answers each request
 * with what the handlers say for the REMOTE address; a network error drops the connection.
 */
const bridge = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
  const request = new Request(new URL(incoming.url ?? '/', REMOTE), {
    method: incoming.method,
    headers: incoming.headers as Record<string, string>,
  });
  const handlers = server.listHandlers().filter((h): h is RequestHandler => h instanceof RequestHandler);
  void getResponse(handlers, request).then(async (response) => {
    if (!response || response.type === 'error') {
      outgoing.socket?.destroy();
      return;
    }
    const body = Buffer.from(await response.arrayBuffer());
    outgoing.writeHead(response.status, Object.fromEntries(response.headers)).end(body);
  });
});
await new Promise<void>((resolve) => bridge.listen(0, '127.0.0.1', resolve));
const BRIDGE = `http://127.0.0.1:${(bridge.address() as AddressInfo).port}/`;

const appFor = (baseUrl: string, fetchImpl?: typeof fetch) =>
  createApp({
    medplum: { baseUrl, fetch: fetchImpl },
    issuer: baseUrl,
    projectId: 'p',
    limits: { ...DEFAULT_LIMITS, upstreamTimeoutMs: TIMEOUT_MS },
  });
let app = appFor(REMOTE);
let token = await tokenFrom(REMOTE);
const validate = createResponseValidator(openApiDocument(app));

beforeAll(() => server.listen({ onUnhandledFrame: 'error' }));
afterEach(() => {
  server.resetHandlers();
  calls.length = 0;
});
afterAll(() => {
  server.close();
  bridge.closeAllConnections();
  bridge.close();
});

async function call(method: string, path: string) {
  const response = await app.request(`http://gateway.test${path}`, {
    method,
    headers: { authorization: `Bearer ${token}` },
  });
  const body = (await response.json()) as { error: { code: string; message: string } };
  validate(method, path, { status: response.status, headers: response.headers, body, text: JSON.stringify(body) });
  return { status: response.status, body };
}

const profile = `${REMOTE}fhir/R4/Patient/remote-patient-1`;
const STALLED_BODY = JSON.stringify({ resourceType: 'Patient', id: 'remote-patient-1' });
/** Notes the call, then answers with `response`. */
const record = (request: Request, response: Response): Response => {
  calls.push(`${request.method} ${new URL(request.url).pathname}`);
  return response;
};

/** A fetch that cannot be cancelled, like the in-process embedded Medplum: the deadline must still hold. */
const uncancellable = ((input: RequestInfo | URL, init?: RequestInit) =>
  fetch(input, { ...init, signal: undefined })) as typeof fetch;

// Both ways the gateway reaches a remote Medplum: the platform fetch (Workers, default) and the
// pooled undici fetch of the Node entry; and one that ignores cancellation.
describe.each([
  ['platform fetch', REMOTE, undefined],
  ['pooled undici fetch, over a socket', BRIDGE, pooledFetch()],
  ['a fetch that ignores cancellation', REMOTE, uncancellable],
])('faults of a remote Medplum (%s)', (_name, baseUrl, fetchImpl) => {
  beforeAll(async () => {
    app = appFor(baseUrl, fetchImpl);
    token = await tokenFrom(baseUrl);
  });

  it('a 5xx answer is 502 upstream_error, without leaking its text, and is not retried', async () => {
    server.use(
      http.get(profile, ({ request }) =>
        record(request, new HttpResponse('<html>stack trace: secret</html>', { status: 500 })),
      ),
    );
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_error');
    expect(JSON.stringify(res.body)).not.toContain('secret');
    expect(calls).toHaveLength(1);
  });

  it('a slow answer is 504 upstream_timeout within the configured timeout', async () => {
    server.use(
      http.get(profile, async () => {
        await delay(5_000);
        return HttpResponse.json({ resourceType: 'Patient', id: 'remote-patient-1' });
      }),
    );
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(504);
    // Not a timing assertion: the slow answer would have been a 200, so a 504 is the timeout's own.
    expect(res.body.error.code).toBe('upstream_timeout');
  });

  it('a body that stalls after its headers is 504 upstream_timeout within the configured timeout', async () => {
    server.use(
      http.get(
        profile,
        () =>
          new HttpResponse(
            new ReadableStream({
              start(controller) {
                controller.enqueue(new TextEncoder().encode(STALLED_BODY.slice(0, 20)));
              },
            }),
            // A stated length: the rest is due, and never comes.
            {
              status: 200,
              headers: { 'content-type': 'application/fhir+json', 'content-length': String(STALLED_BODY.length) },
            },
          ),
      ),
    );
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(504);
    // The body never completes: only the timeout can have ended the call.
    expect(res.body.error.code).toBe('upstream_timeout');
  });

  it('a refused connection is 503 upstream_unavailable', async () => {
    server.use(http.get(profile, () => HttpResponse.error()));
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('upstream_unavailable');
  });

  it('a non-JSON success body is 502 upstream_error', async () => {
    server.use(
      http.get(
        profile,
        () => new HttpResponse('not json at all', { status: 200, headers: { 'content-type': 'text/html' } }),
      ),
    );
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(502);
  });

  it('a non-idempotent call ($execute of a workflow bot) is never retried', async () => {
    server.use(
      http.post(`${REMOTE}fhir/R4/Bot/$execute`, ({ request }) =>
        record(request, new HttpResponse(null, { status: 503 })),
      ),
    );
    const res = await call('POST', '/v1/patient/home');
    expect(res.status).toBe(503);
    expect(calls).toEqual(['POST /fhir/R4/Bot/$execute']);
  });
});

it('an unreachable key set is 503, not 401', async () => {
  const other = createApp({
    medplum: { baseUrl: 'https://down.remote.test/' },
    issuer: 'https://down.remote.test/',
    projectId: 'p',
    limits: DEFAULT_LIMITS,
  });
  server.use(http.get('https://down.remote.test/.well-known/jwks.json', () => HttpResponse.error()));
  const response = await other.request('http://gateway.test/v1/patient/profile', {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(response.status).toBe(503);
});
