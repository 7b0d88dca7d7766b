import crypto from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type { AuditEvent, Bot } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { binaryIdOf } from '../../contracts/attachments';
import { AuditWriter } from '../../src/embedded/bots/operations';
import { runBotBundle } from '../../src/embedded/bots/vm';
import { startTestBackend, type TestBackend } from '../support/backend';
import { deployFixtureBot } from '../support/bots';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend({ botTimeoutMs: 2000 });
});
afterAll(() => backend?.close());

/**
 * A bundle (CommonJS, as the bot build makes them) that reports what an earlier run left behind,
 * then tries to leave something of each kind for the next: a global, the sandbox's own intrinsics'
 * prototypes, the shared host classes and their prototypes, a module `require` hands out, the
 * bundle's module state, the event.
 */
const POLLUTER = `
let runs = 0;
exports.handler = async (medplum, event) => {
  runs++;
  const crypto = require('node:crypto');
  const seen = {
    global: typeof globalThis.leftBehind,
    objectPrototype: typeof ({}).leftBehind,
    arrayPrototype: typeof [].leftBehind,
    promisePrototype: typeof Promise.prototype.leftBehind,
    medplumClient: typeof MedplumClient.leftBehind,
    medplumClientPrototype: typeof medplum.leftBehind,
    url: typeof new URL('http://x/').leftBehind,
    headers: typeof Headers.leftBehind,
    cryptoModule: typeof crypto.leftBehind,
    cryptoFunction: crypto.createHash === globalThis.__ownCreateHash,
    moduleRuns: runs,
    consoleLog: typeof console.leftBehind,
  };
  const attempt = (f) => { try { f(); } catch {} };
  globalThis.leftBehind = 1;
  Object.prototype.leftBehind = 1;
  Array.prototype.leftBehind = 1;
  Promise.prototype.leftBehind = 1;
  attempt(() => { MedplumClient.leftBehind = 1; });
  attempt(() => { MedplumClient.prototype.leftBehind = 1; });
  attempt(() => { MedplumClient.prototype.get = () => 'hijacked'; });
  attempt(() => { URL.prototype.leftBehind = 1; });
  attempt(() => { Headers.leftBehind = 1; });
  attempt(() => { crypto.leftBehind = 1; });
  attempt(() => { globalThis.__ownCreateHash = () => 'hijacked'; crypto.createHash = globalThis.__ownCreateHash; });
  attempt(() => { console.leftBehind = 1; });
  attempt(() => { event.secrets.leftBehind = 1; });
  return seen;
};
`;

const run = () =>
  runBotBundle({
    code: POLLUTER,
    baseUrl: 'http://unused.invalid/',
    accessToken: 'unused',
    fetch,
    event: { bot: { reference: 'Bot/x' }, input: {}, contentType: 'application/json', secrets: {}, traceId: 't' },
    timeoutMs: 1000,
  }) as Promise<Record<string, unknown>>;

describe('a warm bot runtime keeps runs apart', () => {
  it('a run observes nothing an earlier run of the same bundle left behind', async () => {
    const clean = {
      global: 'undefined',
      objectPrototype: 'undefined',
      arrayPrototype: 'undefined',
      promisePrototype: 'undefined',
      medplumClient: 'undefined',
      medplumClientPrototype: 'undefined',
      url: 'undefined',
      headers: 'undefined',
      cryptoModule: 'undefined',
      cryptoFunction: false,
      moduleRuns: 1,
      consoleLog: 'undefined',
    };
    expect(await run()).toEqual(clean);
    // Many runs, so that pooled contexts made before and after the first are all taken.
    for (let i = 0; i < 10; i++) {
      expect(await run()).toEqual(clean);
    }
  });

  it('nor does the host', async () => {
    await run();
    expect((MedplumClient as unknown as Record<string, unknown>).leftBehind).toBeUndefined();
    expect((MedplumClient.prototype as unknown as Record<string, unknown>).leftBehind).toBeUndefined();
    expect(typeof MedplumClient.prototype.get).toBe('function');
    expect(MedplumClient.prototype.get.toString()).not.toContain('hijacked');
    expect((URL.prototype as unknown as Record<string, unknown>).leftBehind).toBeUndefined();
    expect(crypto.createHash('sha256').update('x').digest('hex')).toHaveLength(64);
    expect(({} as Record<string, unknown>).leftBehind).toBeUndefined();
  });
});

