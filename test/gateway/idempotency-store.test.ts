import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { createCaller, startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * An Idempotency-Key's answer is kept before it is sent (src/edge/idempotency.ts, issue 51 item 5): while
 * the write of the answer is held back the caller waits, and a retry at another instance meanwhile is 409
 * `request_in_progress` (the first call has not been answered); once she has her answer, a retry at any
 * instance, sent at once, answers it again.
 */
let gw: TestGateway;
let other: App;
/** While set, the write of a key's answer waits for `gate`, after saying it has arrived. */
let holding: { gate: Promise<void>; arrived: () => void } | undefined;
beforeAll(async () => {
  gw = await startTestGateway((backend) => ({
    medplum: {
      baseUrl: backend.baseUrl,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const request = new Request(input, init);
        // The key's answer going into its record: held while a test holds it.
        if (request.method === 'PUT' && /\/fhir\/R4\/Basic\//.test(request.url) && holding) {
          holding.arrived();
          await holding.gate;
        }
        return backend.fetch(request);
      }) as typeof fetch,
    },
  }));
  other = createApp({
    medplum: { baseUrl: gw.backend.baseUrl, fetch: gw.backend.fetch },
    issuer: gw.backend.baseUrl,
    projectId: gw.backend.project.id,
    limits: DEFAULT_LIMITS,
    edgeSigner: createEdgeSigner(gw.backend.edgeStatementKey),
  });
});
afterAll(() => gw?.close());

describe('the answer to an Idempotency-Key is kept before it is sent', () => {
  it('the caller waits for the store; a retry sent after her answer arrived, at any instance, answers it again', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    const agreements = (requirements.body as { unmet: { url: string; version: string }[] }).unmet.map(
      (u) => `${u.url}|${u.version}`,
    );
    const options = { token: patient.token, body: { agreements }, headers: { 'idempotency-key': 'kept-first' } };
    const elsewhere = createCaller(other, gw.doc, () => patient.token);
    let release = () => {};
    let arrived = () => {};
    const storeArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    holding = {
      gate: new Promise<void>((resolve) => {
        release = resolve;
      }),
      arrived,
    };
    let answered = false;
    const pending = gw.call('POST', '/v1/agreements/acceptances', options).then((res) => {
      answered = true;
      return res;
    });
    await storeArrived;
    // The store is held: she has no answer yet, and the key is in progress elsewhere.
    expect(answered).toBe(false);
    const busy = await elsewhere('POST', '/v1/agreements/acceptances', options);
    expect(busy).toMatchObject({ status: 409, body: { error: { code: 'request_in_progress' } } });
    expect(busy.headers.get('retry-after')).toBe('1');
    release();
    holding = undefined;
    const first = await pending;
    expect(first.status, first.text).toBe(200);
    // Her retries, sent at once after the answer, at both instances: the first answer, replayed.
    const [there, here] = await Promise.all([
      elsewhere('POST', '/v1/agreements/acceptances', options),
      gw.call('POST', '/v1/agreements/acceptances', options),
    ]);
    for (const retry of [there, here]) {
      expect(retry.status).toBe(200);
      expect(retry.body).toEqual(first.body);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
    }
    // 100 immediate retries, each sent as soon as the one before was answered, at either instance: the
    // first answer every time, never a 409 (issue 51, "what must be shown").
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      const retry = await (i % 2 === 0 ? elsewhere : gw.call)('POST', '/v1/agreements/acceptances', options);
      statuses.push(retry.status);
      expect(retry.body).toEqual(first.body);
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
