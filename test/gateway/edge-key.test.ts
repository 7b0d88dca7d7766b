import { randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EDGE_KEY_CHECK } from '../../contracts/systems';
import { startNodeGateway } from '../../scripts/lane/edge-key';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { checkEdgeKey, edgeKeyChecker, edgeKeyId } from '../../src/edge/edge-key';
import { gatewayClientOf } from '../../src/provision/edge-key';
import worker from '../../src/worker';
import { direct, executeBot } from '../support/attack';
import { type HttpGateway, startHttpGateway } from '../support/http-gateway';
import { freePort } from '../support/npm-start';
import { scaled } from '../support/slowness';

/**
 * The gateway's EDGE_STATEMENT_KEY checked against the Project's, not trusted (issue 49 item 3): through its
 * own client and the edge-key-check bot, over the embedded Medplum served on a port as a real one is. A wrong
 * key: Node does not start, a Worker serves nothing, `/readyz` says why. The check from the other side: nobody
 * but the gateway's client runs the bot, and that client reads nothing else.
 */
let http: HttpGateway;
let baseUrl: string;
let key: string;
let client: { clientId: string; clientSecret: string };
beforeAll(async () => {
  http = await startHttpGateway();
  baseUrl = http.backend.baseUrl;
  key = http.backend.edgeStatementKey;
  const found = await gatewayClientOf(http.backend.admin);
  if (!found) {
    throw new Error('no gateway client was provisioned');
  }
  client = found;
}, scaled(60_000));
afterAll(() => http?.close());

const wrongKey = () => randomBytes(32).toString('hex');

