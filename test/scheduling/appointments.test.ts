import type { WithId } from '@medplum/core';
import type { Appointment, CareTeam, Encounter, Patient, Schedule, Slot, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueOfTask } from '../../bots/lib/queues';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot, withdrawAnAgreement } from '../support/journey';
import { freeSlots as freeSlotsOf, visitStartingIn, withVisitToBook as withVisitToBookOf } from '../support/visits';

/**
 * Booking, rescheduling, cancelling and running a visit (issue 16 items 3-5, JOURNEY H), on the demo
 * schedules' materialised slots; every write in one transaction, concurrent calls giving one result.
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

interface Booked {
  appointment: string;
  status: string;
  start: string;
  practitioner: string;
  replaces?: string;
  segments: { encounter: string; position: number; purpose: string; status: string }[];
}

const repo = () => gw.backend.systemRepo;
const withVisitToBook = (visitType?: string) => withVisitToBookOf(gw, visitType);
const freeSlots = (patient: DemoActor, count?: number) => freeSlotsOf(gw, `CareTeam/${team.id}`, patient, count);
const store = () => storeSnapshot(gw.backend);

const book = (patient: DemoActor, task: string, slot: string) =>
  gw.call('POST', '/v1/appointments', { token: patient.token, body: { task, slot } });
const idOf = (reference: string) => reference.split('/')[1];
const reschedule = (patient: DemoActor, appointment: string, slot: string) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/reschedule`, { token: patient.token, body: { slot } });
const cancel = (patient: DemoActor, appointment: string) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/cancel`, { token: patient.token });
const startSegment = (patient: DemoActor, appointment: string, body: unknown = {}) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/encounter`, { token: patient.token, body });
/** The care team's reviews of her asynchronous visits. */
const reviewsOf = (patient: DemoActor) =>
  repo().searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|review-async-visit` },
      { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
    ],
  });
const slotStatus = async (slot: string) => (await repo().readReference<Slot>({ reference: slot })).status;
const encountersOf = (appointment: string) =>
  repo().searchResources<Encounter>({
    resourceType: 'Encounter',
    filters: [{ code: 'appointment', operator: 'eq', value: appointment }],
  });

describe('booking', () => {
  it('takes the slot, books the visit linked to her plan with its segments planned in declared order, and completes her task; a replay answers the same', async () => {
    const { patient, task } = await withVisitToBook();
    const [slot, other] = await freeSlots(patient);
    const booked = await book(patient, task, slot);
    expect(booked.status, booked.text).toBe(201);
    const body = booked.body as Booked;
    expect(body).toMatchObject({ status: 'booked', modality: 'sync' });
    expect(body.segments.map((s) => [s.position, s.purpose, s.status])).toEqual([
      [1, 'Check-in with a nurse', 'planned'],
      [2, 'Visit with your clinician', 'planned'],
    ]);
    expect(await slotStatus(slot)).toBe('busy');
    const appointment = await repo().readReference<Appointment>({ reference: body.appointment });
    expect(appointment.slot?.[0]?.reference).toBe(slot);
    expect(appointment.basedOn?.[0]?.reference).toMatch(/^ServiceRequest\//);
    expect(appointment.supportingInformation?.[0]?.reference).toMatch(/^CarePlan\//);
    expect((await repo().readReference<Task>({ reference: task })).status).toBe('completed');
    const segments = await gw.call('GET', `/v1/appointments/${idOf(body.appointment)}/segments`, {
      token: patient.token,
    });
    expect(segments).toMatchObject({ status: 200, body: { appointment: body.appointment, segments: body.segments } });

    expect(await book(patient, task, slot)).toMatchObject({ status: 200, body });
    const before = store();
    expect(await book(patient, task, other)).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    expect(store()).toEqual(before);
  });

  it('two patients booking one slot at once: exactly one booking, the other 409 slot_unavailable with nothing written', async () => {
    const [a, b] = await Promise.all([withVisitToBook(), withVisitToBook()]);
    const [slot] = await freeSlots(a.patient);
    const answers = await Promise.all([book(a.patient, a.task, slot), book(b.patient, b.task, slot)]);
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
    const loser = answers.find((r) => r.status === 409);
    expect(loser?.body).toMatchObject({ error: { code: 'slot_unavailable', details: { slot } } });
    const appointments = await repo().searchResources<Appointment>({
      resourceType: 'Appointment',
      filters: [{ code: 'slot', operator: 'eq', value: slot }],
    });
    expect(appointments).toHaveLength(1);
  });
});

describe('rescheduling and cancelling', () => {
  it('a stale slot changes nothing; twenty concurrent reschedules onto different slots give one new appointment, one slot taken, the old one free, no orphan segment', async () => {
    const { patient, task } = await withVisitToBook();
    const slots = await freeSlots(patient, 60);
    const { appointment } = (await book(patient, task, slots[0])).body as Booked;
    // Stale: another patient holds slots[1].
    const other = await withVisitToBook();
    expect((await book(other.patient, other.task, slots[1])).status).toBe(201);
    const before = store();
    const stale = await reschedule(patient, appointment, slots[1]);
    expect(stale).toMatchObject({ status: 409, body: { error: { code: 'slot_unavailable' } } });
    expect(store()).toEqual(before);

    const targets = slots.slice(2, 22);
    const answers = await Promise.all(targets.map((slot) => reschedule(patient, appointment, slot)));
    const won = answers.filter((r) => r.status === 201);
    expect(won).toHaveLength(1);
    expect(answers.filter((r) => r.status !== 201).every((r) => r.status === 409)).toBe(true);
    const replacement = won[0].body as Booked;
    expect(replacement.replaces).toBe(appointment);
    const original = await repo().readReference<Appointment>({ reference: appointment });
    expect(original).toMatchObject({ status: 'cancelled', cancelationReason: { text: 'rescheduled' } });
    expect(await slotStatus(slots[0])).toBe('free');
    const statuses = await Promise.all(targets.map(slotStatus));
    expect(statuses.filter((s) => s === 'busy')).toHaveLength(1);
    const taken = targets[statuses.indexOf('busy')];
    expect((await repo().readReference<Appointment>({ reference: replacement.appointment })).slot?.[0]?.reference).toBe(
      taken,
    );
    // Segments: the old ones cancelled, two new planned ones, nothing else of this visit.
    expect((await encountersOf(appointment)).map((e) => e.status)).toEqual(['cancelled', 'cancelled']);
    expect((await encountersOf(replacement.appointment)).map((e) => e.status).sort()).toEqual(['planned', 'planned']);
    const all = await repo().searchResources<Encounter>({
      resourceType: 'Encounter',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(all).toHaveLength(4);
    // The same reschedule again answers the new appointment.
    expect(await reschedule(patient, appointment, taken)).toMatchObject({ status: 200, body: replacement });
  });

  it('cancel frees the slot, cancels the segments and issues the visit to book again; a repeat answers the same', async () => {
    const { patient, task } = await withVisitToBook();
    const [slot] = await freeSlots(patient);
    const { appointment } = (await book(patient, task, slot)).body as Booked;
    const cancelled = await cancel(patient, appointment);
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
    expect(await slotStatus(slot)).toBe('free');
    expect((await encountersOf(appointment)).map((e) => e.status)).toEqual(['cancelled', 'cancelled']);
    const tasks = await repo().searchResources<Task>({
      resourceType: 'Task',
      filters: [
        { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|schedule-visit` },
        { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
      ],
    });
    const visitTasks = tasks.filter(
      (t) => t.focus?.reference === tasks.find((x) => x.id === idOf(task))?.focus?.reference,
    );
    expect(visitTasks.map((t) => t.status).sort()).toEqual(['completed', 'ready']);
    expect((await cancel(patient, appointment)).body).toEqual(cancelled.body);
  });
});

