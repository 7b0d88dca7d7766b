import type { WithId } from '@medplum/core';
import type {
  AccessPolicy,
  AuditEvent,
  AuditEventAgent,
  Basic,
  Observation,
  Patient,
  Practitioner,
  ProjectMembership,
  ProjectMembershipAccess,
  Reference,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * AuditEvents of REST interactions with `saveAuditEvents` on, as a real Medplum 5.0.10 saves them
 * (packages/server/src/fhir/repo.ts Repository.logEvent; measured, docs/medplum-auditevents.md): for a
 * successful read, history, create, update, patch and delete, never for a search, a vread or a failure,
 * and only as a create the caller's own policy allows.
 */
const REST = { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' };
const RESTFUL = 'http://hl7.org/fhir/restful-interaction';

let backend: TestBackend;
let alice: WithId<Patient>;
let northwind: string;
let adminProfile: Reference;

beforeAll(async () => {
  backend = await startTestBackend({ saveAuditEvents: true });
  alice = backend.patients.alice.patient;
  northwind = alice.meta?.accounts?.[0]?.reference as string;
  adminProfile = { reference: `ClientApplication/${backend.adminClient.id}` };
});
afterAll(() => backend?.close());

async function eventsAbout(reference: string): Promise<AuditEvent[]> {
  return backend.systemRepo.searchResources<AuditEvent>({
    resourceType: 'AuditEvent',
    filters: [{ code: 'entity', operator: 'eq', value: reference }],
    count: 1000,
  });
}

/**
 * Waits until every AuditEvent of what came before is written: the saves are not awaited (as on Medplum)
 * but are written in order, so once an admin's read after them is stored, so is anything they stored.
 */
async function settled(): Promise<void> {
  const marker = await backend.systemRepo.createResource<Basic>({
    resourceType: 'Basic',
    meta: { project: backend.project.id },
    code: { text: 'audit marker' },
  });
  await backend.admin.readResource('Basic', marker.id);
  await vi.waitFor(async () => expect(await eventsAbout(`Basic/${marker.id}`)).toHaveLength(1));
}

const REST_TYPE = { code: 'type', operator: 'eq', value: `${REST.system}|${REST.code}` } as const;

/** Every REST AuditEvent in a store, by its type (how the off case looks for any). */
function restEvents(store: TestBackend): Promise<AuditEvent[]> {
  return store.systemRepo.searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [REST_TYPE] });
}

async function restEventCount(): Promise<number> {
  const bundle = await backend.systemRepo.search<AuditEvent>({
    resourceType: 'AuditEvent',
    filters: [REST_TYPE],
    total: 'accurate',
    count: 0,
  });
  return bundle.total as number;
}

const subtypes = (events: AuditEvent[]): string[] => events.map((e) => e.subtype?.[0]?.code as string).sort();
const compartments = (event: AuditEvent): string[] => (event.meta?.compartment ?? []).map((c) => c.reference ?? '');

async function aliceObservation(): Promise<WithId<Observation>> {
  return backend.admin.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'audited' },
    subject: { reference: `Patient/${alice.id}` },
  });
}

/**
 * A copy of a project policy without its AuditEvent entries: whether the project's own policies grant
 * AuditEvent create is provisioning's choice, so the members here say exactly what they may do.
 */
async function withoutAuditEvents(reference: Reference<AccessPolicy>): Promise<Reference<AccessPolicy>> {
  const { id: _id, meta: _meta, ...policy } = await backend.systemRepo.readReference(reference);
  const copy = await backend.systemRepo.createResource<AccessPolicy>({
    ...policy,
    meta: { project: backend.project.id },
    resource: (policy.resource ?? []).filter((entry) => entry.resourceType !== 'AuditEvent'),
  });
  return { reference: `AccessPolicy/${copy.id}` };
}

/**
 * A member with the policies and parameters of `template`'s membership (a demo clinician's, a demo
 * patient's), none granting anything on AuditEvent, then `extra` policies.
 */
async function memberLike(
  template: ProjectMembership,
  profile: ProjectMembership['profile'],
  extra: AccessPolicy[] = [],
): Promise<{ profile: Reference; token: string }> {
  const access: ProjectMembershipAccess[] = [];
  if (template.accessPolicy) {
    access.push({ policy: await withoutAuditEvents(template.accessPolicy) });
  }
  for (const entry of template.access ?? []) {
    access.push({ ...entry, policy: await withoutAuditEvents(entry.policy) });
  }
  for (const policy of extra) {
    const stored = await backend.systemRepo.createResource<AccessPolicy>({
      ...policy,
      meta: { project: backend.project.id },
    });
    access.push({ policy: { reference: `AccessPolicy/${stored.id}` } });
  }
  const membership = await backend.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: backend.project.id },
    project: { reference: `Project/${backend.project.id}` },
    user: { reference: `User/audit-${crypto.randomUUID()}` },
    profile,
    access,
  });
  return { profile, token: (await backend.login(membership)).token };
}

