import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditEvent, Bot } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { botRunsOf, roundTripsByBot, servedLines, topLevelServerMs } from '../../scripts/round-trips';

/**
 * scripts/round-trips.ts: a real Medplum's request log (logRequests: packages/server/src/app.ts
 * loggingMiddleware, with the request context's traceId and profile) made into round trips per bot run.
 */
const T0 = Date.parse('2026-11-26T19:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();
const served = (ms: number, durationMs: number, path: string, traceId: string, profile?: string, method = 'GET') =>
  JSON.stringify({
    level: 'INFO',
    msg: 'Request served',
    durationMs,
    method,
    path,
    receivedAt: at(ms),
    status: 200,
    traceId,
    ...(profile ? { profile } : {}),
  });
const audit = (bot: string, traceId: string, from: number, to: number): AuditEvent => ({
  resourceType: 'AuditEvent',
  type: { code: 'execute' },
  recorded: at(to),
  agent: [],
  source: { observer: { reference: bot } },
  period: { start: at(from), end: at(to) },
  extension: [
    {
      url: 'https://medplum.com/fhir/StructureDefinition/tracing',
      extension: [{ url: 'traceId', valueId: traceId }],
    },
  ],
});

describe("a real Medplum's request log", () => {
  it('puts each bot request in its run (two runs of one bot in one trace apart), takes the longest chain, and sums the callers’ time', () => {
    const dir = mkdtempSync(join(tmpdir(), 'medplum-log-'));
    const log = join(dir, 'medplum.log');
    writeFileSync(
      log,
      [
        'not json',
        served(-5_000, 3, '/healthcheck', 'early'),
        served(0, 50, '/fhir/R4/Bot/$execute', 't1', 'Patient/p', 'POST'),
        // start-assessment: two reads together, then one after, then the write
        served(1, 4, '/fhir/R4/Patient/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e', 't1', 'Bot/a'),
        served(2, 4, '/fhir/R4/PlanDefinition?url=x&version=1', 't1', 'Bot/a'),
        served(7, 3, '/fhir/R4/EpisodeOfCare?identifier=y', 't1', 'Bot/a'),
        served(11, 20, '/fhir/R4', 't1', 'Bot/a', 'POST'),
        // eligibility, twice in one trace: the second run's request is not the first's
        served(100, 5, '/fhir/R4/Task/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e', 't2', 'Bot/e'),
        served(106, 5, '/fhir/R4', 't2', 'Bot/e', 'POST'),
        served(300, 5, '/fhir/R4/Task/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e', 't2', 'Bot/e'),
        served(120, 30, '/fhir/R4/Task/1', 't3', 'Practitioner/c', 'PUT'),
      ].join('\n'),
    );
    const lines = servedLines(log, new Date(T0 - 1_000), new Date(T0 + 1_000));
    expect(lines).toHaveLength(9);
    const bots: Bot[] = [
      { resourceType: 'Bot', id: 'a', identifier: [{ value: 'start-assessment' }] },
      { resourceType: 'Bot', id: 'e', identifier: [{ value: 'eligibility' }] },
    ];
    const runs = botRunsOf(lines, bots, [
      audit('Bot/a', 't1', 0, 32),
      audit('Bot/e', 't2', 99, 112),
      audit('Bot/e', 't2', 299, 306),
    ]);
    expect(runs.map((r) => [r.bot, r.requests.length])).toEqual([
      ['start-assessment', 4],
      ['eligibility', 2],
      ['eligibility', 1],
    ]);
    expect(roundTripsByBot(runs)).toEqual([
      {
        bot: 'start-assessment',
        runs: 1,
        maxRequests: 4,
        maxSequential: 3,
        chain: ['GET Patient/{id}', 'GET EpisodeOfCare?identifier', 'POST (batch)'],
      },
      { bot: 'eligibility', runs: 2, maxRequests: 2, maxSequential: 2, chain: ['GET Task/{id}', 'POST (batch)'] },
    ]);
    // The callers' own requests: the $execute and the clinician's write (the early healthcheck is outside).
    expect(topLevelServerMs(lines)).toBe(80);
  });

  it("Medplum 5.1's lines name no caller: a bot's requests are known by their run's trace and period, the $execute that started it stays the caller's", () => {
    const dir = mkdtempSync(join(tmpdir(), 'medplum-log-'));
    const log = join(dir, 'medplum.log');
    writeFileSync(
      log,
      [
        served(0, 50, '/fhir/R4/Bot/$execute', 't1', undefined, 'POST'),
        served(1, 4, '/fhir/R4/Patient/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e', 't1'),
        served(7, 3, '/fhir/R4/EpisodeOfCare?identifier=y', 't1'),
        served(11, 20, '/fhir/R4', 't1', undefined, 'POST'),
        // Another trace at the same time: a patient's own read, not the bot's.
        served(5, 6, '/fhir/R4/Patient/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e', 't9'),
      ].join('\n'),
    );
    const lines = servedLines(log, new Date(T0 - 1_000), new Date(T0 + 1_000));
    const runs = botRunsOf(
      lines,
      [{ resourceType: 'Bot', id: 'a', identifier: [{ value: 'start-assessment' }] }],
      [audit('Bot/a', 't1', 0, 32)],
    );
    expect(runs.map((r) => [r.bot, r.requests.length])).toEqual([['start-assessment', 3]]);
    expect(roundTripsByBot(runs)[0].maxSequential).toBe(3);
    // The callers': the $execute (50) and the other trace's read (6).
    expect(topLevelServerMs(lines)).toBe(56);
  });
});