describe('an asynchronous review', () => {
  it('is booked without a slot for its review window, its segment open at once; it cannot be moved, and a slot is refused', async () => {
    const { patient, task } = await withVisitToBook('async-review');
    // Her task says how it is booked: no slot.
    const open = (await gw.call('GET', '/v1/tasks', { token: patient.token })).body as {
      tasks: { task: string; complete: string }[];
    };
    expect(open.tasks.find((t) => t.task === task)?.complete).toBe(`POST /v1/appointments {task: "${task}"}`);
    const [slot] = await freeSlots(patient);
    expect((await book(patient, task, slot)).status).toBe(400);
    const booked = await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } });
    expect(booked.status, booked.text).toBe(201);
    const body = booked.body as Booked & { modality: string; end: string };
    expect(body).toMatchObject({ status: 'booked', modality: 'async', segments: [{ position: 1, status: 'planned' }] });
    expect(body.practitioner).toBeUndefined();
    expect(Date.parse(body.end) - Date.parse(body.start)).toBe(72 * 3_600_000);
    expect((await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } })).status).toBe(200);
    const [other] = await freeSlots(patient);
    expect(await reschedule(patient, body.appointment, other)).toMatchObject({
      status: 409,
      body: { error: { details: { state: 'asynchronous' } } },
    });
    expect((await startSegment(patient, body.appointment)).body).toMatchObject({
      resumed: false,
      segment: { purpose: 'Review by your care team', status: 'in-progress' },
    });
  });

  it('is her care team’s work: a task in her tenant’s queue, due when the window ends; the clinician who takes and completes it (as the Provider app does: assignee, then completed) fulfils the visit, which she sees', async () => {
    const { patient, task } = await withVisitToBook('async-review');
    const booked = await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } });
    const body = booked.body as Booked & { end: string };
    const [review] = await reviewsOf(patient);
    expect(review).toMatchObject({
      status: 'ready',
      focus: { reference: body.appointment },
      for: { reference: `Patient/${patient.patient.id}` },
      restriction: { period: { end: body.end } },
      code: { text: 'Review an asynchronous visit' },
    });
    // Waiting in her tenant's queue, unowned (issue 48).
    expect(review.owner).toBeUndefined();
    expect(queueOfTask(review)).toMatch(/^CareTeam\//);
    const clinician = await demoClinician(gw.backend, 'northwind');
    const southridge = await demoClinician(gw.backend, 'southridge');
    const token = (who: Clinician) => who.medplum.getAccessToken() as string;
    const put = async (who: Clinician, change: Partial<Task>) => {
      const current = await repo().readResource<Task>('Task', review.id as string);
      return direct(gw.backend, token(who), 'PUT', fhirPath(`Task/${review.id}`), { body: { ...current, ...change } });
    };
    // The other tenant's clinician cannot take it; nor can she complete it without taking it.
    const before = store();
    expect([403, 404]).toContain((await put(southridge, { owner: southridge.profile })).status);
    expect((await put(clinician, { status: 'completed' })).status).toBe(403);
    expect(store()).toEqual(before);
    expect((await put(clinician, { owner: clinician.profile })).status).toBe(200);
    expect((await put(clinician, { status: 'completed' })).status).toBe(200);
    await gw.backend.subscriptions.idle();
    expect((await repo().readReference<Appointment>({ reference: body.appointment })).status).toBe('fulfilled');
    const segments = await gw.call('GET', `/v1/appointments/${idOf(body.appointment)}/segments`, {
      token: patient.token,
    });
    expect(segments.body).toMatchObject({ segments: [{ position: 1, status: 'finished' }] });
    const seen = await gw.call('GET', `/v1/fhir/Appointment/${idOf(body.appointment)}`, { token: patient.token });
    expect((seen.body as Appointment).status).toBe('fulfilled');
    // Fulfilled: it is not started again.
    expect(await startSegment(patient, body.appointment)).toMatchObject({ status: 409 });
  });

  it('a review task the platform did not issue fulfils nothing, and a patient cannot run the bot that fulfils', async () => {
    const { patient, task } = await withVisitToBook('async-review');
    const booked = (await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } })).body as Booked;
    const [issued] = await reviewsOf(patient);
    const clinician = await demoClinician(gw.backend, 'northwind');
    const { id: _id, meta, ...rest } = issued;
    const forged = await gw.backend.admin.createResource<Task>({
      ...rest,
      meta: { accounts: meta?.accounts, tag: meta?.tag },
      status: 'in-progress',
      owner: clinician.profile,
    });
    await clinician.medplum.updateResource<Task>({ ...forged, status: 'completed' });
    await gw.backend.subscriptions.idle();
    expect((await repo().readReference<Appointment>({ reference: booked.appointment })).status).toBe('booked');
    const ran = await executeBot(gw.backend, patient.token, 'visit-review', {
      value: { resourceType: 'Task', id: issued.id },
    });
    expect([403, 404]).toContain(ran.status);
    expect((await repo().readReference<Appointment>({ reference: booked.appointment })).status).toBe('booked');
  });

  it('a live visit without a slot is 400', async () => {
    const { patient, task } = await withVisitToBook();
    expect((await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task } })).status).toBe(400);
  });
});

