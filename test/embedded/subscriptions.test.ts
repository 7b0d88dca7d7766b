import type { WithId } from '@medplum/core';
import type { AuditEvent, Bot, Bundle, Observation, Subscription } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResourceChange, SqliteRepository } from '../../src/embedded/store/repo';
import {
  MAX_CONCURRENT_DELIVERIES,
  SUPPORTED_INTERACTION_URL,
  SubscriptionQueue,
} from '../../src/embedded/subscriptions';
import { startTestBackend, type TestBackend } from '../support/backend';
import { deployFixtureBot } from '../support/bots';

let backend: TestBackend;
let bot: WithId<Bot>;
const CODE = 'subscription-test';

beforeAll(async () => {
  backend = await startTestBackend({ subscriptionRetryDelayMs: 10 });
  bot = await deployFixtureBot(backend, 'tag-observation');
  await backend.admin.createResource<Subscription>({
    resourceType: 'Subscription',
    status: 'active',
    reason: 'test',
    criteria: `Observation?code=${CODE}`,
    channel: { type: 'rest-hook', endpoint: `Bot/${bot.id}` },
    extension: [{ url: SUPPORTED_INTERACTION_URL, valueCode: 'create' }],
  });
});
afterAll(() => backend?.close());

const observation = (note?: string): Observation => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [{ code: CODE }] },
  subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
  note: note ? [{ text: note }] : undefined,
});

const botRuns = async () =>
  backend.systemRepo.searchResources<AuditEvent>({
    resourceType: 'AuditEvent',
    filters: [{ code: 'entity', operator: 'eq', value: `Bot/${bot.id}` }],
    count: 100,
  });

const isTagged = (o: Observation) => o.meta?.tag?.some((t) => t.code === 'seen-by-bot') ?? false;

describe('subscriptions wake bots after commit', () => {
  it('fires for a committed create that matches the criteria, and not for others', async () => {
    const matching = await backend.admin.createResource(observation());
    const other = await backend.admin.createResource({ ...observation(), code: { coding: [{ code: 'other' }] } });
    await backend.subscriptions.idle();
    expect(isTagged(await backend.admin.readResource('Observation', matching.id))).toBe(true);
    expect(isTagged(await backend.admin.readResource('Observation', other.id))).toBe(false);
  });

  it('does not fire for a write that was rolled back', async () => {
    const before = (await botRuns()).length;
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Observation' }, resource: observation('rolled back') },
        {
          request: { method: 'PUT', url: 'Observation/missing', ifMatch: 'W/"1"' },
          resource: { ...observation(), id: 'missing' },
        },
      ],
    };
    await expect(backend.admin.executeBatch(bundle)).rejects.toThrow();
    await backend.subscriptions.idle();
    expect((await botRuns()).length).toBe(before);
    const leftovers = await backend.admin.searchResources('Observation', { code: CODE, _count: '100' });
    expect(leftovers.some((o) => o.note?.[0]?.text === 'rolled back')).toBe(false);
  });

  // DESIGN section 2, from packages/server/src/workers/subscription.ts: Medplum delivers to a bot once and
  // does not retry the bot's own failure (only a delivery the platform failed to make); lost work is the
  // reconciler's (bots/reconcile.ts).
  it("does not retry a delivery whose bot's own code failed", async () => {
    const before = (await botRuns()).length;
    const created = await backend.admin.createResource(observation('fail-once'));
    await backend.subscriptions.idle();
    const after = await backend.admin.readResource('Observation', created.id);
    expect(after.note?.map((n) => n.text)).toEqual(['fail-once', 'attempts:1']);
    expect(isTagged(after)).toBe(false);
    const runs = (await botRuns()).slice(before);
    expect(runs.map((a) => a.outcome)).toEqual(['4']);
  });
});

describe('deliveries at once (issue 24)', () => {
  it(`a burst of 200 matching changes runs at most ${MAX_CONCURRENT_DELIVERIES} bot runs at once, and delivers every one`, async () => {
    const subscription: Subscription = {
      resourceType: 'Subscription',
      id: 'sub',
      status: 'active',
      reason: 'test',
      criteria: 'Observation',
      channel: { type: 'rest-hook', endpoint: 'Bot/b' },
      meta: { project: 'p' },
    };
    let running = 0;
    let most = 0;
    const delivered: string[] = [];
    const queue = new SubscriptionQueue({
      systemRepo: {
        searchResources: async () => [subscription],
        readResource: async () => ({ resourceType: 'Bot', id: 'b' }),
      } as unknown as SqliteRepository,
      runBot: async (_bot, input) => {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running--;
        delivered.push((input as Observation).id as string);
      },
    });
    const changes = Array.from({ length: 200 }, (_, i) => ({
      interaction: 'create' as const,
      resource: { resourceType: 'Observation', id: `o${i}`, status: 'final', code: {}, meta: { project: 'p' } },
    }));
    queue.enqueueChanges(changes as unknown as ResourceChange[]);
    await queue.idle();
    expect(most).toBe(MAX_CONCURRENT_DELIVERIES);
    expect(delivered.sort()).toEqual(changes.map((c) => c.resource.id).sort());
  });
});
