import { randomUUID } from 'node:crypto';
import type { AuditEvent, Organization, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCESS_LOG_READS_PER_MINUTE, ACCESS_LOG_SCOPE, type AccessLog } from '../../contracts/access-log';
import { SYSTEMS } from '../../contracts/systems';
import { createPatientCareClient } from '../../src/sdk';
import { registerPatient, tenantApp } from '../support/attack-registration';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';

/**
 * Her access log (GET /v1/patient/access-log), from the AuditEvents Medplum keeps with `saveAuditEvents`:
 * who opened or changed her records, clinicians by name, the platform by purpose, herself; nothing of
 * anyone else's, nothing a member wrote in someone else's name.
 */
type Log = AccessLog;
type Entry = AccessLog['entries'][number];

let gw: TestGateway;
let alice: DemoActor;
let bob: DemoActor;
let aliceTask: Task & { id: string };

async function logOf(patient: DemoActor, query = ''): Promise<Log> {
  const res = await gw.call('GET', `/v1/patient/access-log${query}`, { token: patient.token });
  expect(res.status, res.text).toBe(200);
  return res.body as Log;
}

/** Every entry of hers, page by page of `limit`. */
async function wholeLog(patient: DemoActor, limit: number): Promise<Entry[]> {
  const entries: Entry[] = [];
  let before: string | undefined;
  for (let page = 0; page < 100; page++) {
    const got = await logOf(patient, `?limit=${limit}${before ? `&before=${before}` : ''}`);
    entries.push(...got.entries);
    if (!got.next) {
      return entries;
    }
    before = got.next;
  }
  throw new Error('the log did not end');
}

/** How many times her entries say something was done. */
const total = (entries: Entry[]) => entries.reduce((n, e) => n + e.count, 0);

/**
 * Her whole log once the platform's work for her has settled: a bot's write after a step can land late, so
 * read until two reads 100 ms apart agree (at most 10 more reads: her budget is 30 a minute).
 */
async function settledLog(patient: DemoActor): Promise<Entry[]> {
  let whole = (await logOf(patient, '?limit=100')).entries;
  for (let i = 0; i < 10; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const again = (await logOf(patient, '?limit=100')).entries;
    if (total(again) === total(whole)) {
      return again;
    }
    whole = again;
  }
  return whole;
}

const NORTHWIND_CLINICIAN = 'Dr. Demo Clinician of Northwind Health';

