import type { CarePlan, EpisodeOfCare, MedicationRequest, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot, withdrawAnAgreement } from '../support/journey';
import { freshPatient } from '../support/patients';
import { answer, offered, workAbout } from '../support/spine';

/**
 * Enrollment in a program (issue 16 item 1, JOURNEY E): `POST /v1/enrollments` (draft), `/activate`
 * (active, tasks issued), `DELETE` (revoked, open tasks cancelled); every wrong-state call refused with
 * nothing changed; a clinical protocol is requested, never enrolled in.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

interface Enrollment {
  carePlan: string;
  episodeOfCare: string;
  protocol: string;
  status: string;
  tasks?: { task: string; kind: string; status: string }[];
  cancelledTasks?: string[];
}

const repo = () => gw.backend.systemRepo;
const store = () => storeSnapshot(gw.backend);

/** A new northwind patient in California and the catalog's offering whose plan path contains `path`. */
async function patientAnd(path: string): Promise<{ patient: DemoActor; service: string }> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const { protocols } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string; protocol?: string; assessment?: string }[];
  };
  const offering = protocols.find((p) => (p.protocol ?? p.assessment ?? '').includes(path));
  expect(offering, path).toBeDefined();
  return { patient, service: offering?.healthcareService as string };
}

/** What her app does first: accept what the requirements check asks for this offering. */
async function acceptRequirements(patient: DemoActor, service: string): Promise<void> {
  const query = `healthcareService=${encodeURIComponent(service)}`;
  const { unmet } = (await gw.call('GET', `/v1/agreements/requirements?${query}`, { token: patient.token })).body as {
    unmet: unknown[];
  };
  if (unmet.length > 0) {
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements: unmet },
    });
    expect(accepted.status).toBe(200);
  }
}

const enroll = (patient: DemoActor, service: string) =>
  gw.call('POST', '/v1/enrollments', { token: patient.token, body: { healthcareService: service } });
const activate = (patient: DemoActor, carePlan: string) =>
  gw.call('POST', `/v1/enrollments/${carePlan.replace('CarePlan/', '')}/activate`, { token: patient.token });
const unenroll = (patient: DemoActor, carePlan: string) =>
  gw.call('DELETE', `/v1/enrollments/${carePlan.replace('CarePlan/', '')}`, { token: patient.token });

const PROGRAM = 'northwind/programs/blood-pressure-monitoring';