describe('unenrolling', () => {
  it('cancels the plan’s future visits and frees their slots', async () => {
    const { patient, task } = await withVisitToBook();
    const [slot] = await freeSlots(patient);
    const { appointment } = (await book(patient, task, slot)).body as Booked;
    const carePlan = (await repo().readReference<Appointment>({ reference: appointment })).supportingInformation?.[0]
      ?.reference as string;
    const revoked = await gw.call('DELETE', `/v1/enrollments/${idOf(carePlan)}`, { token: patient.token });
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({ status: 'revoked', cancelledAppointments: [appointment] });
    expect((await repo().readReference<Appointment>({ reference: appointment })).status).toBe('cancelled');
    expect(await slotStatus(slot)).toBe('free');
    expect((await encountersOf(appointment)).map((e) => e.status)).toEqual(['cancelled', 'cancelled']);
  });
});

const visitIn = (minutes: number) => visitStartingIn(gw, `CareTeam/${team.id}`, minutes);

describe('segments', () => {
  /** A visit that is open now: a slot of a practitioner of her team starting in five minutes, booked. */
  const openVisit = () => visitIn(5);

  it('start the next unfinished segment, resume it, refuse skipping ahead; the first start marks the visit arrived', async () => {
    const { patient, appointment } = await openVisit();
    const first = await startSegment(patient, appointment);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ resumed: false, segment: { position: 1, status: 'in-progress' } });
    expect((await repo().readReference<Appointment>({ reference: appointment })).status).toBe('arrived');
    const again = await startSegment(patient, appointment);
    expect(again.body).toMatchObject({ resumed: true, segment: { position: 1, status: 'in-progress' } });
    const second = ((await encountersOf(appointment)).find((e) => e.type?.[0]?.text?.startsWith('Visit')) as Encounter)
      .id;
    const before = store();
    const skip = await startSegment(patient, appointment, { segment: `Encounter/${second}` });
    expect(skip).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    // A started visit is not rescheduled or cancelled.
    expect((await cancel(patient, appointment)).status).toBe(409);
    expect(store()).toEqual(before);
    // Concurrent starts of a planned segment: one starts it, the rest resume.
    const other = await openVisit();
    const answers = await Promise.all(Array.from({ length: 10 }, () => startSegment(other.patient, other.appointment)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(answers.filter((a) => (a.body as { resumed: boolean }).resumed === false)).toHaveLength(1);
  });

  it('is gated (409 consent_required, nothing changed) and opens 30 minutes before the start', async () => {
    const { patient, appointment } = await openVisit();
    await withdrawAnAgreement(gw, patient);
    const before = store();
    expect(await startSegment(patient, appointment)).toMatchObject({
      status: 409,
      body: { error: { code: 'consent_required' } },
    });
    expect(store()).toEqual(before);

    const later = await withVisitToBook();
    const [slot] = await freeSlots(later.patient);
    const { appointment: future } = (await book(later.patient, later.task, slot)).body as Booked;
    expect(await startSegment(later.patient, future)).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { state: 'not-open' } } },
    });
  });
});

