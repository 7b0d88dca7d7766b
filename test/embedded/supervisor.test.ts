import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { MAX_RESTARTS, type SupervisorEvent, superviseMedplumThread } from '../../src/embedded/supervisor';
import type { MedplumThread } from '../../src/embedded/thread';
import { openApiDocument } from '../../src/routes/docs';
import { createCaller } from '../support/gateway';

/**
 * The Medplum thread dies in the middle of a flood (issue 24): calls get 503, the supervisor restarts it
 * on the same store, it serves again with the same tokens, and every write it acknowledged is there.
 */
const BASE_URL = 'http://embedded.medplum.local/';
const dir = mkdtempSync(join(tmpdir(), 'supervisor-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const until = async (done: () => Promise<boolean>) => {
  for (let tries = 0; tries < 600; tries++) {
    if (await done()) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('never came back');
};

describe('the Medplum thread killed mid-flood', () => {
  it('answers 503 while it is down, then serves again on the same store: every acknowledged write is there', async () => {
    const events: SupervisorEvent[] = [];
    // Its HTTP API too, on a port of its own, as npm start serves it: back on the same port after the restart.
    const medplum = await superviseMedplumThread(
      { dbPath: join(dir, 'store.sqlite'), baseUrl: BASE_URL, httpPort: 0, hostname: '127.0.0.1' },
      { onEvent: (event) => events.push(event) },
    );
    try {
      const app = createApp({
        medplum: { baseUrl: medplum.baseUrl, fetch: medplum.fetch },
        issuer: medplum.baseUrl,
        projectId: medplum.projectId,
        limits: DEFAULT_LIMITS,
      });
      const call = createCaller(app, openApiDocument(app), () => medplum.demoTokens.alice);
      // The tokens patients hold from before the death.
      const tokens = { ...medplum.demoTokens };
      const patients = ['alice', 'bob', 'carol', 'dave'];

      let acknowledged = 0;
      let killed: Promise<void> | undefined;
      const flood = await Promise.all(
        Array.from({ length: 400 }, async (_, i) => {
          const token = tokens[patients[i % patients.length]];
          const res = await call('POST', '/v1/fhir/QuestionnaireResponse', {
            token,
            body: {
              resourceType: 'QuestionnaireResponse',
              status: 'in-progress',
              questionnaire: `https://q.example/flood-${i}|1`,
            },
          });
          if (res.status === 201 && ++acknowledged === 40) {
            killed = medplum.kill();
          }
          return { token, res };
        }),
      );
      await killed;
      const statuses = flood.map((f) => f.res.status);
      expect(new Set(statuses.filter((s) => s !== 201 && s !== 503 && s !== 429))).toEqual(new Set());
      expect(statuses).toContain(201);
      expect(statuses).toContain(503);
      const down = flood.find((f) => f.res.status === 503);
      expect(down?.res.body).toMatchObject({ error: { code: 'upstream_unavailable' } });

      await until(async () => (await call('GET', '/v1/patient/profile')).status === 200);
      expect(events.map((e) => e.kind)).toEqual(['stopped', 'restarted']);
      expect(events[0]).toEqual({ kind: 'stopped', reason: 'KILLED' });

      // Every 201 is there, read back with the token its patient held before the death.
      const written = flood.filter((f) => f.res.status === 201);
      for (const { token, res } of written) {
        const id = (res.body as QuestionnaireResponse).id;
        const read = await call('GET', `/v1/fhir/QuestionnaireResponse/${id}`, { token });
        expect(read.status).toBe(200);
        expect((read.body as QuestionnaireResponse).questionnaire).toBe(
          (res.body as QuestionnaireResponse).questionnaire,
        );
      }
      // And another patient is served as before, and Medplum's HTTP API answers where it did.
      expect((await call('GET', '/v1/patient/profile', { token: tokens.carol })).status).toBe(200);
      const health = await fetch(`http://127.0.0.1:${medplum.httpPort}/healthcheck`);
      expect(health.status).toBe(200);
    } finally {
      await medplum.close();
    }
    expect(await medplum.stopped).toBeUndefined();
  });

  it('is not restarted on an in-memory store (it would come back empty): it stops for good', async () => {
    const events: SupervisorEvent[] = [];
    const medplum = await superviseMedplumThread(
      { dbPath: ':memory:', baseUrl: BASE_URL },
      { onEvent: (event) => events.push(event) },
    );
    await medplum.kill();
    expect(await medplum.stopped).toMatchObject({ code: 'KILLED' });
    expect(events).toEqual([
      { kind: 'stopped', reason: 'KILLED' },
      { kind: 'gave-up', reason: 'KILLED; in-memory store: a restart would be an empty Medplum' },
    ]);
    await expect(medplum.fetch(new URL('fhir/R4/metadata', BASE_URL))).rejects.toThrow(TypeError);
  });
});

describe('the restart budget', () => {
  /** A thread that dies when told to. */
  const fakeThread = (projectId = 'p') => {
    let die: (err: Error) => void = () => undefined;
    const stopped = new Promise<Error | undefined>((resolve) => {
      die = resolve;
    });
    const thread = {
      baseUrl: BASE_URL,
      projectId,
      edgeStatementKey: 'k',
      demoTokens: {},
      demoApps: {},
      graphql: { built: true, ms: 0 },
      fetch: (() => Promise.resolve(new Response('{}'))) as typeof fetch,
      cpuUsage: () => Promise.resolve(0),
      stopped,
      close: async () => undefined,
      kill: async () => die(Object.assign(new Error('oom'), { code: 'ERR_WORKER_OUT_OF_MEMORY' })),
    } satisfies MedplumThread;
    return thread;
  };

  it(`restarts ${MAX_RESTARTS} times, then gives up and stops for good`, async () => {
    const started: MedplumThread[] = [];
    const events: SupervisorEvent[] = [];
    const medplum = await superviseMedplumThread(
      { dbPath: join(dir, 'fake.sqlite'), baseUrl: BASE_URL },
      {
        onEvent: (event) => events.push(event),
        start: async () => {
          const thread = fakeThread();
          started.push(thread);
          return thread;
        },
      },
    );
    for (let death = 0; death <= MAX_RESTARTS; death++) {
      await started[death].kill();
      await until(async () => events.length >= 2 * (death + 1));
    }
    expect(await medplum.stopped).toMatchObject({ code: 'ERR_WORKER_OUT_OF_MEMORY' });
    expect(started).toHaveLength(MAX_RESTARTS + 1);
    expect(events.at(-1)).toEqual({
      kind: 'gave-up',
      reason: `ERR_WORKER_OUT_OF_MEMORY; ${MAX_RESTARTS + 1} deaths in 10 minutes`,
    });
  });

  it('gives up when the restarted Medplum is another project', async () => {
    let starts = 0;
    const first = fakeThread('p');
    const events: SupervisorEvent[] = [];
    const medplum = await superviseMedplumThread(
      { dbPath: join(dir, 'other.sqlite'), baseUrl: BASE_URL },
      {
        onEvent: (event) => events.push(event),
        start: async () => (starts++ === 0 ? first : fakeThread('another')),
      },
    );
    await first.kill();
    expect(await medplum.stopped).toBeInstanceOf(Error);
    expect(events.at(-1)).toEqual({ kind: 'gave-up', reason: 'restart failed (Error)' });
  });
});