describe('enrollment: draft -> active -> revoked', () => {
  it('enrolls (a draft plan pinned to the program, nothing issued), activates (its tasks issued), and unenrolls (revoked, open tasks cancelled)', async () => {
    const { patient, service } = await patientAnd(PROGRAM);
    await acceptRequirements(patient, service);
    const created = await enroll(patient, service);
    expect(created.status, created.text).toBe(201);
    const draft = created.body as Enrollment;
    expect(draft).toMatchObject({
      status: 'draft',
      protocol: `https://patient-care.example/${PROGRAM}|1`,
    });
    const plan = await repo().readReference<CarePlan>({ reference: draft.carePlan });
    expect(plan).toMatchObject({
      status: 'draft',
      intent: 'plan',
      subject: { reference: `Patient/${patient.patient.id}` },
      instantiatesCanonical: [draft.protocol],
    });
    expect(plan.activity?.map((a) => a.detail?.status)).toEqual(Array(4).fill('not-started'));
    expect(plan.activity?.[0]?.detail?.scheduledTiming?.repeat?.periodUnit).toBe('wk');
    expect(plan.meta?.tag).toContainEqual({ system: SYSTEMS.episode, code: draft.episodeOfCare });
    // Idempotent: the same enrollment again, 200.
    const again = await enroll(patient, service);
    expect(again).toMatchObject({ status: 200, body: draft });

    const activated = await activate(patient, draft.carePlan);
    expect(activated.status, activated.text).toBe(200);
    const active = activated.body as Enrollment;
    expect(active.status).toBe('active');
    expect(active.tasks?.map((t) => t.kind)).toEqual([
      'measurement',
      'questionnaire',
      'schedule-visit',
      'schedule-visit',
    ]);
    expect(active.tasks?.slice(2).map((t) => (t as { visitType?: string }).visitType)).toEqual([
      'video-visit',
      'async-review',
    ]);
    // Each titled as she is told it (`code.text`): what Medplum's Provider app lists a task by (issue 48).
    for (const view of active.tasks ?? []) {
      const task = await gw.backend.systemRepo.readResource<Task>('Task', view.task.replace('Task/', ''));
      expect(task.code?.text, view.kind).toBeTruthy();
      expect(task.code?.text).toBe(task.description);
    }
    // Whom she books with (issue 28 item 2): her tenant's visit team, named by each visit task and readable
    // by her; a clinicians' work queue is not.
    const teams = new Set(active.tasks?.slice(2).map((t) => (t as { careTeam?: string }).careTeam));
    expect(teams.size).toBe(1);
    const [team] = [...teams] as string[];
    expect(team).toMatch(/^CareTeam\//);
    const read = await gw.call('GET', `/v1/fhir/${team}`, { token: patient.token });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ category: [{ coding: [{ code: 'visits' }] }] });
    const queues = await gw.backend.admin.searchResources('CareTeam', {
      category: `${SYSTEMS.careQueue}|intake-review`,
    });
    expect(queues.length).toBeGreaterThan(0);
    for (const queue of queues) {
      expect((await gw.call('GET', `/v1/fhir/CareTeam/${queue.id}`, { token: patient.token })).status).toBe(404);
    }
    const other = gw.backend.patients.carol;
    expect((await gw.call('GET', `/v1/fhir/${team}`, { token: other.token })).status).toBe(404);
    for (const view of active.tasks ?? []) {
      const task = await repo().readReference<Task>({ reference: view.task });
      expect(task).toMatchObject({ status: 'ready', basedOn: [{ reference: draft.carePlan }] });
      expect(task.meta?.tag).toContainEqual({ system: SYSTEMS.episode, code: draft.episodeOfCare });
    }
    expect((await activate(patient, draft.carePlan)).body).toEqual(active);
    expect((await enroll(patient, service)).body).toMatchObject({ carePlan: draft.carePlan, status: 'active' });

    // One task done, then she unenrolls: the open one is cancelled, the done one stays.
    const [measurement] = active.tasks ?? [];
    const done = await gw.call('POST', `/v1/${measurement.task.replace('Task/', 'tasks/')}/complete`, {
      token: patient.token,
      body: {
        measurements: [
          { code: 'http://loinc.org|8480-6', value: 128, unit: 'mm[Hg]' },
          { code: 'http://loinc.org|8462-4', value: 82, unit: 'mm[Hg]' },
        ],
      },
    });
    expect(done.status, done.text).toBe(200);
    const revoked = await unenroll(patient, draft.carePlan);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({
      status: 'revoked',
      cancelledTasks: active.tasks?.slice(1).map((t) => t.task),
    });
    expect((await repo().readReference<CarePlan>({ reference: draft.carePlan })).status).toBe('revoked');
    expect((await repo().readReference<Task>({ reference: measurement.task })).status).toBe('completed');
    expect((await repo().readReference<Task>({ reference: active.tasks?.[1]?.task as string })).status).toBe(
      'cancelled',
    );
    expect((await repo().readReference<EpisodeOfCare>({ reference: draft.episodeOfCare })).status).toBe('finished');

    // Wrong states: activating a revoked plan is 409 with its state, nothing changed; unenrolling again is 200.
    const before = store();
    const refused = await activate(patient, draft.carePlan);
    expect(refused).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { state: 'revoked' } } },
    });
    expect((await unenroll(patient, draft.carePlan)).body).toMatchObject({ status: 'revoked' });
    expect(store()).toEqual(before);

    // Enrolling again after a revoked enrollment: a new draft in the same journey.
    const renewed = await enroll(patient, service);
    expect(renewed.status).toBe(201);
    expect(renewed.body).toMatchObject({ status: 'draft', episodeOfCare: draft.episodeOfCare });
    expect((renewed.body as Enrollment).carePlan).not.toBe(draft.carePlan);
  });

  it('unenrolling a draft revokes it with nothing to cancel', async () => {
    const { patient, service } = await patientAnd(PROGRAM);
    await acceptRequirements(patient, service);
    const { carePlan } = (await enroll(patient, service)).body as Enrollment;
    expect((await unenroll(patient, carePlan)).body).toMatchObject({ status: 'revoked', cancelledTasks: [] });
  });

  it('twenty concurrent enrollments make one plan; twenty concurrent activations issue one set of tasks', async () => {
    const { patient, service } = await patientAnd(PROGRAM);
    await acceptRequirements(patient, service);
    const enrolled = await Promise.all(Array.from({ length: 20 }, () => enroll(patient, service)));
    expect(enrolled.filter((r) => r.status === 201)).toHaveLength(1);
    expect(new Set(enrolled.map((r) => (r.body as Enrollment).carePlan)).size).toBe(1);
    const { carePlan } = enrolled[0].body as Enrollment;
    const activated = await Promise.all(Array.from({ length: 20 }, () => activate(patient, carePlan)));
    expect(activated.map((r) => r.status)).toEqual(Array(20).fill(200));
    const tasks = await repo().searchResources<Task>({
      resourceType: 'Task',
      filters: [{ code: 'based-on', operator: 'eq', value: carePlan }],
    });
    expect(tasks).toHaveLength(4);
  });
});

