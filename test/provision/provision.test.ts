import type {
  CareTeam,
  ClinicalImpression,
  Encounter,
  Observation,
  PlanDefinition,
  Project,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { platformDefinition } from '../../src/provision/definition';
import { demoDefinition } from '../../src/provision/demo';
import { startTestBackend, type TestBackend } from '../support/backend';

let backend: TestBackend;
beforeAll(async () => {
  // Provisioning is run again and again here, as an admin: more than a minute's FHIR quota of one member.
  backend = await startTestBackend({ fhirQuota: 1_000_000 });
});
afterAll(() => backend?.close());

const historyRows = () =>
  (backend.db.reader.prepare("SELECT count(*) AS n FROM history WHERE type <> 'AuditEvent'").get() as { n: number }).n;

/** Provisioning run again on `on` with the demo definition, as an operator runs it (its bots not run). */
function reprovision(on: TestBackend) {
  const definition = demoDefinition();
  return applyDefinition(on.admin, definition, { bundles: readBotBundles(definition), runBots: false });
}

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

describe('what provisioning brings stored records and published versions to (issue 48)', () => {
  // A backend of its own, with room for several provisioning runs a minute (each costs the admin's quota).
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await startTestBackend({ fhirQuota: 1_000_000 });
  });
  afterAll(() => backend?.close());

  it('a blood pressure stored as two Observations gets its panel, derived from them, once; the two stay as they were', async () => {
    const patient = backend.patients.alice.patient;
    const subject = { reference: `Patient/${patient.id}` };
    const effectiveDateTime = '2026-11-20T08:15:00.000Z';
    const reading = (code: string, value: number) =>
      backend.systemRepo.createResource<Observation>({
        resourceType: 'Observation',
        meta: { project: backend.project.id },
        status: 'final',
        category: [
          { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
        ],
        code: { coding: [{ system: 'http://loinc.org', code }] },
        subject,
        performer: [subject],
        effectiveDateTime,
        valueQuantity: { value, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
        interpretation: [{ coding: [{ code: 'H' }] }],
      });
    const systolic = await reading('8480-6', 152);
    const diastolic = await reading('8462-4', 96);
    // A lone systolic of another time has no pair: nothing is made of it.
    await backend.systemRepo.createResource<Observation>({
      ...systolic,
      id: undefined,
      effectiveDateTime: '2026-11-21T08:15:00.000Z',
    } as Observation);
    const definition = demoDefinition();
    const first = await applyDefinition(backend.admin, definition, {
      bundles: readBotBundles(definition),
      runBots: false,
    });
    expect(first.updated).toContain('migration-blood-pressure-panels-1');
    const panels = await backend.systemRepo.searchResources<Observation>({
      resourceType: 'Observation',
      filters: [
        { code: 'subject', operator: 'eq', value: subject.reference },
        { code: 'code', operator: 'eq', value: 'http://loinc.org|85354-9' },
      ],
    });
    expect(panels).toHaveLength(1);
    expect(panels[0]).toMatchObject({
      status: 'final',
      effectiveDateTime,
      performer: [subject],
      method: { coding: [{ code: 'patient-reported' }] },
      component: [
        { code: { coding: [{ code: '8480-6' }] }, valueQuantity: { value: 152 } },
        { code: { coding: [{ code: '8462-4' }] }, valueQuantity: { value: 96 } },
      ],
      derivedFrom: [{ reference: `Observation/${systolic.id}` }, { reference: `Observation/${diastolic.id}` }],
    });
    expect((await backend.systemRepo.readResource<Observation>('Observation', systolic.id)).meta?.versionId).toBe(
      systolic.meta?.versionId,
    );
    const second = await applyDefinition(backend.admin, definition, {
      bundles: readBotBundles(definition),
      runBots: false,
    });
    expect(second.updated).toEqual([]);
  });

  it('queue work of before (a queue as its owner) waits in its queue unowned; work taken from a queue names it', async () => {
    const queue = (await backend.systemRepo.searchOne<CareTeam>({
      resourceType: 'CareTeam',
      filters: [{ code: '_tag', operator: 'eq', value: `${SYSTEMS.provisioning}|queue-northwind-intake-review` }],
    })) as CareTeam;
    const patient = backend.patients.alice;
    const old = (owner: string, status: Task['status']) =>
      backend.systemRepo.createResource<Task>({
        resourceType: 'Task',
        meta: {
          project: backend.project.id,
          accounts: [patient.patient.managingOrganization as { reference: string }],
        },
        status,
        intent: 'order',
        code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
        for: { reference: `Patient/${patient.patient.id}` },
        owner: { reference: owner },
        performerType: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }], text: queue.name }],
      });
    const waiting = await old(`CareTeam/${queue.id}`, 'ready');
    const taken = await old('Practitioner/someone', 'in-progress');
    const report = await reprovision(backend);
    expect(report.updated).toContain('migration-queue-work-2');
    const queued = { system: SYSTEMS.queue, code: `CareTeam/${queue.id}`, display: queue.name };
    const nowWaiting = await backend.systemRepo.readResource<Task>('Task', waiting.id);
    expect(nowWaiting.owner).toBeUndefined();
    expect(nowWaiting.performerType?.[0]?.coding).toContainEqual(queued);
    const nowTaken = await backend.systemRepo.readResource<Task>('Task', taken.id);
    expect(nowTaken.owner).toEqual({ reference: 'Practitioner/someone' });
    expect(nowTaken.performerType?.[0]?.coding).toContainEqual(queued);
    const again = await reprovision(backend);
    expect(again.updated).toEqual([]);
  });

  it('an open live segment booked before visit notes gets its practitioner’s note, once; a finished one and an asynchronous one none', async () => {
    const patient = backend.patients.alice;
    const segment = (status: Encounter['status'], practitioner?: string) =>
      backend.systemRepo.createResource<Encounter>({
        resourceType: 'Encounter',
        meta: {
          project: backend.project.id,
          accounts: [patient.patient.managingOrganization as { reference: string }],
        },
        status,
        class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'VR' },
        subject: { reference: `Patient/${patient.patient.id}` },
        type: [{ text: 'Follow-up' }],
        ...(practitioner ? { participant: [{ individual: { reference: practitioner } }] } : {}),
        extension: [{ url: EXTENSIONS.segmentPosition, valueInteger: 1 }],
      });
    const open = await segment('planned', 'Practitioner/ortiz-before');
    const finished = await segment('finished', 'Practitioner/ortiz-before');
    const asynchronous = await segment('planned');
    const report = await reprovision(backend);
    expect(report.updated).toContain('migration-visit-notes-1');
    const notesOf = (encounter: Encounter) =>
      backend.systemRepo.searchResources<ClinicalImpression>({
        resourceType: 'ClinicalImpression',
        filters: [{ code: 'encounter', operator: 'eq', value: `Encounter/${encounter.id}` }],
      });
    expect(await notesOf(open)).toMatchObject([
      {
        status: 'in-progress',
        description: 'Visit note: Follow-up',
        subject: { reference: `Patient/${patient.patient.id}` },
        assessor: { reference: 'Practitioner/ortiz-before' },
        meta: { accounts: [patient.patient.managingOrganization] },
      },
    ]);
    expect(await notesOf(finished)).toEqual([]);
    expect(await notesOf(asynchronous)).toEqual([]);
    const again = await reprovision(backend);
    expect(again.updated).toEqual([]);
  });

  it('a superseded catalog version is retired where it was published, nothing else of it changed', async () => {
    const [url] = 'https://patient-care.example/northwind/protocols/hypertension-treatment'.split('|');
    const current = await backend.systemRepo.searchOne<PlanDefinition>({
      resourceType: 'PlanDefinition',
      filters: [{ code: 'url', operator: 'eq', value: url }],
    });
    // Version 1 as an older provisioning published it, under the key version 2 supersedes.
    const { id: _id, meta, ...rest } = current as PlanDefinition;
    const v1 = await backend.systemRepo.createResource<PlanDefinition>({
      ...rest,
      meta: {
        project: meta?.project,
        accounts: meta?.accounts,
        tag: [{ system: SYSTEMS.provisioning, code: 'catalog-northwind-plan-hypertension-treatment' }],
      },
      version: '1',
    } as PlanDefinition);
    const definition = demoDefinition();
    const report = await applyDefinition(backend.admin, definition, {
      bundles: readBotBundles(definition),
      runBots: false,
    });
    expect(report.updated).toEqual(['catalog-northwind-plan-hypertension-treatment']);
    const retired = await backend.systemRepo.readResource<PlanDefinition>('PlanDefinition', v1.id);
    expect(retired.status).toBe('retired');
    expect({ ...retired, status: 'active', meta: undefined }).toEqual({ ...v1, meta: undefined });
    const again = await applyDefinition(backend.admin, definition, {
      bundles: readBotBundles(definition),
      runBots: false,
    });
    expect(again.updated).toEqual([]);
  });
});
