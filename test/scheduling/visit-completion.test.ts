import type { WithId } from '@medplum/core';
import type {
  Appointment,
  CarePlan,
  CareTeam,
  ClinicalImpression,
  Encounter,
  Practitioner,
  ServiceRequest,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventOf } from '../../bots/lib/events';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { type Clinician, encounterSignature, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { reconciler, withSubscriptionsOff } from '../support/deliveries';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';
import { visitStartingIn } from '../support/visits';

/**
 * The end of a visit (JOURNEY H): the visit's practitioner finishes its segments in Medplum's Provider
 * app (src/clinician finishEncounter writes exactly what the app writes: the Appointment `fulfilled`
 * first, then the Encounter `finished`), and the platform decides from the segments what the visit is:
 * fulfilled once every one is finished, its request completed, the plan's activity given the outcome,
 * the next visit of a repeating plan issued; else back to `arrived`. Tested from both sides.
 */
let gw: TestGateway;
let team: WithId<CareTeam>;
beforeAll(async () => {
  gw = await startTestGateway({}, { allSlots: true });
  team = (await gw.backend.admin.searchOne('CareTeam', {
    _tag: `${SYSTEMS.provisioning}|visit-team-northwind`,
  })) as WithId<CareTeam>;
});
afterAll(() => gw?.close());

/** The reconciler's next run (every 10 minutes). */
let nextRun: (() => Promise<void>) | undefined;
const reconcile = () => {
  nextRun ??= reconciler(gw.backend);
  return nextRun();
};

const repo = () => gw.backend.systemRepo;
const idOf = (reference: string) => reference.split('/')[1] as string;
const settle = () => gw.backend.subscriptions.idle();
const token = (who: Clinician) => who.medplum.getAccessToken() as string;

/** A two-segment video visit of a new patient, open now, and its practitioner signed in to Medplum. */
async function openVisit() {
  const { patient, appointment } = await visitStartingIn(gw, `CareTeam/${team.id}`, 5);
  const booked = await repo().readReference<Appointment>({ reference: appointment });
  const practitioner = booked.participant?.find((p) => p.actor?.reference?.startsWith('Practitioner/'))?.actor
    ?.reference as string;
  const key = (await repo().readReference<Practitioner>({ reference: practitioner })).meta?.tag?.find(
    (t) => t.system === SYSTEMS.provisioning,
  )?.code as string;
  const clinician = await signInClinician({
    baseUrl: gw.backend.baseUrl,
    fetch: gw.backend.fetch,
    email: demoEmail(key.replace('visit-practitioner-', ''), 'northwind'),
    password: DEMO_PASSWORD,
    projectId: gw.backend.project.id,
  });
  expect(getRef(clinician)).toBe(practitioner);
  return { patient, appointment, clinician };
}
const getRef = (c: Clinician) => c.profile.reference;
/** A demo visit practitioner signed in with her own login (`<key>@<tenant>.example`). */
const signInPractitioner = (key: string, tenant: 'northwind' | 'southridge') =>
  signInClinician({
    baseUrl: gw.backend.baseUrl,
    fetch: gw.backend.fetch,
    email: demoEmail(key, tenant),
    password: DEMO_PASSWORD,
    projectId: gw.backend.project.id,
  });

const visit = (patient: DemoActor, appointment: string) =>
  gw.call('GET', `/v1/appointments/${idOf(appointment)}`, { token: patient.token });
const start = (patient: DemoActor, appointment: string, body: unknown = {}) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/encounter`, { token: patient.token, body });
const segments = async (appointment: string) =>
  (
    await repo().searchResources<Encounter>({
      resourceType: 'Encounter',
      filters: [{ code: 'appointment', operator: 'eq', value: appointment }],
    })
  ).sort((a, b) => (a.extension?.[0]?.valueInteger ?? 0) - (b.extension?.[0]?.valueInteger ?? 0));
const visitTasks = (patient: DemoActor) =>
  repo().searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|schedule-visit` },
      { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
    ],
  });