describe('what cannot be enrolled in or changed', () => {
  it('a clinical protocol is requested, not enrolled in (409 review_required naming POST /v1/requests); an assessment names its start', async () => {
    const { patient, service } = await patientAnd('northwind/protocols/hypertension-treatment');
    const assessment = await patientAnd('northwind/assessments/blood-pressure-check');
    const before = store();
    const refused = await enroll(patient, service);
    expect(refused).toMatchObject({
      status: 409,
      body: { error: { code: 'review_required', details: { use: 'POST /v1/requests' } } },
    });
    const notProgram = await enroll(assessment.patient, assessment.service);
    expect(notProgram).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { use: 'POST /v1/assessments' } } },
    });
    expect(store()).toEqual(before);
  });

  it('is gated: required agreements unmet -> 409 consent_required for enrolling and activating, nothing written', async () => {
    const { patient, service } = await patientAnd(PROGRAM);
    const before = store();
    const refused = await enroll(patient, service);
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'consent_required' } } });
    expect(store()).toEqual(before);
    await acceptRequirements(patient, service);
    const { carePlan } = (await enroll(patient, service)).body as Enrollment;
    await withdrawAnAgreement(gw, patient);
    const mark = store();
    expect(await activate(patient, carePlan)).toMatchObject({
      status: 409,
      body: { error: { code: 'consent_required' } },
    });
    expect(store()).toEqual(mark);
    // Stopping care is never gated.
    expect((await unenroll(patient, carePlan)).status).toBe(200);
  });

  it('another patient, or one of another tenant, can neither see nor change her enrollment (404, through the gateway and directly)', async () => {
    const { patient, service } = await patientAnd(PROGRAM);
    await acceptRequirements(patient, service);
    const { carePlan } = (await enroll(patient, service)).body as Enrollment;
    const before = store();
    for (const other of [gw.backend.patients.bob, gw.backend.patients.carol]) {
      expect((await activate(other, carePlan)).status).toBe(404);
      expect((await unenroll(other, carePlan)).status).toBe(404);
      const bot = await executeBot(gw.backend, other.token, 'enrollment', {
        value: { operation: 'unenroll', carePlan: carePlan.replace('CarePlan/', '') },
      });
      expect(JSON.stringify(bot.body)).toContain('not_found');
      // Her plan is not theirs to write either, directly on Medplum.
      const plan = await repo().readReference<CarePlan>({ reference: carePlan });
      const direct403 = await direct(gw.backend, other.token, 'PUT', fhirPath(carePlan), {
        body: { ...plan, status: 'active' },
      });
      expect(direct403.status).toBeGreaterThanOrEqual(400);
    }
    // Nor can she activate her own plan by writing it herself.
    const plan = await repo().readReference<CarePlan>({ reference: carePlan });
    const self = await direct(gw.backend, patient.token, 'PUT', fhirPath(carePlan), {
      body: { ...plan, status: 'active' },
    });
    expect(self.status).toBe(403);
    expect(store()).toEqual(before);
  });

  it('unenrolling from an accepted treatment whose order was placed: the plan is revoked, the order stays, her care team is told', async () => {
    const spine = await offered(gw, clinician);
    const accepted = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    const { carePlan } = accepted.body as { carePlan: string };
    const placed = await gw.call('POST', `/v1/orders/${spine.group.id}/decisions`, {
      token: spine.patient.token,
      body: { items: [{ item: `MedicationRequest/${spine.items[0].id}`, decision: 'accept', fulfilment: 'pickup' }] },
    });
    expect(placed.status).toBe(200);
    const revoked = await unenroll(spine.patient, carePlan);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({ status: 'revoked' });
    expect((await repo().readResource<MedicationRequest>('MedicationRequest', spine.items[0].id)).intent).toBe('order');
    const [review] = await workAbout(gw, spine.patient, 'review-unenrollment');
    expect(review).toMatchObject({ status: 'ready', focus: { reference: carePlan } });
  });
});