async function northwindPractitioner(name: string): Promise<Reference<Practitioner>> {
  const practitioner = await backend.systemRepo.createResource<Practitioner>({
    resourceType: 'Practitioner',
    meta: { project: backend.project.id, accounts: [{ reference: northwind }] },
    name: [{ given: [name], family: 'Tester' }],
  });
  return { reference: `Practitioner/${practitioner.id}`, display: `${name} Tester` };
}

/** A practitioner of Northwind with the demo clinician's access (no AuditEvent create), then `extra`. */
async function northwindClinician(
  name: string,
  extra: AccessPolicy[] = [],
): Promise<{ profile: Reference; token: string }> {
  return memberLike(backend.clinicians.northwind.membership, await northwindPractitioner(name), extra);
}

const AUDIT_CREATE_AS_HERSELF: AccessPolicy = {
  resourceType: 'AccessPolicy',
  name: 'AuditEvent create, as herself',
  resource: [
    {
      resourceType: 'AuditEvent',
      interaction: ['create'],
      writeConstraint: [{ language: 'text/fhirpath', expression: "%after.agent.all(who.reference = '%profile')" }],
    },
  ],
};

/** A call over the embedded Medplum's API, as a member's app makes it (not in extended mode). */
function fhir(
  token: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return backend.fetch(`${backend.baseUrl}fhir/R4/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe('an admin’s interactions, saveAuditEvents on', () => {
  it('a read is saved with Medplum’s shape, in the compartment of the Patient read', async () => {
    const started = new Date().toISOString();
    await backend.admin.readResource('Patient', alice.id);
    await settled();
    const [event] = (await eventsAbout(`Patient/${alice.id}`)).filter(
      (e) => (e.recorded ?? '') >= started && e.subtype?.[0]?.code === 'read',
    );
    expect(event).toMatchObject({
      type: REST,
      subtype: [{ system: RESTFUL, code: 'read' }],
      action: 'R',
      outcome: '0',
      source: { observer: { identifier: { value: backend.baseUrl } } },
      agent: [{ who: adminProfile, requestor: true }],
      entity: [{ what: { reference: `Patient/${alice.id}`, display: expect.stringContaining('Alice') } }],
      meta: { author: adminProfile, project: backend.project.id },
    });
    expect(Date.parse(event.recorded ?? '')).toBeGreaterThan(Date.now() - 60_000);
    // MedplumClient asks for extended mode, where a project admin's own accounts (none here) are kept as
    // sent (packages/server/src/fhir/repo.ts getAccounts, canWriteAccount): none derived.
    expect(event.meta?.accounts).toBeUndefined();
    expect(compartments(event).sort()).toEqual([`Patient/${alice.id}`, `Project/${backend.project.id}`].sort());
    expect(await restEventCount()).toBeGreaterThan(0);
  });

  it('without extended mode, an event about a Patient is filed in her accounts', async () => {
    const started = new Date().toISOString();
    const read = await fhir(backend.admin.getAccessToken() as string, 'GET', `Patient/${alice.id}`);
    expect(read.status).toBe(200);
    await settled();
    const [event] = (await eventsAbout(`Patient/${alice.id}`)).filter((e) => (e.recorded ?? '') >= started);
    expect(event.meta?.accounts).toEqual([{ reference: northwind }]);
    expect(compartments(event).sort()).toEqual(
      [`Patient/${alice.id}`, northwind, `Project/${backend.project.id}`].sort(),
    );
  });

  it('create, read, history, update, patch and delete each save one event of their own', async () => {
    const observation = await aliceObservation();
    await backend.admin.readResource('Observation', observation.id);
    await backend.admin.readHistory('Observation', observation.id);
    await backend.admin.updateResource<Observation>({ ...observation, status: 'amended' });
    await backend.admin.patchResource('Observation', observation.id, [
      { op: 'replace', path: '/status', value: 'corrected' },
    ]);
    await backend.admin.deleteResource('Observation', observation.id);
    await settled();
    const events = await eventsAbout(`Observation/${observation.id}`);
    expect(subtypes(events)).toEqual(['create', 'delete', 'history', 'patch', 'read', 'update']);
    const actions = Object.fromEntries(events.map((e) => [e.subtype?.[0]?.code, e.action]));
    expect(actions).toEqual({ create: 'C', read: 'R', history: 'R', update: 'U', patch: 'U', delete: 'D' });
    for (const event of events) {
      expect(event).toMatchObject({ type: REST, outcome: '0', agent: [{ who: adminProfile, requestor: true }] });
      // Only an event about the Patient herself is in her compartment.
      expect(compartments(event)).not.toContain(`Patient/${alice.id}`);
    }
  });

  it('a search, a vread and the history of a deleted resource save nothing; an _include saves a read of what it includes', async () => {
    const observation = await aliceObservation();
    await backend.subscriptions.idle();
    await settled();
    const before = await restEventCount();
    const aliceBefore = (await eventsAbout(`Patient/${alice.id}`)).length;
    await backend.admin.searchResources('Observation', { _id: observation.id });
    await backend.admin.readVersion('Observation', observation.id, observation.meta?.versionId as string);
    await backend.admin.search('Observation', { _id: observation.id, _include: 'Observation:subject' });
    await settled();
    expect(subtypes(await eventsAbout(`Observation/${observation.id}`))).toEqual(['create']);
    const included = (await eventsAbout(`Patient/${alice.id}`)).slice(aliceBefore);
    expect(subtypes(included)).toEqual(['read']);
    // Nothing else at all: the included read and settled()'s own read.
    expect((await restEventCount()) - before).toBe(2);

    await backend.admin.deleteResource('Observation', observation.id);
    await backend.admin.readHistory('Observation', observation.id);
    await settled();
    expect(subtypes(await eventsAbout(`Observation/${observation.id}`))).toEqual(['create', 'delete']);
  });

  it('a failed update or a failed read saves nothing', async () => {
    const observation = await aliceObservation();
    const stale = await fhir(
      backend.admin.getAccessToken() as string,
      'PUT',
      `Observation/${observation.id}`,
      {
        ...observation,
        status: 'amended',
      },
      { 'if-match': 'W/"stale"' },
    );
    expect(stale.status).toBe(412);
    // Refused by her writeConstraint once the update is made (as on the real server): she may create AuditEvents.
    const refusing: AccessPolicy = {
      resourceType: 'AccessPolicy',
      resource: [
        {
          resourceType: 'Observation',
          interaction: ['read', 'update'],
          writeConstraint: [{ language: 'text/fhirpath', expression: "%after.status = 'final'" }],
        },
      ],
    };
    const member = await memberLike(
      { resourceType: 'ProjectMembership' } as ProjectMembership,
      await northwindPractitioner('Refused'),
      [refusing, AUDIT_CREATE_AS_HERSELF],
    );
    const refused = await fhir(member.token, 'PUT', `Observation/${observation.id}`, {
      ...observation,
      status: 'amended',
    });
    expect(refused.status).toBe(403);
    // The same member's read is saved: only the failure is not.
    expect((await fhir(member.token, 'GET', `Observation/${observation.id}`)).status).toBe(200);
    await expect(backend.admin.readResource('Observation', crypto.randomUUID())).rejects.toThrow();
    await settled();
    expect(subtypes(await eventsAbout(`Observation/${observation.id}`))).toEqual(['create', 'read']);
  });

  it('reading an AuditEvent saves nothing', async () => {
    await backend.admin.readResource('Patient', alice.id);
    await settled();
    const [event] = await eventsAbout(`Patient/${alice.id}`);
    await backend.admin.readResource('AuditEvent', event.id as string);
    await settled();
    expect(await eventsAbout(`AuditEvent/${event.id}`)).toEqual([]);
  });
});

describe('members, saveAuditEvents on: the save is a create by the caller', () => {
  it('saves nothing for a clinician or a patient whose policy has no AuditEvent create', async () => {
    const observation = await aliceObservation();
    const clinician = await northwindClinician('Plain');
    const patient = await memberLike(backend.patients.alice.membership, { reference: `Patient/${alice.id}` });
    await settled();
    const aliceBefore = (await eventsAbout(`Patient/${alice.id}`)).length;
    for (const { token } of [clinician, patient]) {
      expect((await fhir(token, 'GET', `Patient/${alice.id}`)).status).toBe(200);
      expect((await fhir(token, 'GET', `Observation/${observation.id}`)).status).toBe(200);
      expect((await fhir(token, 'GET', `Patient/${alice.id}/_history`)).status).toBe(200);
    }
    await settled();
    expect((await eventsAbout(`Patient/${alice.id}`)).length).toBe(aliceBefore);
    expect(subtypes(await eventsAbout(`Observation/${observation.id}`))).toEqual(['create']);
  });

  it('saves the reads of a clinician whose policy allows AuditEvent create as herself, stamped as hers', async () => {
    const audra = await northwindClinician('Audra', [AUDIT_CREATE_AS_HERSELF]);
    const observation = await aliceObservation();
    expect((await fhir(audra.token, 'GET', `Patient/${alice.id}`)).status).toBe(200);
    expect((await fhir(audra.token, 'GET', `Observation/${observation.id}`)).status).toBe(200);
    expect((await fhir(audra.token, 'GET', `Observation?_id=${observation.id}`)).status).toBe(200);
    await settled();

    const [patientRead, ...more] = (await eventsAbout(`Patient/${alice.id}`)).filter(
      (e) => e.agent?.[0]?.who?.reference === audra.profile.reference,
    );
    expect(more).toEqual([]);
    expect(patientRead).toMatchObject({
      subtype: [{ code: 'read' }],
      agent: [{ who: audra.profile, requestor: true }],
      meta: { author: audra.profile, project: backend.project.id, accounts: [{ reference: northwind }] },
    });
    expect(compartments(patientRead)).toContain(`Patient/${alice.id}`);

    const observationEvents = (await eventsAbout(`Observation/${observation.id}`)).filter(
      (e) => e.agent?.[0]?.who?.reference === audra.profile.reference,
    );
    expect(subtypes(observationEvents)).toEqual(['read']);
    // Her tenant, from her policy's compartment; not in the Patient's compartment.
    expect(observationEvents[0].meta?.accounts).toEqual([{ reference: northwind }]);
    expect(compartments(observationEvents[0]).sort()).toEqual([northwind, `Project/${backend.project.id}`].sort());
  });

  it('a forged AuditEvent naming another agent is refused by her writeConstraint, one naming herself is not', async () => {
    const forger = await northwindClinician('Forger', [AUDIT_CREATE_AS_HERSELF]);
    const target = await backend.systemRepo.createResource<Basic>({
      resourceType: 'Basic',
      meta: { project: backend.project.id },
      code: { text: 'forged' },
    });
    const forged = (agent: AuditEvent['agent']): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: REST,
      subtype: [{ system: RESTFUL, code: 'read' }],
      action: 'R',
      recorded: new Date().toISOString(),
      outcome: '0',
      source: { observer: { identifier: { value: backend.baseUrl } } },
      agent,
      entity: [{ what: { reference: `Basic/${target.id}` } }],
    });
    const other = { reference: `Practitioner/${backend.clinicians.northwind.practitioner.id}` };
    const herself = forger.profile as AuditEventAgent['who'];
    expect((await fhir(forger.token, 'POST', 'AuditEvent', forged([{ who: other, requestor: true }]))).status).toBe(
      403,
    );
    const both = forged([
      { who: herself, requestor: true },
      { who: other, requestor: false },
    ]);
    expect((await fhir(forger.token, 'POST', 'AuditEvent', both)).status).toBe(403);
    expect((await fhir(forger.token, 'POST', 'AuditEvent', forged([{ who: herself, requestor: true }]))).status).toBe(
      201,
    );
    await settled();
    // Only the one naming herself; her POST of it is itself never audited.
    const stored = await eventsAbout(`Basic/${target.id}`);
    expect(stored.map((e) => [e.agent?.map((a) => a.who?.reference), e.meta?.author?.reference])).toEqual([
      [[forger.profile.reference], forger.profile.reference],
    ]);
  });

  it('an event her writeConstraint does not accept is dropped without a word, and the read still answers', async () => {
    const dropped = await northwindClinician('Dropped', [
      {
        ...AUDIT_CREATE_AS_HERSELF,
        resource: [
          {
            resourceType: 'AuditEvent',
            interaction: ['create'],
            writeConstraint: [{ language: 'text/fhirpath', expression: "%after.outcome = '4'" }],
          },
        ],
      },
    ]);
    const observation = await aliceObservation();
    expect((await fhir(dropped.token, 'GET', `Observation/${observation.id}`)).status).toBe(200);
    await settled();
    expect(subtypes(await eventsAbout(`Observation/${observation.id}`))).toEqual(['create']);
  });
});

describe('saveAuditEvents off (the default)', () => {
  let off: TestBackend;
  beforeAll(async () => {
    off = await startTestBackend();
  });
  afterAll(() => off?.close());

  it('saves no AuditEvent for reads and writes, an admin’s or a member’s', async () => {
    const aliceOff = off.patients.alice.patient;
    const observation = await off.admin.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'not audited' },
      subject: { reference: `Patient/${aliceOff.id}` },
    });
    await off.admin.readResource('Patient', aliceOff.id);
    await off.admin.readHistory('Observation', observation.id);
    await off.admin.updateResource<Observation>({ ...observation, status: 'amended' });
    await off.patients.alice.medplum.readResource('Patient', aliceOff.id);
    // Saves are not awaited, but a turn of the event loop writes them (store/audit.ts): 50 ms is ample.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await restEvents(off)).toEqual([]);
  });
});