/** A clinician's own write straight to Medplum (what any app of hers could send). */
const put = async <T extends Appointment | Encounter>(who: Clinician, reference: string, change: Partial<T>) => {
  const current = await repo().readReference<T>({ reference });
  return direct(gw.backend, token(who), 'PUT', fhirPath(reference), { body: { ...current, ...change } });
};

describe('her schedule in the Provider app (issue 48)', () => {
  it('the visit practitioner finds her Schedule as the app looks for it and her booked visit on it; another tenant’s practitioner finds neither', async () => {
    const { appointment, clinician } = await openVisit();
    const me = clinician.profile.reference as string;
    // What the app's Schedule page asks (examples/medplum-provider SchedulePage): her Schedule by actor.
    const [schedule] = await clinician.medplum.searchResources(
      'Schedule',
      { actor: me, _count: '1' },
      { cache: 'no-cache' },
    );
    expect(schedule?.actor?.map((a) => a.reference)).toContain(me);
    expect(schedule?.actor?.[0]?.reference).toMatch(/^PractitionerRole\//);
    // Then the calendar's visits: Appointments of each of its actors in the visible range.
    const booked = await repo().readReference<Appointment>({ reference: appointment });
    const from = new Date(Date.parse(booked.start as string) - 86_400_000).toISOString();
    const to = new Date(Date.parse(booked.end as string) + 86_400_000).toISOString();
    const visits = await clinician.medplum.searchResources(
      'Appointment',
      [
        ['actor', me],
        ['date', `ge${from}`],
        ['date', `le${to}`],
        ['_count', '1000'],
      ],
      { cache: 'no-cache' },
    );
    expect(visits.map((v) => `Appointment/${v.id}`)).toContain(appointment);
    // Southridge's visit practitioner: none of it.
    const li = await signInPractitioner('li', 'southridge');
    const theirs = await li.medplum.searchResources('Schedule', { actor: me }, { cache: 'no-cache' });
    expect(theirs.map((s) => s.actor?.map((a) => a.reference))).toEqual([]);
    expect(
      (await li.medplum.searchResources('Appointment', { actor: me }, { cache: 'no-cache' })).map((a) => a.id),
    ).toEqual([]);
  });
});

describe('a visit ends when its practitioner finishes its last segment', () => {
  it('finishing the first of two segments in the Provider app leaves the visit under way; the last fulfils it, completes its request, notes it on the plan and issues the next monthly visit, which she sees', async () => {
    const { patient, appointment, clinician } = await openVisit();
    const before = await visitTasks(patient);
    expect((await start(patient, appointment)).status).toBe(200);
    const [first, second] = await segments(appointment);

    // The first segment: the app marks the Appointment fulfilled, then finishes the Encounter.
    await clinician.finishEncounter(first?.id as string);
    await settle();
    const underWay = await visit(patient, appointment);
    expect(underWay.status, underWay.text).toBe(200);
    expect(underWay.body).toMatchObject({
      status: 'arrived',
      segments: [
        { position: 1, status: 'finished' },
        { position: 2, status: 'planned' },
      ],
    });
    // The app's mark of `fulfilled` is a version of the practitioner's: no event and no webhook tells it
    // (bots/lib/events.ts, which the feed and the webhooks bot share); the bot's putting it back is the
    // platform's own (visit.started again: the visit is under way).
    const history = (await repo().readHistory<Appointment>('Appointment', appointment.split('/')[1] as string)).entry
      ?.map((e) => e.resource as Appointment)
      .reverse();
    const told = (history ?? []).map((v) => [
      v.status,
      v.meta?.author?.reference?.split('/')[0],
      eventOf(v, patient.patient.id)?.type,
    ]);
    expect(told).toContainEqual(['fulfilled', 'Practitioner', undefined]);
    expect(told.filter(([, , type]) => type === 'visit.fulfilled')).toEqual([]);
    // She goes on to the next segment, which the practitioner finishes.
    expect((await start(patient, appointment)).body).toMatchObject({ segment: { position: 2 }, resumed: false });
    await clinician.finishEncounter(second?.id as string);
    await settle();

    const done = await visit(patient, appointment);
    expect(done.body).toMatchObject({
      status: 'fulfilled',
      segments: [
        { position: 1, status: 'finished' },
        { position: 2, status: 'finished' },
      ],
    });
    // The app already wrote `fulfilled`; the platform's decision is a version of its own (the bot, marked
    // when it decided: issue 50), the one events and webhooks announce, never the app's mark.
    const stored = await repo().readReference<Appointment>({ reference: appointment });
    expect(stored.meta?.author?.reference).toMatch(/^Bot\//);
    expect(stored.extension?.find((e) => e.url === EXTENSIONS.visitFulfilled)?.valueInstant).toBeTruthy();
    const fulfilledEvents = (
      (await gw.call('GET', '/v1/events', { token: patient.token })).body as {
        events: { type: string; subject: string }[];
      }
    ).events.filter((e) => e.type === 'visit.fulfilled' && e.subject === appointment);
    expect(fulfilledEvents).toHaveLength(1);
    const request = await repo().readReference<ServiceRequest>(stored.basedOn?.[0] as { reference: string });
    expect(request.status).toBe('completed');
    const plan = await repo().readReference<CarePlan>(request.basedOn?.[0] as { reference: string });
    expect(plan.activity?.flatMap((a) => a.outcomeReference ?? []).map((r) => r.reference)).toContain(appointment);

    // The plan repeats the visit monthly: one new visit to book, its own request, not before a month on.
    const after = await visitTasks(patient);
    const issued = after.filter((t) => !before.some((b) => b.id === t.id));
    expect(issued).toHaveLength(1);
    const next = issued[0] as Task;
    expect(next).toMatchObject({ status: 'ready', basedOn: [{ reference: `CarePlan/${plan.id}` }] });
    expect(next.focus?.reference).not.toBe(`ServiceRequest/${request.id}`);
    const notBefore = Date.parse(next.restriction?.period?.start as string);
    expect(notBefore - Date.now()).toBeGreaterThan(27 * 86_400_000);
    expect(notBefore - Date.now()).toBeLessThan(32 * 86_400_000);
    const tasks = (await gw.call('GET', '/v1/tasks', { token: patient.token })).body as {
      tasks: { task: string; kind: string; notBefore?: string }[];
    };
    expect(tasks.tasks.find((t) => t.task === `Task/${next.id}`)).toMatchObject({
      kind: 'schedule-visit',
      notBefore: next.restriction?.period?.start,
    });

    // A finished visit is not started again, by her or by its practitioner; a note on it changes nothing.
    expect(await start(patient, appointment)).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state' } },
    });
    expect((await put<Encounter>(clinician, `Encounter/${second?.id}`, { status: 'in-progress' })).status).toBe(403);
    const noted = await put<Encounter>(clinician, `Encounter/${second?.id}`, {
      reasonCode: [{ text: 'follow-up of blood pressure' }],
    });
    expect(noted.status, noted.text).toBe(200);
    await settle();
    expect((await visitTasks(patient)).length).toBe(after.length);
    expect((await visit(patient, appointment)).body).toMatchObject({ status: 'fulfilled' });
  });

  it('a segment finished out of order, by a colleague, by another tenant, or a visit reopened: refused, and the visit goes on as its segments say', async () => {
    const { patient, appointment, clinician } = await openVisit();
    expect((await start(patient, appointment)).status).toBe(200);
    const [first, second] = await segments(appointment);
    const colleague = await demoClinician(gw.backend, 'northwind');
    const southridge = await demoClinician(gw.backend, 'southridge');
    const snapshot = () => storeSnapshot(gw.backend);

    // Another clinician of her tenant, not the visit's practitioner, and the other tenant's: nothing written.
    let before = snapshot();
    expect((await put<Appointment>(colleague, appointment, { status: 'fulfilled' })).status).toBe(403);
    expect((await put<Encounter>(colleague, `Encounter/${first?.id}`, { status: 'finished' })).status).toBe(403);
    expect([403, 404]).toContain((await put<Appointment>(southridge, appointment, { status: 'fulfilled' })).status);
    expect([403, 404]).toContain(
      (await put<Encounter>(southridge, `Encounter/${first?.id}`, { status: 'finished' })).status,
    );
    // Her own visit, but more than its status, or another status than the app's finish.
    expect(
      (await put<Appointment>(clinician, appointment, { status: 'fulfilled', start: new Date().toISOString() })).status,
    ).toBe(403);
    expect((await put<Appointment>(clinician, appointment, { status: 'cancelled' })).status).toBe(403);
    expect((await put<Appointment>(clinician, appointment, { status: 'checked-in' })).status).toBe(403);
    // A patient writes no Appointment or segment status, and cannot run the bot that decides.
    expect(
      (
        await direct(gw.backend, patient.token, 'PUT', fhirPath(appointment), {
          body: { ...(await repo().readReference<Appointment>({ reference: appointment })), status: 'fulfilled' },
        })
      ).status,
    ).toBe(403);
    expect(snapshot()).toEqual(before);
    const ran = await executeBot(gw.backend, patient.token, 'visit-completion', {
      value: { resourceType: 'Appointment', id: idOf(appointment) },
    });
    expect([403, 404]).toContain(ran.status);

    // The practitioner finishes the second segment before the first (in the app): the Appointment write
    // goes through, the Encounter's is refused, and the platform puts the visit back.
    await expect(clinician.finishEncounter(second?.id as string)).rejects.toThrow();
    await settle();
    expect((await visit(patient, appointment)).body).toMatchObject({
      status: 'arrived',
      segments: [
        { position: 1, status: 'in-progress' },
        { position: 2, status: 'planned' },
      ],
    });
    // A segment she has not started is not the practitioner's to start or cancel.
    before = snapshot();
    expect((await put<Encounter>(clinician, `Encounter/${second?.id}`, { status: 'in-progress' })).status).toBe(403);
    expect((await put<Encounter>(clinician, `Encounter/${first?.id}`, { status: 'cancelled' })).status).toBe(403);
    expect(snapshot()).toEqual(before);
  });

  it('an asynchronous review completed by her care team fulfils the visit and its plan issues the next review', async () => {
    // Covered by the review's own test for the visit (appointments.test.ts); here: the plan's side.
    const { withVisitToBook } = await import('../support/visits');
    const { patient, task } = await withVisitToBook(gw, 'async-review');
    const booked = (await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } })).body as {
      appointment: string;
    };
    const [review] = await repo().searchResources<Task>({
      resourceType: 'Task',
      filters: [
        { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|review-async-visit` },
        { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
      ],
    });
    const clinician = await demoClinician(gw.backend, 'northwind');
    const before = await visitTasks(patient);
    await clinician.claim(review?.id as string);
    await clinician.complete(review?.id as string, []);
    await settle();
    expect((await visit(patient, booked.appointment)).body).toMatchObject({ status: 'fulfilled', modality: 'async' });
    const issued = (await visitTasks(patient)).filter((t) => !before.some((b) => b.id === t.id));
    expect(issued).toHaveLength(1);
    const notBefore = Date.parse(issued[0]?.restriction?.period?.start as string);
    // Quarterly: about three months on.
    expect(notBefore - Date.now()).toBeGreaterThan(85 * 86_400_000);
  });

  it('another patient cannot read her visit (404), nor can anyone read one that does not exist', async () => {
    const { appointment } = await openVisit();
    const other = await openVisit();
    expect((await visit(other.patient, appointment)).status).toBe(404);
    expect((await visit(other.patient, 'Appointment/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it('a visit whose end was lost (both deliveries) is fulfilled by the reconciler, once', async () => {
    const { patient, appointment, clinician } = await openVisit();
    expect((await start(patient, appointment)).status).toBe(200);
    const [first, second] = await segments(appointment);
    await clinician.finishEncounter(first?.id as string);
    await settle();
    expect((await start(patient, appointment)).status).toBe(200);
    const before = await visitTasks(patient);
    await withSubscriptionsOff(gw.backend, ['segment-finished', 'visit-marked-fulfilled'], () =>
      clinician.finishEncounter(second?.id as string),
    );
    // Marked fulfilled by the app, never decided: its request still active, no next visit.
    const stored = await repo().readReference<Appointment>({ reference: appointment });
    expect(stored.meta?.author?.reference).toBe(clinician.profile.reference);
    await reconcile();
    await reconcile();
    expect((await visit(patient, appointment)).body).toMatchObject({ status: 'fulfilled' });
    const decided = await repo().readReference<Appointment>({ reference: appointment });
    expect((await repo().readReference<ServiceRequest>(decided.basedOn?.[0] as { reference: string })).status).toBe(
      'completed',
    );
    expect((await visitTasks(patient)).filter((t) => !before.some((b) => b.id === t.id))).toHaveLength(1);
  });

  it('an asynchronous review past its due date is marked urgent and overdue for the queue, once; nothing else of it changes', async () => {
    const { withVisitToBook } = await import('../support/visits');
    const { patient, task } = await withVisitToBook(gw, 'async-review');
    await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } });
    const [review] = await repo().searchResources<Task>({
      resourceType: 'Task',
      filters: [
        { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|review-async-visit` },
        { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
      ],
    });
    await reconcile();
    expect((await repo().readResource<Task>('Task', review?.id as string)).businessStatus).toBeUndefined();
    // Time passes: its review window is over (the stored due date moved into the past).
    const due = new Date(Date.now() - 60_000).toISOString();
    await repo().updateResource<Task>({ ...(review as Task), restriction: { period: { end: due } } });
    await reconcile();
    const marked = await repo().readResource<Task>('Task', review?.id as string);
    expect(marked).toMatchObject({
      status: 'ready',
      priority: 'urgent',
      businessStatus: { text: 'overdue' },
      performerType: review?.performerType,
      restriction: { period: { end: due } },
    });
    expect(marked.owner).toEqual(review?.owner);
    await reconcile();
    expect((await repo().readResource<Task>('Task', review?.id as string)).meta?.versionId).toBe(
      marked.meta?.versionId,
    );
    // First in her queue's order (most urgent first).
    const colleague = await demoClinician(gw.backend, 'northwind');
    const queue = await colleague.queue();
    const firstAsync = queue.findIndex((t) => t.code?.coding?.some((c) => c.code === 'review-async-visit'));
    expect(queue[firstAsync]?.id).toBe(review?.id);
  });
});

