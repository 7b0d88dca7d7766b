import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MedplumClient, WithId } from '@medplum/core';
import type { AccessPolicy, Bot, ProjectMembership } from '@medplum/fhirtypes';
import { BOT_AUDIENCE, SYSTEMS } from '../../contracts/systems';
import { buildBot } from '../../scripts/bot-build';
import type { TestBackend } from './backend';

/** Builds a fixture bot exactly like production bots (same esbuild options). */
export async function buildFixtureBot(name: string): Promise<string> {
  const outfile = join(mkdtempSync(join(tmpdir(), 'pc-bot-')), `${name}.js`);
  await buildBot(join('test/embedded/fixtures/bots', `${name}.ts`), outfile);
  return readFileSync(outfile, 'utf8');
}

/** Creates, deploys and gives a membership (with its own policy) to a fixture bot, as an admin would. */
export async function deployFixtureBot(
  backend: TestBackend,
  name: string,
  policy: AccessPolicy['resource'] = [{ resourceType: 'Observation' }],
): Promise<WithId<Bot>> {
  const code = await buildFixtureBot(name);
  const accessPolicy = await backend.admin.createResource<AccessPolicy>({
    resourceType: 'AccessPolicy',
    name: `bot ${name}`,
    resource: policy,
  });
  // Bot + membership through Medplum's admin API (packages/server/src/admin/bot.ts): a project admin
  // cannot write ProjectMembership.user over FHIR.
  const created = (await backend.admin.post(`admin/projects/${backend.project.id}/bot`, {
    name,
    accessPolicy: { reference: `AccessPolicy/${accessPolicy.id}` },
  })) as WithId<Bot>;
  const bot = await backend.admin.updateResource<Bot>({
    ...created,
    // Tagged for patients, so the default patient policy lets patients $execute it.
    identifier: [{ system: SYSTEMS.bots, value: `test-${name}` }],
    meta: { ...created.meta, tag: [{ system: BOT_AUDIENCE.system, code: BOT_AUDIENCE.patient }] },
  });
  await backend.admin.post(backend.admin.fhirUrl('Bot', bot.id, '$deploy'), { code, filename: `${name}.js` });
  return backend.admin.readResource('Bot', bot.id);
}

/** The membership of a provisioned platform bot (by its `SYSTEMS.bots` identifier): what it runs as. */
export async function botMembership(backend: TestBackend, key: string): Promise<WithId<ProjectMembership>> {
  const bot = await backend.systemRepo.searchOne<Bot>({
    resourceType: 'Bot',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.bots}|${key}` }],
  });
  const membership = await backend.systemRepo.searchOne<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'profile', operator: 'eq', value: `Bot/${bot?.id}` }],
  });
  if (!membership) {
    throw new Error(`no provisioned bot ${key}`);
  }
  return membership as WithId<ProjectMembership>;
}

/** Signs in as a provisioned platform bot, with its own membership. */
export async function signInAsBot(
  backend: TestBackend,
  key: string,
): Promise<{ medplum: MedplumClient; token: string }> {
  return backend.login(await botMembership(backend, key));
}