describe('licensure at the time of care', () => {
  /** She moves: her record's address, as her app writes it (PUT /v1/fhir/Patient/{id}). */
  const moveTo = async (patient: DemoActor, state: string) => {
    const me = (await gw.call('GET', '/v1/patient/profile', { token: patient.token })).body as Patient;
    const moved = await gw.call('PUT', `/v1/fhir/Patient/${me.id}`, {
      token: patient.token,
      body: { ...me, address: [{ country: 'US', state }] },
    });
    expect(moved.status, moved.text).toBe(200);
  };
  /** What her new state asks her to accept (a state may require an agreement of its own), accepted. */
  const acceptWhatIsAsked = async (patient: DemoActor, carePlan: string) => {
    const { unmet } = (
      await gw.call('GET', `/v1/agreements/requirements?carePlan=${encodeURIComponent(carePlan)}`, {
        token: patient.token,
      })
    ).body as { unmet: unknown[] };
    if (unmet.length > 0) {
      await gw.call('POST', '/v1/agreements/acceptances', { token: patient.token, body: { agreements: unmet } });
    }
  };
  const practitionerOf = async (appointment: string) =>
    (await repo().readReference<Appointment>({ reference: appointment })).participant?.find((p) =>
      p.actor?.reference?.startsWith('Practitioner/'),
    )?.actor?.reference;

  it('a visit booked in CA does not start once she lives in NY (409 not_licensed naming her state, the practitioner and the reschedule, nothing changed), and starts again back in CA, recording where she was', async () => {
    const { patient, appointment } = await visitIn(5);
    const practitioner = await practitionerOf(appointment);
    await moveTo(patient, 'NY');
    const before = store();
    const refused = await startSegment(patient, appointment);
    expect(refused).toMatchObject({
      status: 409,
      body: {
        error: {
          code: 'not_licensed',
          details: { state: 'US-NY', practitioner, use: `POST /v1/appointments/${idOf(appointment)}/reschedule` },
        },
      },
    });
    expect(store()).toEqual(before);
    // The same directly on Medplum: the bot refuses it, whoever calls it.
    const direct$ = await executeBot(gw.backend, patient.token, 'appointments', {
      value: { operation: 'encounter', appointment: idOf(appointment) },
    });
    expect(direct$.text).toContain('not_licensed');
    expect(store()).toEqual(before);

    await moveTo(patient, 'CA');
    const started = await startSegment(patient, appointment);
    expect(started.status, started.text).toBe(200);
    const [segment] = (await encountersOf(appointment)).filter((e) => e.status === 'in-progress');
    expect(segment.extension).toContainEqual({
      url: EXTENSIONS.patientJurisdiction,
      valueCodeableConcept: { coding: [{ system: SYSTEMS.jurisdiction, code: 'US-CA' }] },
    });
    // Started while licensed: a resume is not refused whatever her address says since.
    await moveTo(patient, 'NY');
    expect(await startSegment(patient, appointment)).toMatchObject({ status: 200, body: { resumed: true } });
  });

  it('after a move, availability offers only practitioners licensed where she lives; a reschedule or a booking onto another’s slot is 409 not_licensed, onto a licensed one 200', async () => {
    const { patient, task, carePlan } = await withVisitToBook();
    const [caSlot, otherCaSlot] = await freeSlots(patient);
    const { appointment } = (await book(patient, task, caSlot)).body as Booked;
    // The practitioner whose slot the reschedule asks for (the two soonest free slots may be two
    // practitioners', depending on the hour the suite runs).
    const otherSchedule = (await repo().readReference<Slot>({ reference: otherCaSlot })).schedule;
    const caPractitioner = (await repo().readReference<Schedule>(otherSchedule as { reference: string })).actor?.find(
      (a) => a.reference?.startsWith('Practitioner/'),
    )?.reference;
    expect(caPractitioner).toMatch(/^Practitioner\//);
    await moveTo(patient, 'NY');
    await acceptWhatIsAsked(patient, carePlan);
    const nySlots = await freeSlots(patient);
    expect(nySlots.length).toBeGreaterThan(0);
    const listed = await Promise.all(
      nySlots.slice(0, 5).map((slot) => repo().readReference<Slot>({ reference: slot })),
    );
    const nySchedules = new Set(listed.map((slot) => slot.schedule?.reference));
    expect(nySchedules.has((await repo().readReference<Slot>({ reference: caSlot })).schedule?.reference)).toBe(false);
    const before = store();
    expect(await reschedule(patient, appointment, otherCaSlot)).toMatchObject({
      status: 409,
      body: {
        error: {
          code: 'not_licensed',
          details: { state: 'US-NY', practitioner: caPractitioner, use: 'GET /v1/availability' },
        },
      },
    });
    expect(store()).toEqual(before);
    const moved = await reschedule(patient, appointment, nySlots[0]);
    expect(moved.status, moved.text).toBe(201);

    const fresh = await withVisitToBook();
    const [freshCaSlot] = await freeSlots(fresh.patient);
    await moveTo(fresh.patient, 'NY');
    await acceptWhatIsAsked(fresh.patient, fresh.carePlan);
    expect(await book(fresh.patient, fresh.task, freshCaSlot)).toMatchObject({
      status: 409,
      body: { error: { code: 'not_licensed' } },
    });
  });
});

describe('the join window and the slot a cancel gives back (issue 25)', () => {
  it('opens 30 minutes before the start, not earlier: 31 minutes before is 409 not-open, 29 minutes before starts', async () => {
    const early = await visitIn(31);
    const before = store();
    expect(await startSegment(early.patient, early.appointment)).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { state: 'not-open' } } },
    });
    expect(store()).toEqual(before);
    const onTime = await visitIn(29);
    expect((await startSegment(onTime.patient, onTime.appointment)).status).toBe(200);
  });

  it('closes at its end: a booked visit whose end has passed does not start (409 not-open, nothing written)', async () => {
    const { patient, appointment } = await visitIn(5);
    // Its time moved into the past, as an operator's correction would: still booked, never started.
    const stored = await repo().readReference<Appointment>({ reference: appointment });
    const start = new Date(Date.now() - 60 * 60_000);
    await repo().updateResource<Appointment>({
      ...stored,
      start: start.toISOString(),
      end: new Date(start.getTime() + 30 * 60_000).toISOString(),
    });
    const before = store();
    expect(await startSegment(patient, appointment)).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { state: 'not-open' } } },
    });
    expect(store()).toEqual(before);
  });

  it('a cancel gives back only a slot it holds busy: one an operator took out of service stays busy-unavailable', async () => {
    const { patient, appointment, slot } = await visitIn(120);
    const held = await repo().readReference<Slot>({ reference: slot });
    await repo().updateResource<Slot>({ ...held, status: 'busy-unavailable' });
    const cancelled = await cancel(patient, appointment);
    expect(cancelled.status, cancelled.text).toBe(200);
    expect((await repo().readReference<Appointment>({ reference: appointment })).status).toBe('cancelled');
    expect((await repo().readReference<Slot>({ reference: slot })).status).toBe('busy-unavailable');
  });
});