describe('her visit note (issue 48 item 4)', () => {
  it('the practitioner finds each segment’s note as the app does, writes it, signs it, locks it; nobody else may, and the patient reads it only once locked', async () => {
    const { patient, appointment, clinician } = await openVisit();
    const me = clinician.profile.reference as string;
    const [first] = await segments(appointment);
    const encounter = `Encounter/${first.id}`;
    // What the app's encounter page asks: the note of the encounter, its first.
    const [note] = await clinician.medplum.searchResources('ClinicalImpression', { encounter }, { cache: 'no-cache' });
    expect(note).toMatchObject({
      status: 'in-progress',
      subject: { reference: `Patient/${patient.patient.id}` },
      encounter: { reference: encounter },
      assessor: { reference: me },
    });
    expect(note.meta?.accounts).toEqual([patient.patient.managingOrganization]);
    const ref = `ClinicalImpression/${note.id}`;
    const write = (who: Clinician | DemoActor, body: unknown, method = 'PUT', path = ref) =>
      direct(gw.backend, 'token' in who ? who.token : token(who), method, fhirPath(path), { body });

    // The note box saves the whole note (no author, no time), as the app does.
    const written = await write(clinician, { ...note, note: [{ text: 'BP 148/94 on her cuff; start lisinopril.' }] });
    expect(written.status).toBe(200);
    // The queue clinician (not the visit's practitioner) may not write it, nor a patient; nobody creates one by hand.
    const queueClinician = await demoClinician(gw.backend, 'northwind');
    const current = await repo().readReference({ reference: ref });
    expect((await write(queueClinician, { ...current, note: [{ text: 'Overwritten' }] })).status).toBe(403);
    expect((await write(patient, { ...current, note: [{ text: 'Overwritten' }] })).status).toBe(403);
    const { id: _id, meta: _meta, ...copy } = current;
    expect((await write(clinician, copy, 'POST', 'ClinicalImpression')).status).toBe(403);
    // Nor may she move it to another encounter or patient, or give it another assessor.
    for (const change of [
      { encounter: { reference: 'Encounter/other' } },
      { assessor: { reference: getRef(queueClinician) } },
    ]) {
      expect((await write(clinician, { ...current, ...change })).status).toBe(403);
    }
    // A draft is not the patient's: not by id, not through the gateway.
    expect((await direct(gw.backend, patient.token, 'GET', fhirPath(ref))).status).toBeGreaterThanOrEqual(403);
    const drafts = await gw.call('GET', `/v1/fhir/ClinicalImpression?encounter=${encounter}`, { token: patient.token });
    expect((drafts.body as { entry?: unknown[] }).entry ?? []).toEqual([]);

    // Her signature, as the app's Sign writes it; none in another's name, none of anything but an encounter.
    const signature = (who: string, target = encounter) => encounterSignature(who, target);
    expect((await write(clinician, signature(getRef(queueClinician) as string), 'POST', 'Provenance')).status).toBe(
      403,
    );
    expect((await write(clinician, signature(me, `Patient/${patient.patient.id}`), 'POST', 'Provenance')).status).toBe(
      403,
    );
    expect((await write(clinician, signature(me), 'POST', 'Provenance')).status).toBe(201);
    // Sign & Lock from the page's copy of the note (what the app 5.1.29 sends: the note as loaded with the
    // page, before she typed, completed, no If-Match): refused, her text kept.
    const stale = await write(clinician, { ...note, status: 'completed' });
    expect(stale.status).toBe(403);
    expect(((await repo().readReference({ reference: ref })) as ClinicalImpression).note).toEqual([
      { text: 'BP 148/94 on her cuff; start lisinopril.' },
    ]);
    // Sign & Lock from a fresh page: the note completed as it is, then final.
    const signed = await repo().readReference({ reference: ref });
    expect((await write(clinician, { ...signed, status: 'completed' })).status).toBe(200);
    const locked = await repo().readReference({ reference: ref });
    expect((await write(clinician, { ...locked, note: [{ text: 'Changed after signing' }] })).status).toBe(403);
    // Now hers to read, as signed.
    const hers = await gw.call('GET', `/v1/fhir/ClinicalImpression?encounter=${encounter}`, { token: patient.token });
    expect(hers.status).toBe(200);
    expect((hers.body as { entry?: { resource: { note?: { text: string }[] } }[] }).entry?.[0]?.resource.note).toEqual([
      { text: 'BP 148/94 on her cuff; start lisinopril.' },
    ]);
    // Nor the drafts before it: no history, no earlier version. Medplum checks a history or a version read
    // against the current version only (packages/server/src/fhir/repo.ts readHistory, readVersion, 5.1.29),
    // so her policy grants ClinicalImpression read and search, never history or vread.
    const history = await direct(gw.backend, patient.token, 'GET', fhirPath(`${ref}/_history`));
    expect(history.status, history.text).toBeGreaterThanOrEqual(403);
    const draftVersion = await direct(
      gw.backend,
      patient.token,
      'GET',
      fhirPath(`${ref}/_history/${note.meta?.versionId}`),
    );
    expect(draftVersion.status, draftVersion.text).toBeGreaterThanOrEqual(403);
    // Another patient, even of her tenant, reads none of it, signed or not.
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await direct(gw.backend, other.token, 'GET', fhirPath(ref))).status).toBeGreaterThanOrEqual(403);
    const theirs = await gw.call('GET', `/v1/fhir/ClinicalImpression?encounter=${encounter}`, { token: other.token });
    expect((theirs.body as { entry?: unknown[] }).entry ?? []).toEqual([]);
    // Another tenant's practitioner sees none of it.
    const li = await signInPractitioner('li', 'southridge');
    expect(
      (await li.medplum.searchResources('ClinicalImpression', { encounter }, { cache: 'no-cache' })).map((c) => c.id),
    ).toEqual([]);
    expect((await direct(gw.backend, token(li), 'GET', fhirPath(ref))).status).toBeGreaterThanOrEqual(403);
  });
});
