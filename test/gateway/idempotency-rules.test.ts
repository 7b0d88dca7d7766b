import type { Basic } from '@medplum/fhirtypes';
import { Hono } from 'hono';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { errorResponse } from '../../src/app';
import type { AppEnv } from '../../src/app-env';
import { idempotency, KEY_LIFETIME_MS, type KeyStore } from '../../src/edge/idempotency';

/**
 * The Idempotency-Key's rules (src/edge/idempotency.ts) over a store kept in memory: when a key is claimed,
 * replayed, refused, taken over, released or kept, without a Medplum, so that `npm run mutation` can run them
 * (issue 50 item 5). The same rules over her Basic records in a real store are test/gateway/idempotency.test.ts
 * and test/gateway/idempotency-store.test.ts.
 * The clock is vitest's (Date only): a record's age is exact, so the limits are tried at their edges.
 */
const HOLD_MS = 60_000;
const ext = (record: Basic, url: string) => record.extension?.find((e) => e.url === url)?.valueString;

/** Her keys as Medplum keeps them: one record per key and patient, versions, If-Match, a 409 on a race. */
class MemoryKeys implements KeyStore {
  readonly records = new Map<string, Basic>();
  readonly calls: string[] = [];
  /** The next call of that name throws this. */
  readonly failNext = new Map<keyof KeyStore, unknown>();
  /** Keeping an answer waits for this. */
  hold: Promise<void> = Promise.resolve();
  private next = 0;

  private stamp(record: Basic): Basic {
    const stored = {
      ...record,
      meta: { versionId: String(++this.next), lastUpdated: new Date(Date.now()).toISOString() },
    };
    this.records.set(stored.id as string, stored);
    return structuredClone(stored);
  }

  private failing(name: keyof KeyStore): void {
    this.calls.push(name);
    if (this.failNext.has(name)) {
      const err = this.failNext.get(name);
      this.failNext.delete(name);
      throw err;
    }
  }

  private current(record: Basic): Basic {
    const stored = this.records.get(record.id as string);
    if (!stored || stored.meta?.versionId !== record.meta?.versionId) {
      throw Object.assign(new Error('Precondition failed'), { outcome: { issue: [{ code: 'conflict' }] } });
    }
    return stored;
  }

  async claim(fresh: Basic, keyId: string, her: string): Promise<Basic> {
    this.failing('claim');
    const found = [...this.records.values()].find(
      (r) =>
        r.identifier?.some((i) => i.system === SYSTEMS.idempotency && i.value === keyId) &&
        r.subject?.reference === her,
    );
    return found ? structuredClone(found) : this.stamp({ ...fresh, id: `key-${this.next + 1}` });
  }

  async replace(record: Basic, fresh: Basic): Promise<Basic> {
    this.failing('replace');
    this.current(record);
    return this.stamp({ ...fresh, id: record.id });
  }

  async keep(record: Basic, answer: string): Promise<unknown> {
    await this.hold;
    this.failing('keep');
    const stored = this.current(record);
    return this.stamp({
      ...stored,
      extension: [...(stored.extension ?? []), { url: EXTENSIONS.idempotencyAnswer, valueString: answer }],
    });
  }

  async release(record: Basic): Promise<unknown> {
    this.failing('release');
    this.records.delete(record.id as string);
    return undefined;
  }

  /** Her one record, aged by `ms` (as if written that long ago). */
  age(ms: number): void {
    for (const [id, record] of this.records) {
      const lastUpdated = new Date(Date.parse(record.meta?.lastUpdated ?? '') - ms).toISOString();
      this.records.set(id, { ...record, meta: { ...record.meta, lastUpdated } });
    }
  }
}

/**
 * A gateway instance of one route over `keys`: `POST /v1/things` answers what it was sent and how many times
 * it ran; `?status=N` answers N; `?wait` waits for `release()`. `x-patient` says whose call it is (none: no
 * session). `/v1/json` reads its JSON body before the key is looked at, as the gateway's frame does.
 */