describe('isolation', () => {
  it('another patient, of her tenant or another, cannot see a slot, book with her task, or touch her appointment; nobody writes a Slot or Appointment by hand', async () => {
    const { patient, task } = await withVisitToBook();
    const [slot, second] = await freeSlots(patient);
    const { appointment } = (await book(patient, task, slot)).body as Booked;
    const fresh = await withVisitToBook();
    const before = store();
    for (const other of [gw.backend.patients.bob, gw.backend.patients.carol]) {
      expect((await book(other, task, second)).status).toBe(404);
      expect((await reschedule(other, appointment, second)).status).toBe(404);
      expect((await cancel(other, appointment)).status).toBe(404);
      expect((await startSegment(other, appointment)).status).toBe(404);
      expect(
        (await gw.call('GET', `/v1/appointments/${idOf(appointment)}/segments`, { token: other.token })).status,
      ).toBe(404);
    }
    // A northwind patient cannot book a southridge slot with a task of her own: it is not hers to see.
    const southSchedule = (await gw.backend.admin.searchOne('Schedule', {
      _tag: `${SYSTEMS.provisioning}|visit-schedule-li`,
    })) as WithId<Schedule>;
    const [southSlot] = await repo().searchResources<Slot>({
      resourceType: 'Slot',
      filters: [{ code: 'schedule', operator: 'eq', value: `Schedule/${southSchedule.id}` }],
    });
    expect((await book(fresh.patient, fresh.task, `Slot/${southSlot.id}`)).status).toBe(404);
    // Directly on Medplum: no Slot or Appointment writes for a patient.
    const stored = await repo().readReference<Slot>({ reference: second });
    expect(
      (await direct(gw.backend, patient.token, 'PUT', fhirPath(second), { body: { ...stored, status: 'busy' } }))
        .status,
    ).toBe(403);
    const forged = await direct(gw.backend, patient.token, 'POST', fhirPath('Appointment'), {
      body: {
        resourceType: 'Appointment',
        status: 'booked',
        participant: [{ actor: { reference: `Patient/${patient.patient.id}` }, status: 'accepted' }],
      },
    });
    expect(forged.status).toBe(403);
    expect(store()).toEqual(before);
  });
});