describe('a deployed bundle', () => {
  it('is compiled once and a redeploy runs the new code from the next call', async () => {
    const bot = await deployFixtureBot(backend, 'echo-requester');
    const execute = () => backend.admin.post(backend.admin.fhirUrl('Bot', bot.id, '$execute'), {});
    const first = await execute();
    expect(first).toBeDefined();
    const replaced = 'exports.handler = async () => ({ resourceType: "Parameters", id: "second-deploy" });';
    await backend.admin.post(backend.admin.fhirUrl('Bot', bot.id, '$deploy'), { code: replaced, filename: 'b.js' });
    expect(await execute()).toMatchObject({ id: 'second-deploy' });
    // The same Binary rewritten in place (an admin's PUT) is read again too.
    const deployed = (await backend.admin.readResource('Bot', bot.id)) as Bot;
    // As a project admin may read it, its URL comes presigned (fhir/rewrite.ts): its id either way.
    const binaryId = binaryIdOf(deployed.executableCode?.url, { baseUrl: backend.baseUrl }) as string;
    const third = 'exports.handler = async () => ({ resourceType: "Parameters", id: "rewritten" });';
    await backend.admin.updateResource({
      resourceType: 'Binary',
      id: binaryId,
      contentType: 'application/javascript',
      data: Buffer.from(third).toString('base64'),
    });
    expect(await execute()).toMatchObject({ id: 'rewritten' });
  });
});

describe('bot AuditEvents', () => {
  it('runs that finish together share one transaction, and each run has its AuditEvent when it answers', async () => {
    const bot = await deployFixtureBot(backend, 'echo-requester');
    const audits = async () =>
      (
        await backend.systemRepo.searchResources<AuditEvent>({
          resourceType: 'AuditEvent',
          filters: [{ code: 'entity', operator: 'eq', value: `Bot/${bot.id}` }],
          count: 1000,
        })
      ).length;
    const before = await audits();
    // Counts the store's commits (the spy passes every statement through to SQLite).
    const exec = vi.spyOn(backend.db.writer, 'exec');
    const commits = () => exec.mock.calls.filter(([sql]) => sql === 'COMMIT').length;
    const execute = () => backend.admin.post(backend.admin.fhirUrl('Bot', bot.id, '$execute'), {});
    try {
      // One after another, each run's AuditEvent is a group of one; together, they share commits.
      let mark = commits();
      for (let i = 0; i < 12; i++) {
        await execute();
      }
      const oneByOne = commits() - mark;
      expect(await audits()).toBe(before + 12);
      mark = commits();
      await Promise.all(Array.from({ length: 12 }, execute));
      const together = commits() - mark;
      expect(await audits()).toBe(before + 24);
      // How many groups concurrent runs form depends on when each finishes (scheduling, not a
      // contract): only that they never take more commits than one by one. The grouping itself is
      // shown deterministically below.
      expect(together).toBeLessThanOrEqual(oneByOne);
    } finally {
      exec.mockRestore();
    }
  });
});

describe('AuditWriter (deterministic)', () => {
  const audit = (n: number): AuditEvent =>
    ({ resourceType: 'AuditEvent', id: `a${n}`, recorded: '2026-01-01T00:00:00Z' }) as AuditEvent;

  it('writes everything handed to it in one turn as one transaction, and a later turn as another', async () => {
    const transactions: string[][] = [];
    const writer = new AuditWriter({
      withTransaction: (async (work: (tx: unknown) => Promise<void>) => {
        const group: string[] = [];
        await work({ createResource: async (r: AuditEvent) => group.push(r.id as string) });
        transactions.push(group);
      }) as never,
      createResource: (async () => undefined) as never,
    });
    await Promise.all(Array.from({ length: 12 }, (_, i) => writer.write(audit(i))));
    await writer.write(audit(12));
    expect(transactions).toEqual([Array.from({ length: 12 }, (_, i) => `a${i}`), ['a12']]);
  });

  it('a group whose transaction fails is written entry by entry, and every write still settles', async () => {
    const one: string[] = [];
    const writer = new AuditWriter({
      withTransaction: (async () => {
        throw new Error('group failed');
      }) as never,
      createResource: (async (r: AuditEvent) => {
        if (r.id === 'a1') {
          throw new Error('this one cannot be written');
        }
        one.push(r.id as string);
      }) as never,
    });
    await Promise.all([0, 1, 2].map((i) => writer.write(audit(i))));
    expect(one).toEqual(['a0', 'a2']);
  });
});
