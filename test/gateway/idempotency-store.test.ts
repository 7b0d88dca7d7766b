import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { createCaller, startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * An Idempotency-Key's answer is stored after it is sent (src/edge/idempotency.ts): the caller does not
 * wait for that write. Here the store is held back; meanwhile a retry at the same instance waits for it and
 * is answered the first answer, and one at another instance is 409 `request_in_progress`, as for a call
 * still running; once stored, every instance answers the first answer.
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

describe('the answer to an Idempotency-Key is stored after it is sent', () => {
  it('the caller has her answer before the store; a retry here waits for it, one elsewhere is 409 until it lands', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    const agreements = (requirements.body as { unmet: { url: string; version: string }[] }).unmet.map(
      (u) => `${u.url}|${u.version}`,
    );
    const options = { token: patient.token, body: { agreements }, headers: { 'idempotency-key': 'stored-later' } };
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
    const first = await gw.call('POST', '/v1/agreements/acceptances', options);
    expect(first.status, first.text).toBe(200);
    await storeArrived;
    // The store is held: the caller was answered without it.
    const busy = await elsewhere('POST', '/v1/agreements/acceptances', options);
    expect(busy).toMatchObject({ status: 409, body: { error: { code: 'request_in_progress' } } });
    expect(busy.headers.get('retry-after')).toBe('1');
    const here = gw.call('POST', '/v1/agreements/acceptances', options);
    release();
    holding = undefined;
    const replayed = await here;
    expect(replayed.status).toBe(200);
    expect(replayed.body).toEqual(first.body);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    const later = await elsewhere('POST', '/v1/agreements/acceptances', options);
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    expect(later.body).toEqual(first.body);
  });
});