function instance(keys: KeyStore) {
  const runs: string[] = [];
  let release: () => void = () => undefined;
  let waiting = new Promise<void>((r) => {
    release = r;
  });
  const app = new Hono<AppEnv>();
  app.use('*', async (c, next) => {
    c.set('requestId', 'req-1');
    const patient = c.req.header('x-patient');
    if (patient) {
      c.set('session', { profile: `Patient/${patient}`, patientId: patient, loginId: `login-${patient}` });
    }
    await next();
  });
  app.use('/v1/json', async (c, next) => {
    await c.req.json();
    await next();
  });
  app.use(
    '/v1/*',
    idempotency(() => keys),
  );
  const handler = async (c: import('hono').Context<AppEnv>) => {
    const body = await c.req.text();
    runs.push(body);
    if (c.req.query('wait') !== undefined) {
      await waiting;
    }
    const status = Number(c.req.query('status') ?? 201);
    return c.json({ run: runs.length, body }, status as 201);
  };
  app.post('/v1/things', handler);
  app.post('/v1/json', handler);
  app.get('/v1/things', (c) => c.json({ runs: runs.length }));
  app.onError((err, c) => errorResponse(c, err));
  return {
    runs,
    release: () => {
      release();
      waiting = new Promise<void>((r) => {
        release = r;
      });
    },
    call: (
      path = '/v1/things',
      { key = 'key-1', body = '{"a":1}', patient = 'her', type = 'application/json', method = 'POST' } = {},
    ) =>
      app.request(path, {
        method,
        body: method === 'GET' ? undefined : body,
        headers: {
          ...(key === '' ? {} : { 'idempotency-key': key }),
          ...(patient ? { 'x-patient': patient } : {}),
          'content-type': type,
        },
      }),
  };
}

/** Lets the answer's storing (after the answer is sent) finish. */
const settle = () => new Promise((r) => setTimeout(r, 0));