describe("the gateway's edge-statement key, checked", () => {
  it("answers ok for the Project's key and says what is wrong otherwise: another key, a refused client, no Medplum", async () => {
    expect(await checkEdgeKey({ baseUrl, ...client }, key)).toEqual({ ok: true });
    expect(await checkEdgeKey({ baseUrl, ...client }, wrongKey())).toMatchObject({
      ok: false,
      reason: 'mismatch',
      message: expect.stringContaining("EDGE_STATEMENT_KEY is not the Project's edge-statement key"),
    });
    expect(await checkEdgeKey({ baseUrl, ...client, clientSecret: 'not-the-secret' }, key)).toMatchObject({
      ok: false,
      reason: 'client-refused',
    });
    expect(await checkEdgeKey({ baseUrl: 'http://127.0.0.1:9/', ...client }, key)).toMatchObject({
      ok: false,
      reason: 'unreachable',
    });
  });

  it('the key never leaves either side: the bot answers its id only, the same one the gateway computes', async () => {
    const medplum = new MedplumClient({ baseUrl, cacheTime: 0 });
    await medplum.startClientLogin(client.clientId, client.clientSecret);
    const answer = await medplum.executeBot(
      { system: 'https://patient-care.example/bots', value: EDGE_KEY_CHECK.bot },
      {},
      'application/json',
    );
    expect(answer).toEqual({ ok: true, keyId: await edgeKeyId(key) });
    expect(JSON.stringify(answer)).not.toContain(key);
    expect(await edgeKeyId(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(await edgeKeyId(wrongKey())).not.toBe(await edgeKeyId(key));
  });

  it("the gateway's client runs the check and reads nothing else: no patient, no app, no other bot", async () => {
    const medplum = new MedplumClient({ baseUrl, cacheTime: 0 });
    await medplum.startClientLogin(client.clientId, client.clientSecret);
    const token = medplum.getAccessToken() as string;
    for (const path of ['Patient', 'Organization', 'ClientApplication', 'Practitioner', 'Consent', 'Task']) {
      const res = await direct(http.backend, token, 'GET', `fhir/R4/${path}`);
      const entries = (res.body as { entry?: unknown[] } | undefined)?.entry ?? [];
      expect(res.status === 403 || entries.length === 0, `${path}: ${res.status} ${entries.length}`).toBe(true);
    }
    const bots = await direct(http.backend, token, 'GET', 'fhir/R4/Bot');
    const names = ((bots.body as { entry?: { resource: { name?: string } }[] }).entry ?? []).map(
      (e) => e.resource.name,
    );
    expect(names).toEqual([EDGE_KEY_CHECK.bot]);
    for (const other of ['patient-home', 'accept-agreements', 'webhooks']) {
      const ran = await executeBot(http.backend, token, other, { value: {} });
      expect(ran.status, other).toBeGreaterThanOrEqual(400);
    }
  });

  it('nobody else runs the check: patients and clinicians of both tenants are refused, and learn no key id', async () => {
    const { alice, carol } = http.backend.patients;
    const callers = [
      alice.token,
      carol.token,
      http.backend.clinicians.northwind.token,
      http.backend.clinicians.southridge.token,
    ];
    const id = await edgeKeyId(key);
    for (const token of callers) {
      const ran = await executeBot(http.backend, token, EDGE_KEY_CHECK.bot, { value: {} });
      expect(ran.status).toBeGreaterThanOrEqual(400);
      expect(JSON.stringify(ran.body ?? '')).not.toContain(id);
    }
    // A project admin runs it too (Medplum lets an admin run any bot), and is refused by the bot itself.
    const admin = await http.backend.admin.executeBot(
      { system: 'https://patient-care.example/bots', value: EDGE_KEY_CHECK.bot },
      {},
      'application/json',
    );
    expect(JSON.stringify(admin)).not.toContain(id);
  });

  it('/readyz says why a gateway is not ready: its key is not the Project’s', async () => {
    const gateway = (edgeKey: string) =>
      createApp({
        medplum: { baseUrl },
        issuer: baseUrl,
        projectId: http.backend.project.id,
        limits: DEFAULT_LIMITS,
        edgeKeyCheck: edgeKeyChecker({ baseUrl, ...client }, edgeKey),
      });
    const wrong = await gateway(wrongKey()).request('/readyz');
    expect(wrong.status).toBe(503);
    expect(await wrong.json()).toEqual({
      error: {
        code: 'internal',
        message: expect.stringContaining("EDGE_STATEMENT_KEY is not the Project's"),
        details: { reason: 'mismatch' },
      },
    });
    const right = await gateway(key).request('/readyz');
    expect(right.status).toBe(200);
  });

  it('a checker asks Medplum once a minute at most, and sooner again only while Medplum could not be asked', async () => {
    let calls = 0;
    let now = 0;
    let up = false;
    const counting = (async (input: RequestInfo | URL, init?: RequestInit) => {
      calls++;
      if (!up) {
        throw new TypeError('connection refused');
      }
      return fetch(input, init);
    }) as typeof fetch;
    const check = edgeKeyChecker({ baseUrl, ...client, fetch: counting }, key, { now: () => now });
    expect((await check()).ok).toBe(false);
    expect(calls).toBe(1);
    now += 4_000;
    await check();
    expect(calls).toBe(1);
    up = true;
    now += 1_001;
    expect(await check()).toEqual({ ok: true });
    const asked = calls;
    now += 59_000;
    await check();
    expect(calls).toBe(asked);
    now += 1_001;
    await check();
    expect(calls).toBeGreaterThan(asked);
  });

  it('on Node: a gateway whose key is not the Project’s does not start, naming it; with the Project’s it starts', {
    timeout: scaled(60_000),
  }, async () => {
    const port = String(await freePort());
    const start = (edgeKey: string) =>
      startNodeGateway({
        MEDPLUM_REMOTE_BASE_URL: baseUrl,
        PROJECT_ID: http.backend.project.id,
        EDGE_STATEMENT_KEY: edgeKey,
        GATEWAY_CLIENT_ID: client.clientId,
        GATEWAY_CLIENT_SECRET: client.clientSecret,
        PORT: port,
      });
    const wrong = await start(wrongKey());
    expect(wrong.code).toBe(1);
    expect(wrong.output).toContain("Not starting: EDGE_STATEMENT_KEY is not the Project's edge-statement key");
    expect(wrong.output).not.toContain('Patient Care API at');
    const right = await start(key);
    expect(right.output).toContain('Patient Care API at');
    expect(right.output).not.toContain(key);
  });

  it('as a Worker: with a key that is not the Project’s every request is refused, naming it; with the Project’s it serves', async () => {
    const env = (edgeKey: string) =>
      ({
        MEDPLUM_BASE_URL: baseUrl,
        PROJECT_ID: http.backend.project.id,
        PUBLIC_URL: 'https://gateway.test',
        EDGE_STATEMENT_KEY: edgeKey,
        GATEWAY_CLIENT_ID: client.clientId,
        GATEWAY_CLIENT_SECRET: client.clientSecret,
      }) as Parameters<typeof worker.fetch>[1];
    const refused = await worker.fetch(new Request('https://gateway.test/healthz'), env(wrongKey()));
    expect(refused.status).toBe(500);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      "This gateway is not configured: EDGE_STATEMENT_KEY is not the Project's",
    );
    const served = await worker.fetch(new Request('https://gateway.test/healthz'), env(key));
    expect(served.status).toBe(200);
  });
});