beforeAll(async () => {
  gw = await startTestGateway({}, { saveAuditEvents: true });
  alice = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  bob = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  await startAssessment(gw, alice, 'assessments/weight-intake');
  await gw.backend.subscriptions.idle();
  aliceTask = (await gw.backend.admin.searchOne('Task', { patient: `Patient/${alice.patient.id}` })) as Task & {
    id: string;
  };
  // Her care team's clinician opens her chart and one of her tasks (reads by id, as the Provider app does).
  const clinician = gw.backend.clinicians.northwind.medplum;
  await clinician.readResource('Patient', alice.patient.id);
  await clinician.readResource('Task', aliceTask.id);
  // She reads her own profile through the record plane.
  expect((await gw.call('GET', '/v1/patient/profile', { token: alice.token })).status).toBe(200);
  // Medplum saves an AuditEvent after it answers (not awaited): wait until the clinician's last one is kept.
  const clinicianRef = `Practitioner/${gw.backend.clinicians.northwind.practitioner.id}`;
  for (let i = 0; i < 100; i++) {
    const kept = await gw.backend.admin.searchResources('AuditEvent', {
      entity: `Task/${aliceTask.id}`,
      agent: clinicianRef,
    });
    if (kept.length > 0) {
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
});
afterAll(() => gw?.close());

describe('her access log', () => {
  it('names her care team’s clinician, the platform by purpose, and herself', async () => {
    const log = await logOf(alice, '?limit=100');
    expect(log.scope).toBe(ACCESS_LOG_SCOPE);
    const clinician = log.entries.filter((e) => e.by.kind === 'clinician');
    expect(clinician.map((e) => `${e.by.name} ${e.action} ${e.resourceType}`)).toEqual(
      expect.arrayContaining([`${NORTHWIND_CLINICIAN} viewed Patient`, `${NORTHWIND_CLINICIAN} viewed Task`]),
    );
    // The assessment's bots created her records: the platform, by the workflow's purpose.
    const platform = log.entries.filter((e) => e.by.kind === 'platform');
    expect(platform.some((e) => e.action === 'created' && e.resourceType === 'Task' && e.by.purpose)).toBe(true);
    expect(log.entries.some((e) => e.by.kind === 'you' && e.action === 'viewed' && e.resourceType === 'Patient')).toBe(
      true,
    );
    // Newest first, never a record's content.
    const at = log.entries.map((e) => Date.parse(e.at));
    expect(at).toEqual([...at].sort((a, b) => b - a));
    expect(JSON.stringify(log)).not.toContain(aliceTask.id);
  });

  it('keeps her own reads when she signed in through her tenant’s app: Medplum 5.1 names the app as a second agent (packages/server/src/util/auditevent.ts createAuditEvent), which her policy lets her write', async () => {
    const northwind = (await gw.backend.admin.searchOne('Organization', {
      identifier: `${SYSTEMS.tenant}|northwind`,
    })) as Organization;
    const app = tenantApp(gw.backend, `Organization/${northwind.id}`);
    const { token, patientId } = await registerPatient(gw.backend, `app-${randomUUID()}@example.test`, app);
    expect((await gw.call('POST', '/v1/patient/home', { token })).status).toBe(200);
    expect((await gw.call('GET', '/v1/patient/profile', { token })).status).toBe(200);
    const her = `Patient/${patientId}`;
    let kept: AuditEvent[] = [];
    for (let i = 0; i < 50 && kept.length === 0; i++) {
      kept = (await gw.backend.admin.searchResources('AuditEvent', { entity: her })).filter(
        (e) => e.agent?.[0]?.who?.reference === her,
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(kept.length).toBeGreaterThan(0);
    expect(kept[0].agent).toEqual([
      expect.objectContaining({ who: expect.objectContaining({ reference: her }), requestor: true }),
      expect.objectContaining({
        who: expect.objectContaining({ reference: `ClientApplication/${app}` }),
        requestor: false,
        type: { coding: [expect.objectContaining({ code: '110150' })] },
      }),
    ]);
    expect(kept[0].meta?.author?.reference).toBe(her);
    const log = await logOf({ token } as DemoActor, '?limit=100');
    expect(log.entries.some((e) => e.by.kind === 'you' && e.resourceType === 'Patient')).toBe(true);
  });

  it('pages back in time with `before`, each entry once', async () => {
    // Her log as it stands once the platform's work for her has settled, then paged two entries at a time.
    const whole = await settledLog(alice);
    const paged = await wholeLog(alice, 2);
    expect(total(whole)).toBeGreaterThan(0);
    expect(total(paged)).toBe(total(whole));
    expect(paged.map((e) => e.at)).toEqual([...paged.map((e) => e.at)].sort().reverse());
  });

  it('a group of entries at the end of a page (one person doing the same at different instants) is not read again on the next page', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    // Something of hers before (the platform's writes as her home is set up), then three reads of her
    // profile, milliseconds apart: one entry of three (unless a minute ends between).
    await startAssessment(gw, patient, 'assessments/weight-intake');
    for (let i = 0; i < 3; i++) {
      expect((await gw.call('GET', '/v1/patient/profile', { token: patient.token })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const whole = await settledLog(patient);
    expect(whole[0]).toMatchObject({ by: { kind: 'you' }, action: 'viewed', resourceType: 'Patient' });
    // One entry a page: the first page is that group, the next begins before its oldest read.
    const first = await logOf(patient, '?limit=1');
    expect(first.entries).toEqual([whole[0]]);
    expect(Date.parse(first.next as string)).toBeLessThan(Date.parse(whole[0]?.at as string));
    const paged = await wholeLog(patient, 1);
    expect(total(paged)).toBe(total(whole));
    expect(paged).toEqual(whole);
  });

  it('shows nothing of another patient’s: bob’s log has none of what was done to hers', async () => {
    const log = await wholeLog(bob, 100);
    expect(log.filter((e) => e.by.kind === 'clinician')).toEqual([]);
    expect(log.filter((e) => e.by.kind === 'platform' && e.resourceType === 'Task')).toEqual([]);
  });

  it('leaves out what anyone wrote in someone else’s name, and a patient’s entries about her', async () => {
    const before = await wholeLog(alice, 100);
    const forged = (who: string, what: string): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
      subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
      action: 'R',
      recorded: new Date().toISOString(),
      outcome: '0',
      agent: [{ who: { reference: who }, requestor: true }],
      source: { observer: { reference: who } },
      entity: [{ what: { reference: what } }],
    });
    const northwind = gw.backend.clinicians.northwind;
    const southridge = gw.backend.clinicians.southridge;
    // In another's name: refused on Medplum itself (the clinician's own, and a patient's).
    await expect(
      northwind.medplum.createResource(
        forged(`Practitioner/${southridge.practitioner.id}`, `Patient/${alice.patient.id}`),
      ),
    ).rejects.toThrow(/Forbidden/);
    await expect(
      bob.medplum.createResource(forged(`Patient/${alice.patient.id}`, `Patient/${alice.patient.id}`)),
    ).rejects.toThrow(/Forbidden/);
    // In her own name about a patient of another tenant: refused (filed outside her tenant).
    await expect(
      southridge.medplum.createResource(
        forged(`Practitioner/${southridge.practitioner.id}`, `Patient/${alice.patient.id}`),
      ),
    ).rejects.toThrow(/Forbidden/);
    // Bob in his own name about her: refused too (a patient's entries name no other patient; had it been
    // kept, the log would leave it out: only her own entries are "you").
    await expect(
      bob.medplum.createResource(forged(`Patient/${bob.patient.id}`, `Patient/${alice.patient.id}`)),
    ).rejects.toThrow(/Forbidden/);
    const after = await wholeLog(alice, 100);
    expect(after.filter((e) => e.by.kind === 'you').length).toBe(before.filter((e) => e.by.kind === 'you').length);
    expect(after.filter((e) => e.by.kind === 'clinician')).toEqual(before.filter((e) => e.by.kind === 'clinician'));
  });

  it('trusts only what Medplum stored: an entry dated ahead is refused, one dated back is left out and cannot bury hers, another tenant’s clinician’s entry about a record of hers is not in it', async () => {
    const about = `Task/${aliceTask.id}`;
    const entry = (who: string, recorded: string): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
      subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
      action: 'R',
      recorded,
      outcome: '0',
      agent: [{ who: { reference: who }, requestor: true }],
      source: { observer: { reference: who } },
      entity: [{ what: { reference: about } }],
    });
    const northwind = gw.backend.clinicians.northwind;
    const southridge = gw.backend.clinicians.southridge;
    const me = `Patient/${alice.patient.id}`;
    const firstPage = async () => (await logOf(alice, '?limit=10')).entries;
    const clinicianSeen = (entries: Entry[]) =>
      entries.some((e) => e.by.kind === 'clinician' && e.by.name === NORTHWIND_CLINICIAN);
    // Her clinician is on her first page, and stays there whatever is written next.
    expect(clinicianSeen(await logOf(alice, '?limit=100').then((l) => l.entries))).toBe(true);
    const before = await wholeLog(alice, 100);
    // Dated ahead, by her or by her clinician: refused on Medplum itself.
    await expect(alice.medplum.createResource(entry(me, '2150-01-01T00:00:00Z'))).rejects.toThrow(/Forbidden/);
    await expect(
      northwind.medplum.createResource(entry(`Practitioner/${northwind.practitioner.id}`, '2199-01-01T00:00:00Z')),
    ).rejects.toThrow(/Forbidden/);
    // Dated back, a hundred of them: stored (a member writes her own trail), left out of her log, and her
    // log's order is Medplum's, so they bury nothing.
    for (let i = 0; i < 100; i++) {
      await alice.medplum.createResource(entry(me, '2020-01-01T00:00:00Z'));
    }
    // Another tenant's clinician, in his own name, about a record of hers (filed in his tenant): accepted
    // by Medplum, and none of her log.
    await southridge.medplum.createResource(
      entry(`Practitioner/${southridge.practitioner.id}`, new Date().toISOString()),
    );
    const after = await wholeLog(alice, 100);
    expect(after.some((e) => e.by.kind === 'clinician' && e.by.name?.includes('Southridge'))).toBe(false);
    expect(after.some((e) => e.at.startsWith('2020') || e.at.startsWith('2150'))).toBe(false);
    expect(after.filter((e) => e.by.kind === 'clinician')).toEqual(before.filter((e) => e.by.kind === 'clinician'));
    expect(after.reduce((n, e) => n + e.count, 0)).toBeGreaterThanOrEqual(before.reduce((n, e) => n + e.count, 0));
    expect((await firstPage()).length).toBeGreaterThan(0);
  });

  it('is hers only: patients cannot read AuditEvents on Medplum, clinicians cannot call it', async () => {
    const found = await alice.medplum
      .searchResources('AuditEvent', { entity: `Patient/${alice.patient.id}` })
      .catch((err: Error) => err);
    expect(found instanceof Error ? found.message : `found ${found.length}`).toMatch(/Forbidden|found 0/);
    const clinician = await gw.call('GET', '/v1/patient/access-log', {
      token: gw.backend.clinicians.northwind.token,
    });
    expect(clinician.status).toBe(403);
    // Nor can a patient run its bot for someone else: it reads the log of whoever her token names.
    const direct = (await alice.medplum.executeBot(
      { system: 'https://patient-care.example/bots', value: 'access-log' },
      { limit: 100, patient: `Patient/${bob.patient.id}` },
      'application/json',
    )) as { ok: boolean; error?: { status: number } };
    expect(direct.ok).toBe(false);
    expect(direct.error?.status).toBe(400);
  });

  it('refuses a bad page with 400 and the envelope', async () => {
    for (const query of [
      '?limit=0',
      '?limit=101',
      '?before=yesterday',
      '?before=2026-13-40T00:00:00Z',
      '?before=2026-02-30T00:00:00Z',
      '?before=0000-01-01T00:00:00Z',
      '?before=2200-01-01T00:00:00Z',
      '?who=bob',
    ]) {
      const res = await gw.call('GET', `/v1/patient/access-log${query}`, { token: alice.token });
      expect(res.status, query).toBe(400);
      expect((res.body as { error: { code: string } }).error.code, query).toBe('invalid_request');
    }
  });

  it('is read at most 30 times a minute by one patient (then 429 with Retry-After, nothing read), counted from the record of each bot run as Medplum writes it (packages/server/src/util/auditevent.ts createBotAuditEvent: the requester first); another patient is served meanwhile', async () => {
    const flooder = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    for (let i = 0; i < ACCESS_LOG_READS_PER_MINUTE; i++) {
      expect((await gw.call('GET', '/v1/patient/access-log?limit=1', { token: flooder.token })).status).toBe(200);
    }
    const refused = await gw.call('GET', '/v1/patient/access-log?limit=1', { token: flooder.token });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({
      error: { code: 'rate_limited', details: { limit: ACCESS_LOG_READS_PER_MINUTE } },
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect((await gw.call('GET', '/v1/patient/access-log?limit=1', { token: other.token })).status).toBe(200);
  });

  it('the SDK reads it', async () => {
    const api = createPatientCareClient({
      baseUrl: 'http://gateway.test',
      accessToken: alice.token,
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => gw.app.fetch(new Request(input, init))) as typeof fetch,
    });
    const log = await api.patient.accessLog({ limit: '5' });
    expect(log.entries.length).toBeGreaterThan(0);
    expect(log.scope).toBe(ACCESS_LOG_SCOPE);
  });
});

describe('without saveAuditEvents', () => {
  it('the log is empty, and says what it covers', async () => {
    const plain = await startTestGateway();
    try {
      const carol = await freshPatient(plain.backend, { tenant: 'southridge', state: 'CA' });
      await plain.backend.clinicians.southridge.medplum.readResource('Patient', carol.patient.id);
      const res = await plain.call('GET', '/v1/patient/access-log', { token: carol.token });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ entries: [], scope: ACCESS_LOG_SCOPE });
    } finally {
      await plain.close();
    }
  });
});