let keys: MemoryKeys;
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(new Date('2026-12-03T10:00:00Z'));
  keys = new MemoryKeys();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('an Idempotency-Key over its store', () => {
  it('the first call runs and keeps its answer; the same request again answers it again without running', async () => {
    const gateway = instance(keys);
    const first = await gateway.call();
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const answer = await first.text();
    await settle();
    const again = await gateway.call();
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(await again.text()).toBe(answer);
    expect(gateway.runs).toHaveLength(1);
    expect(keys.calls).toEqual(['claim', 'keep', 'claim']);
  });

  it('her record holds the key hashed, her as subject, the request’s fingerprint and the answer; never the key itself', async () => {
    const gateway = instance(keys);
    await gateway.call('/v1/things', { key: 'her-secret-key' });
    await settle();
    const [record] = [...keys.records.values()];
    expect(record.resourceType).toBe('Basic');
    expect(record.subject?.reference).toBe('Patient/her');
    expect(record.code?.coding?.[0]).toEqual({ system: SYSTEMS.idempotency, code: 'request' });
    expect(record.identifier?.[0].system).toBe(SYSTEMS.idempotency);
    expect(record.identifier?.[0].value).toMatch(/^[0-9a-f]{64}$/);
    expect(record.created).toBe('2026-12-03');
    expect(JSON.stringify(record)).not.toContain('her-secret-key');
    expect(ext(record, EXTENSIONS.idempotencyRequest)).toMatch(/^[0-9a-f]{64}$/);
    expect(ext(record, EXTENSIONS.idempotencyHolder)).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(ext(record, EXTENSIONS.idempotencyAnswer) ?? '')).toEqual({
      status: 201,
      contentType: 'application/json',
      body: '{"run":1,"body":"{\\"a\\":1}"}',
    });
  });

  it('another request under the key is 422 and does not run: another body, query string, Content-Type or path', async () => {
    const gateway = instance(keys);
    await gateway.call('/v1/things?name=a');
    await settle();
    for (const [path, options] of [
      ['/v1/things?name=a', { body: '{"a":2}' }],
      ['/v1/things?name=b', {}],
      ['/v1/things', {}],
      ['/v1/things?name=a', { type: 'application/fhir+json' }],
      ['/v1/json?name=a', {}],
    ] as const) {
      const res = await gateway.call(path, options);
      expect(res.status, path).toBe(422);
      expect((await res.json()).error).toEqual({
        code: 'idempotency_key_reused',
        message: 'This Idempotency-Key was used with another request; use a new key for a new request',
        details: { header: 'Idempotency-Key', requestId: 'req-1' },
      });
    }
    expect(gateway.runs).toHaveLength(1);
    // The same request written otherwise is the same: it answers again.
    expect(
      (await gateway.call('/v1/things?name=a', { type: 'Application/JSON' })).headers.get('idempotent-replayed'),
    ).toBe('true');
  });

  it('a JSON body read before the key is looked at counts as the body (the frame reads it first)', async () => {
    const gateway = instance(keys);
    expect((await gateway.call('/v1/json', { body: '{"a":1}' })).status).toBe(201);
    await settle();
    expect((await gateway.call('/v1/json', { body: '{"a":1}' })).headers.get('idempotent-replayed')).toBe('true');
    expect((await gateway.call('/v1/json', { body: '{"a":3}' })).status).toBe(422);
    expect(gateway.runs).toEqual(['{"a":1}']);
  });

  it('while the first call runs the key is 409 request_in_progress with Retry-After, here and on another instance', async () => {
    const gateway = instance(keys);
    const other = instance(keys);
    const first = gateway.call('/v1/things?wait');
    await vi.waitFor(() => expect(gateway.runs).toHaveLength(1));
    for (const res of [await gateway.call('/v1/things?wait'), await other.call('/v1/things?wait')]) {
      expect(res.status).toBe(409);
      expect(res.headers.get('retry-after')).toBe('1');
      expect((await res.json()).error).toEqual({
        code: 'request_in_progress',
        message: 'A request with this Idempotency-Key is still in progress; try again shortly',
        details: { header: 'Idempotency-Key', retryAfter: 1, requestId: 'req-1' },
      });
    }
    gateway.release();
    expect((await first).status).toBe(201);
    expect(gateway.runs).toHaveLength(1);
    expect(other.runs).toHaveLength(0);
  });

  it('the answer is sent once it is kept: a retry sent after it arrived answers it again, at every instance', async () => {
    let kept: () => void = () => undefined;
    keys.hold = new Promise((r) => {
      kept = r;
    });
    const gateway = instance(keys);
    const other = instance(keys);
    let answered = false;
    const first = Promise.resolve(gateway.call()).then((res) => {
      answered = true;
      return res;
    });
    await vi.waitFor(() => expect(gateway.runs).toHaveLength(1));
    // Time enough to be answered, were the answer sent before it is kept.
    await new Promise((r) => setTimeout(r, 50));
    expect(answered).toBe(false);
    // Meanwhile the first call has not been answered: the key is in progress, here and elsewhere.
    expect((await other.call()).status).toBe(409);
    kept();
    expect((await first).status).toBe(201);
    for (const retry of [await other.call(), await gateway.call()]) {
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
    }
    expect(gateway.runs).toHaveLength(1);
    expect(other.runs).toHaveLength(0);
  });

  it('a call held longer than the hold without an answer is taken to have died: at the hold 409, past it the key runs again', async () => {
    const gateway = instance(keys);
    keys.failNext.set('keep', new Error('lost'));
    expect((await gateway.call()).status).toBe(201);
    await settle();
    keys.age(HOLD_MS);
    expect((await gateway.call()).status).toBe(409);
    keys.age(1);
    const res = await gateway.call();
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(gateway.runs).toHaveLength(2);
    expect(keys.calls).toContain('replace');
    await settle();
    expect((await gateway.call()).headers.get('idempotent-replayed')).toBe('true');
    expect(keys.records.size).toBe(1);
  });

  it('an answer is answered again for 24 hours: at 24 hours still, past them the key is hers to use again, for any request', async () => {
    const gateway = instance(keys);
    await gateway.call();
    await settle();
    keys.age(KEY_LIFETIME_MS);
    expect((await gateway.call()).headers.get('idempotent-replayed')).toBe('true');
    expect((await gateway.call('/v1/things', { body: '{"a":2}' })).status).toBe(422);
    keys.age(1);
    const res = await gateway.call('/v1/things', { body: '{"a":2}' });
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    await settle();
    expect(await (await gateway.call('/v1/things', { body: '{"a":2}' })).json()).toEqual({ run: 2, body: '{"a":2}' });
    expect(gateway.runs).toEqual(['{"a":1}', '{"a":2}']);
  });

  it('a fresh record of another holder is never taken over, however old its answer within the day', async () => {
    const gateway = instance(keys);
    await gateway.call();
    await settle();
    keys.age(HOLD_MS + 1);
    expect((await gateway.call()).headers.get('idempotent-replayed')).toBe('true');
    expect(keys.calls).not.toContain('replace');
  });

  it('a server failure or a rate limit keeps no answer: the record is released and the same key runs again', async () => {
    const gateway = instance(keys);
    for (const status of [500, 503, 429]) {
      const res = await gateway.call(`/v1/things?status=${status}`);
      expect(res.status).toBe(status);
      await settle();
      expect(keys.records.size, String(status)).toBe(0);
    }
    expect(keys.calls.filter((c) => c === 'release')).toHaveLength(3);
    expect(gateway.runs).toHaveLength(3);
  });

  it('a client error is an answer like any other: kept and answered again', async () => {
    const gateway = instance(keys);
    expect((await gateway.call('/v1/things?status=422')).status).toBe(422);
    await settle();
    const res = await gateway.call('/v1/things?status=422');
    expect(res.status).toBe(422);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
    expect(gateway.runs).toHaveLength(1);
    expect((await gateway.call('/v1/things?status=499')).status).toBe(422);
  });

  it('two calls racing for a key: the loser’s 409 from the store is request_in_progress; any other failure is a 500', async () => {
    const gateway = instance(keys);
    keys.failNext.set('claim', Object.assign(new Error('conflict'), { outcome: { issue: [{ code: 'conflict' }] } }));
    const lost = await gateway.call();
    expect(lost.status).toBe(409);
    expect((await lost.json()).error.code).toBe('request_in_progress');
    keys.failNext.set('claim', Object.assign(new Error('down'), { outcome: { issue: [{ code: 'exception' }] } }));
    const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const failed = await gateway.call();
      expect(failed.status).toBe(500);
      expect((await failed.json()).error.code).toBe('internal');
    } finally {
      errors.mockRestore();
    }
    expect(gateway.runs).toHaveLength(0);
  });

  it('taking over a dead call’s key that changed meanwhile is 409 and does not run', async () => {
    const gateway = instance(keys);
    keys.failNext.set('keep', new Error('lost'));
    await gateway.call();
    await settle();
    keys.age(HOLD_MS + 1);
    keys.failNext.set('replace', new Error('precondition failed'));
    const res = await gateway.call();
    expect(res.status).toBe(409);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(gateway.runs).toHaveLength(1);
  });

  it('keeping the answer fails: the answer stands, and the key is in progress until its hold lapses', async () => {
    const gateway = instance(keys);
    keys.failNext.set('keep', new Error('Medplum 503'));
    const res = await gateway.call();
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ run: 1, body: '{"a":1}' });
    await settle();
    expect((await gateway.call()).status).toBe(409);
  });

  it('nothing of the key is left to do once the answer is sent (a Worker may stop the request then)', async () => {
    const gateway = instance(keys);
    expect((await gateway.call()).status).toBe(201);
    expect(keys.calls).toEqual(['claim', 'keep']);
    const [record] = [...keys.records.values()];
    expect(ext(record, EXTENSIONS.idempotencyAnswer)).toBeDefined();
    expect((await gateway.call('/v1/things?status=503', { key: 'key-2' })).status).toBe(503);
    expect(keys.calls.at(-1)).toBe('release');
  });

  it('a record of the key she wrote herself, straight to Medplum, without the gateway’s parts is another request: 422', async () => {
    const gateway = instance(keys);
    await gateway.call();
    await settle();
    const [record] = [...keys.records.values()];
    keys.records.set(record.id as string, { ...record, extension: undefined });
    expect((await gateway.call()).status).toBe(422);
    expect(gateway.runs).toHaveLength(1);
  });

  it('a key is hers alone: another patient’s same key is another record and runs', async () => {
    const gateway = instance(keys);
    await gateway.call('/v1/things', { patient: 'her' });
    await settle();
    const theirs = await gateway.call('/v1/things', { patient: 'him', body: '{"b":1}' });
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    await settle();
    expect(keys.records.size).toBe(2);
    expect([...keys.records.values()].map((r) => r.subject?.reference).sort()).toEqual(['Patient/her', 'Patient/him']);
  });

  it('a key is 1 to 255 visible ASCII characters; anything else is 400 and touches nothing', async () => {
    const gateway = instance(keys);
    for (const key of ['has space', 'x'.repeat(256), 'tab\tkey']) {
      const res = await gateway.call('/v1/things', { key });
      expect(res.status, key).toBe(400);
      expect((await res.json()).error).toEqual({
        code: 'invalid_request',
        message: 'Idempotency-Key must be 1 to 255 visible ASCII characters',
        details: { header: 'Idempotency-Key', requestId: 'req-1' },
      });
    }
    expect(gateway.runs).toHaveLength(0);
    expect(keys.calls).toHaveLength(0);
    expect((await gateway.call('/v1/things', { key: '~'.repeat(255) })).status).toBe(201);
    expect((await gateway.call('/v1/things', { key: '!' })).status).toBe(201);
  });

  it('without the header, on a read, or without a session the key is not looked at', async () => {
    const gateway = instance(keys);
    expect((await gateway.call('/v1/things', { key: '' })).status).toBe(201);
    expect((await gateway.call('/v1/things', { key: '' })).status).toBe(201);
    expect((await gateway.call('/v1/things', { method: 'GET', key: 'has space' })).status).toBe(200);
    expect((await gateway.call('/v1/things', { patient: '' })).status).toBe(201);
    expect((await gateway.call('/v1/things', { patient: '' })).status).toBe(201);
    expect(keys.calls).toHaveLength(0);
    expect(gateway.runs).toHaveLength(4);
  });
});
