import type { WithId } from '@medplum/core';
import type { AuditEvent, Bot, Project } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Scheduled bots, as Medplum's cron worker has them (packages/server/src/workers/cron.ts, addCronJobs):
 * scheduled only when a Bot is written with a cron string that differs from its previous version's, and
 * only while the Project has the `cron` feature.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const scheduled = () =>
  Object.fromEntries(
    (
      backend.db.reader.prepare('SELECT bot_id, pattern FROM cron_job').all() as { bot_id: string; pattern: string }[]
    ).map((row) => [row.bot_id, row.pattern]),
  );

const botByKey = async (key: string) =>
  (await backend.systemRepo.searchOne<Bot>({
    resourceType: 'Bot',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.bots}|${key}` }],
  })) as WithId<Bot>;

async function setCronFeature(on: boolean): Promise<void> {
  const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id);
  const others = (project.features ?? []).filter((f) => f !== 'cron');
  await backend.systemRepo.updateResource<Project>({ ...project, features: on ? [...others, 'cron'] : others });
}

const runsOf = async (bot: WithId<Bot>) =>
  (
    await backend.systemRepo.searchResources<AuditEvent>({
      resourceType: 'AuditEvent',
      filters: [{ code: 'entity', operator: 'eq', value: `Bot/${bot.id}` }],
      count: 1000,
    })
  ).length;

const provision = () => {
  const definition = demoDefinition();
  return applyDefinition(backend.admin, definition, { bundles: readBotBundles(definition), runBots: false });
};

describe('cron, as Medplum schedules it', () => {
  it('provisioning schedules every cron bot of a project with the feature, and the minute runs them', async () => {
    const reconcile = await botByKey('reconcile');
    const slots = await botByKey('materialize-slots');
    expect(scheduled()).toMatchObject({ [reconcile.id]: reconcile.cronString, [slots.id]: slots.cronString });
    const before = await runsOf(reconcile);
    await backend.cron.tick(new Date('2026-11-26T10:10:00Z'));
    await backend.subscriptions.idle();
    expect(await runsOf(reconcile)).toBe(before + 1);
  });

  it('provisioning refuses a project without the feature, naming the operator step, and writes nothing', async () => {
    await setCronFeature(false);
    try {
      const rows = backend.db.reader.prepare('SELECT count(*) AS n FROM history').get();
      await expect(provision()).rejects.toThrow(/lacks the features cron: a Medplum super admin must enable them/);
      expect(backend.db.reader.prepare('SELECT count(*) AS n FROM history').get()).toEqual(rows);
    } finally {
      await setCronFeature(true);
    }
  });

  it('without the feature a new cron string schedules nothing, and the minute runs nothing unscheduled', async () => {
    const reconcile = await botByKey('reconcile');
    await setCronFeature(false);
    try {
      await backend.systemRepo.updateResource<Bot>({ ...reconcile, cronString: '*/5 * * * *' });
      await backend.cron.settled();
      expect(scheduled()[reconcile.id]).toBe(reconcile.cronString);
      // Written again without a cron string: not unscheduled either.
      backend.db.writer.prepare('DELETE FROM cron_job WHERE bot_id = ?').run(reconcile.id);
      const before = await runsOf(reconcile);
      await backend.cron.tick(new Date('2026-11-26T10:10:00Z'));
      expect(await runsOf(reconcile)).toBe(before);
    } finally {
      await setCronFeature(true);
    }
    // The feature on, the same string written again is no change: still unscheduled (Medplum too).
    await backend.systemRepo.updateResource<Bot>({ ...(await botByKey('reconcile')), description: 'touched' });
    await backend.cron.settled();
    expect(scheduled()[reconcile.id]).toBeUndefined();
  });

  it('a project that gained the feature later: provisioning schedules its cron bots once, and a further run writes nothing', async () => {
    const reconcile = await botByKey('reconcile');
    // As an earlier provisioning left it, before the feature: no mark, never scheduled.
    await backend.systemRepo.updateResource<Bot>({
      ...reconcile,
      extension: reconcile.extension?.filter((e) => e.url !== EXTENSIONS.cronScheduled),
    });
    backend.db.writer.prepare('DELETE FROM cron_job WHERE bot_id = ?').run(reconcile.id);
    await backend.cron.settled();
    const report = await provision();
    expect(report.updated).toContain('bot-reconcile');
    await backend.cron.settled();
    expect(scheduled()[reconcile.id]).toBe('*/10 * * * *');
    const again = await provision();
    expect(again.updated).toEqual([]);
    expect(again.created).toEqual([]);
  });
});
