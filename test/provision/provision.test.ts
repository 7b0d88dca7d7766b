import type { Project } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { platformDefinition } from '../../src/provision/definition';
import { demoDefinition } from '../../src/provision/demo';
import { startTestBackend, type TestBackend } from '../support/backend';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const historyRows = () =>
  (backend.db.reader.prepare("SELECT count(*) AS n FROM history WHERE type <> 'AuditEvent'").get() as { n: number }).n;

describe('provisioning', () => {
  it('sets up the project: features, default patient policy, deployed bots with memberships', async () => {
    const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id);
    expect(project.features).toEqual(expect.arrayContaining(['bots', 'transaction-bundles', 'cron']));
    expect(project.defaultPatientAccessPolicy?.reference).toMatch(/^AccessPolicy\//);
    expect(backend.provisioning.deployed.sort()).toEqual(platformDefinition.bots.map((b) => b.key).sort());
    const bot = await backend.admin.searchOne('Bot', { name: 'patient-home' });
    // A project admin may read the code's Binary, so Medplum hands it over presigned (fhir/rewrite.ts).
    expect(bot?.executableCode?.url).toMatch(
      /^http:\/\/embedded\.medplum\.local\/storage\/[\w-]+\/[\w-]+\?Expires=\d+&Signature=/,
    );
    const membership = await backend.admin.searchOne('ProjectMembership', { profile: `Bot/${bot?.id}` });
    expect(membership?.accessPolicy?.reference).toMatch(/^AccessPolicy\//);
  });

  it('a second run through the Medplum API changes nothing', async () => {
    const definition = demoDefinition();
    // The test backend skipped provisioning's one-off bot runs: the first run here makes the free Slots.
    await applyDefinition(backend.admin, definition, { bundles: readBotBundles(definition) });
    await backend.subscriptions.idle();
    const before = historyRows();
    const report = await applyDefinition(backend.admin, definition, { bundles: readBotBundles(definition) });
    expect(report.created).toEqual([]);
    expect(report.updated).toEqual([]);
    expect(report.deployed).toEqual([]);
    expect(report.unchanged.length).toBeGreaterThan(10);
    await backend.subscriptions.idle();
    // No new versions of anything, the slot bot's run included: the store is as it was (AuditEvents aside).
    expect(historyRows()).toBe(before);
  });

  it('a changed definition updates only what changed', async () => {
    const definition = demoDefinition();
    const changed = {
      ...definition,
      accessPolicies: definition.accessPolicies.map((p) =>
        p.key === 'bot-patient-home' ? { ...p, policy: { ...p.policy, name: 'Bot: patient-home (v2)' } } : p,
      ),
    };
    const report = await applyDefinition(backend.admin, changed, { bundles: readBotBundles(changed) });
    expect(report.updated).toEqual(['policy-bot-patient-home']);
    expect(report.created).toEqual([]);
  });
});
