import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OperationOutcomeError } from '@medplum/core';
import type { AuditEvent, OperationOutcome } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { loadBotBundle, runBotBundle } from '../../src/embedded/bots/vm';
import { ApiError } from '../../src/errors';
import { callBot } from '../../src/medplum/bots';
import { startTestBackend, type TestBackend } from '../support/backend';
import { buildFixtureBot, deployFixtureBot } from '../support/bots';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend({ botTimeoutMs: 2000 });
});
afterAll(() => backend?.close());

const runAlone = (code: string, timeoutMs = 1000) =>
  runBotBundle({
    code,
    baseUrl: 'http://unused.invalid/',
    accessToken: 'unused',
    fetch,
    event: { bot: { reference: 'Bot/x' }, input: {}, contentType: 'application/json', secrets: {}, traceId: 't' },
    timeoutMs,
  });

describe('bot bundles in the vmcontext sandbox', () => {
  it('every built bot bundle loads in a fresh context with only the vmcontext globals', () => {
    const files = readdirSync('dist/bots').filter((f) => f.endsWith('.js'));
    expect(files).toContain('patient-home.js');
    for (const file of files) {
      expect(loadBotBundle(readFileSync(join('dist/bots', file), 'utf8'))).toBe('function');
    }
  });

  it('a bundle that touches process fails, as it would on Medplum', async () => {
    await expect(runAlone(await buildFixtureBot('touches-process'))).rejects.toThrow(/process is not defined/);
  });

  it('a bundle that uses setTimeout fails, as it would on Medplum', async () => {
    await expect(runAlone(await buildFixtureBot('uses-timer'))).rejects.toThrow(/setTimeout is not defined/);
  });

  it('a bot that never settles is stopped by the timeout', async () => {
    await expect(runAlone(await buildFixtureBot('never-ends'), 200)).rejects.toThrow(/timed out/);
  });
});

describe('$execute', () => {
  it('gives the bot the caller as requester and runs it as its own membership', async () => {
    const bot = await deployFixtureBot(backend, 'echo-requester');
    const { alice } = backend.patients;
    const result = (await alice.medplum.executeBot(bot.id, { hello: 'world' }, 'application/json')) as Record<
      string,
      unknown
    >;
    expect(result).toEqual({ requester: `Patient/${alice.patient.id}`, input: { hello: 'world' }, bot: 'Bot' });
    const byIdentifier = (await backend.patients.carol.medplum.executeBot(
      { system: 'https://patient-care.example/bots', value: 'test-echo-requester' },
      {},
      'application/json',
    )) as Record<string, unknown>;
    expect(byIdentifier.requester).toBe(`Patient/${backend.patients.carol.patient.id}`);
    const audits = await backend.systemRepo.searchResources<AuditEvent>({
      resourceType: 'AuditEvent',
      filters: [{ code: 'entity', operator: 'eq', value: `Bot/${bot.id}` }],
    });
    expect(audits).toHaveLength(2);
    expect(audits.every((a) => a.outcome === '0')).toBe(true);
  });

  it('a bot that throws answers 400 with an OperationOutcome, and is audited as failed', async () => {
    const bot = await deployFixtureBot(backend, 'touches-process');
    const error = await backend.patients.alice.medplum
      .executeBot(bot.id, {}, 'application/json')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OperationOutcomeError);
    expect((error as OperationOutcomeError).outcome.issue?.[0]?.details?.text).toMatch(/process is not defined/);
    const audits = await backend.systemRepo.searchResources<AuditEvent>({
      resourceType: 'AuditEvent',
      filters: [{ code: 'entity', operator: 'eq', value: `Bot/${bot.id}` }],
    });
    expect(audits.map((a) => a.outcome)).toEqual(['4']);
  });

  // packages/server/src/fhir/operations/execute.ts + bots/vmcontext.ts: a bot that throws is HTTP 400 and
  // the body is normalizeOperationOutcome of what it threw, so a thrown conflict keeps its code.
  it('a bot that throws an outcome answers HTTP 400 with that outcome; the gateway calls it a bot failure, not a conflict', async () => {
    await deployFixtureBot(backend, 'throws-conflict');
    const alice = backend.patients.alice;
    const response = await backend.fetch(
      new URL(`fhir/R4/Bot/$execute?identifier=${SYSTEMS.bots}|test-throws-conflict`, backend.baseUrl),
      {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' },
        body: '{}',
      },
    );
    expect(response.status).toBe(400);
    expect(((await response.json()) as OperationOutcome).issue?.[0]?.code).toBe('conflict');
    const failure = await callBot(alice.medplum, { system: SYSTEMS.bots, value: 'test-throws-conflict' }, {}).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(Error);
    expect(failure).not.toBeInstanceOf(ApiError);
    expect((failure as Error).message).toBe('workflow bot failed');
  });
});
