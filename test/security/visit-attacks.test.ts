import type { WithId } from '@medplum/core';
import type { Appointment, CarePlan, CareTeam, Schedule, ServiceRequest, Slot, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { freeSlots as freeSlotsOf, withVisitToBook as withVisitToBookOf } from '../support/visits';

/**
 * Attacks on the visit workflow bots (bots/enrollment.ts, bots/appointments.ts, bots/availability.ts,
 * bots/lib/scheduling.ts), DESIGN section 7: patients and clinicians call Medplum directly, a bot
 * believes only the requester, her verified token and its own reads. Refused attacks assert the refusal
 * with the store unchanged.
 */
let gw: TestGateway;
let team: WithId<CareTeam>;
let clinician: Clinician;
let foreign: Clinician;
beforeAll(async () => {
  gw = await startTestGateway({}, { allSlots: true });
  team = (await gw.backend.admin.searchOne('CareTeam', {
    _tag: `${SYSTEMS.provisioning}|visit-team-northwind`,
  })) as WithId<CareTeam>;
  clinician = await demoClinician(gw.backend, 'northwind');
  foreign = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;
const withVisitToBook = (visitType?: string) => withVisitToBookOf(gw, visitType);
const freeSlots = (patient: DemoActor, count?: number) => freeSlotsOf(gw, `CareTeam/${team.id}`, patient, count);
const store = () => storeSnapshot(gw.backend);
const tokenOf = (c: Clinician) => c.medplum.getAccessToken() as string;
const idOf = (reference: string) => reference.split('/')[1];

const book = (patient: DemoActor, task: string, slot?: string) =>
  gw.call('POST', '/v1/appointments', { token: patient.token, body: slot ? { task, slot } : { task } });
const reschedule = (patient: DemoActor, appointment: string, slot: string) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/reschedule`, { token: patient.token, body: { slot } });
const cancel = (patient: DemoActor, appointment: string) =>
  gw.call('POST', `/v1/appointments/${idOf(appointment)}/cancel`, { token: patient.token });
const slotStatus = async (slot: string) => (await repo().readReference<Slot>({ reference: slot })).status;

async function bookedVisit(): Promise<{
  patient: DemoActor;
  task: string;
  carePlan: string;
  appointment: string;
  slot: string;
}> {
  const visit = await withVisitToBook();
  const slots = await freeSlots(visit.patient, 5);
  for (const slot of slots) {
    const booked = await book(visit.patient, visit.task, slot);
    if (booked.status === 201) {
      return { ...visit, slot, appointment: (booked.body as { appointment: string }).appointment };
    }
  }
  throw new Error('no slot could be booked');
}

/** A free slot of a provisioned schedule (by its provisioning key), straight from the store. */
async function slotOf(scheduleKey: string): Promise<WithId<Slot>> {
  const schedule = (await gw.backend.admin.searchOne('Schedule', {
    _tag: `${SYSTEMS.provisioning}|${scheduleKey}`,
  })) as WithId<Schedule>;
  const slots = await repo().searchResources<Slot>({
    resourceType: 'Slot',
    filters: [
      { code: 'schedule', operator: 'eq', value: `Schedule/${schedule.id}` },
      { code: 'status', operator: 'eq', value: 'free' },
      { code: 'start', operator: 'gt', value: new Date(Date.now() + 86_400_000).toISOString() },
    ],
  });
  return slots[0] as WithId<Slot>;
}

const clinicianPut = async (c: Clinician, reference: string, change: Record<string, unknown>) => {
  const stored = await repo().readReference({ reference } as { reference: string });
  return direct(gw.backend, tokenOf(c), 'PUT', fhirPath(reference), { body: { ...stored, ...change } });
};

const appointmentsBot = (patient: DemoActor, input: Record<string, unknown>) =>
  executeBot(gw.backend, patient.token, 'appointments', { value: input });

describe('refused today', () => {
  it('another patient (same or other tenant), directly on Medplum, cannot book with her task, move, cancel or start her visit, or revoke or activate her plan', async () => {
    const victim = await bookedVisit();
    const [free] = await freeSlots(victim.patient, 3);
    const before = store();
    for (const other of [gw.backend.patients.bob, gw.backend.patients.carol]) {
      const appointment = idOf(victim.appointment);
      for (const input of [
        { operation: 'book', task: victim.task, slot: free },
        { operation: 'reschedule', appointment, slot: free },
        { operation: 'cancel', appointment },
        { operation: 'encounter', appointment },
      ]) {
        const res = await appointmentsBot(other, input);
        expect(res.text).toContain('not_found');
      }
      for (const operation of ['unenroll', 'activate']) {
        const res = await executeBot(gw.backend, other.token, 'enrollment', {
          value: { operation, carePlan: idOf(victim.carePlan) },
        });
        expect(res.text).toContain('not_found');
      }
    }
    expect(store()).toEqual(before);
    expect(await slotStatus(victim.slot)).toBe('busy');
  });

  it('a slot of another tenant (404), or of her tenant’s practitioner not licensed in her state (409 not_licensed), is not bookable or listed', async () => {
    const { patient, task } = await withVisitToBook();
    const unlicensed = await slotOf('visit-schedule-adeyemi'); // northwind, NY only; she is in CA
    const foreignSlot = await slotOf('visit-schedule-li'); // southridge
    const before = store();
    // Another tenant's: not hers to know of (404). Her tenant's practitioner not licensed where she lives:
    // 409 not_licensed, naming what she can do (her tenant's directory is hers to read anyway).
    expect((await book(patient, task, `Slot/${foreignSlot.id}`)).status).toBe(404);
    expect(await book(patient, task, `Slot/${unlicensed.id}`)).toMatchObject({
      status: 409,
      body: { error: { code: 'not_licensed', details: { state: 'US-CA', use: 'GET /v1/availability' } } },
    });
    const southTeam = (await gw.backend.admin.searchOne('CareTeam', {
      _tag: `${SYSTEMS.provisioning}|visit-team-southridge`,
    })) as WithId<CareTeam>;
    const window = {
      start: new Date(Date.now() + 86_400_000).toISOString(),
      end: new Date(Date.now() + 10 * 86_400_000).toISOString(),
    };
    const availability = (query: Record<string, string>) =>
      gw.call('GET', `/v1/availability?${new URLSearchParams({ ...query, ...window })}`, { token: patient.token });
    expect((await availability({ careTeam: `CareTeam/${southTeam.id}` })).status).toBe(404);
    const li = (await repo().readReference<Schedule>(foreignSlot.schedule as { reference: string })).actor?.[0];
    const liRole = await repo().readReference(li as { reference: string });
    expect(
      (await availability({ practitioner: (liRole as { practitioner: { reference: string } }).practitioner.reference }))
        .status,
    ).toBe(404);
    const adeyemiRole = await repo().readReference(
      (await repo().readReference<Schedule>(unlicensed.schedule as { reference: string })).actor?.[0] as {
        reference: string;
      },
    );
    const listed = await availability({
      practitioner: (adeyemiRole as { practitioner: { reference: string } }).practitioner.reference,
    });
    expect(listed).toMatchObject({ status: 200, body: { slots: [] } });
    expect(store()).toEqual(before);
  });

  it('a clinician cannot re-aim a patient’s schedule-visit task (focus, input, for) nor issue one as hers; nobody writes Slots or Schedules', async () => {
    const victim = await withVisitToBook();
    const other = await withVisitToBook();
    const task = await repo().readReference<Task>({ reference: victim.task });
    const otherTask = await repo().readReference<Task>({ reference: other.task });
    const before = store();
    for (const change of [
      { focus: otherTask.focus },
      { input: otherTask.input?.slice(0, 1) },
      { for: { reference: `Patient/${other.patient.patient.id}` } },
      { status: 'completed' },
    ]) {
      expect((await clinicianPut(clinician, victim.task, change)).status).toBe(403);
    }
    expect([403, 404]).toContain((await clinicianPut(foreign, victim.task, { status: 'on-hold' })).status);
    const { id: _id, meta, ...rest } = task;
    const issued = await direct(gw.backend, tokenOf(clinician), 'POST', fhirPath('Task'), {
      body: { ...rest, meta: { tag: meta?.tag } },
    });
    expect(issued.status).toBe(403);
    const slot = await slotOf('visit-schedule-reyes');
    for (const c of [clinician, foreign]) {
      expect([403, 404]).toContain((await clinicianPut(c, `Slot/${slot.id}`, { status: 'busy' })).status);
      expect([403, 404]).toContain(
        (await clinicianPut(c, slot.schedule.reference as string, { active: false })).status,
      );
    }
    expect(
      (
        await direct(gw.backend, victim.patient.token, 'PUT', fhirPath(`Slot/${slot.id}`), {
          body: { ...slot, status: 'busy' },
        })
      ).status,
    ).toBe(403);
    expect(store()).toEqual(before);
  });

  it('enrollment: another tenant’s offering is not found; re-enrolling returns her plan; after unenrolling a new draft revives nothing', async () => {
    const { patient, carePlan, task } = await withVisitToBook();
    const carol = gw.backend.patients.carol;
    const { protocols } = (await gw.call('GET', '/v1/protocols', { token: carol.token })).body as {
      protocols: { healthcareService: string }[];
    };
    expect(protocols.length).toBeGreaterThan(0);
    const before = store();
    for (const { healthcareService } of protocols) {
      const res = await executeBot(gw.backend, patient.token, 'enrollment', {
        value: { operation: 'enroll', healthcareService },
      });
      expect(res.text).toMatch(/not_found|review_required|invalid_state/);
    }
    expect(store()).toEqual(before);
    const service = (await repo().readReference<CarePlan>({ reference: carePlan })).instantiatesCanonical?.[0];
    const { protocols: hers } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
      protocols: { healthcareService: string; protocol?: string }[];
    };
    const offering = hers.find((p) => service?.startsWith(p.protocol?.split('|')[0] ?? '-'))
      ?.healthcareService as string;
    const again = await gw.call('POST', '/v1/enrollments', {
      token: patient.token,
      body: { healthcareService: offering },
    });
    expect(again).toMatchObject({ status: 200, body: { carePlan, status: 'active' } });
    expect((await gw.call('DELETE', `/v1/enrollments/${idOf(carePlan)}`, { token: patient.token })).status).toBe(200);
    const fresh = await gw.call('POST', '/v1/enrollments', {
      token: patient.token,
      body: { healthcareService: offering },
    });
    expect(fresh).toMatchObject({ status: 201, body: { status: 'draft' } });
    expect((fresh.body as { carePlan: string }).carePlan).not.toBe(carePlan);
    expect((await repo().readReference<Task>({ reference: task })).status).toBe('cancelled');
    const [slot] = await freeSlots(patient, 2);
    expect((await book(patient, task, slot)).status).toBe(409);
    const requests = await repo().searchResources<ServiceRequest>({
      resourceType: 'ServiceRequest',
      filters: [{ code: 'based-on', operator: 'eq', value: carePlan }],
    });
    expect(requests.every((r) => r.status === 'revoked')).toBe(true);
  });

  it('a booking and a reschedule racing for one slot: one holder, the other 409', async () => {
    const mover = await bookedVisit();
    const booker = await withVisitToBook();
    const [, target] = await freeSlots(booker.patient, 3);
    const answers = await Promise.all([
      reschedule(mover.patient, mover.appointment, target),
      book(booker.patient, booker.task, target),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    const holders = (
      await repo().searchResources<Appointment>({
        resourceType: 'Appointment',
        filters: [{ code: 'slot', operator: 'eq', value: target }],
      })
    ).filter((a) => a.status === 'booked');
    expect(holders).toHaveLength(1);
  });
});

/**
 * The bots take `Appointment.slot`, `Appointment.basedOn` and `Encounter.appointment` as their own,
 * but a clinician writes Appointments and Encounters (CLINICIAN_WRITABLE_TYPES) while Slots are read-only
 * to her: the appointments and enrollment bots then write Slots (project-wide) for her.
 */
/**
 * Found by this review and closed: clinicians no longer write Appointments (read-only, the appointments bot
 * books them), nor attach an Encounter to a visit (SEGMENT_AS_BOOKED, src/provision/definition.ts); the
 * bots act only on Appointments a bot wrote, free only a busy Slot the Appointment holds, re-issue a visit
 * only when nothing else books it, and count as segments only hers of the visit's request.
 */
describe('closed', () => {
  it('a clinician can neither re-aim a patient’s Appointment at another Slot nor write one of her own: 403, nothing changed', async () => {
    const accomplice = await bookedVisit();
    const victim = await bookedVisit();
    const before = store();
    expect((await clinicianPut(clinician, accomplice.appointment, { slot: [{ reference: victim.slot }] })).status).toBe(
      403,
    );
    const south = await slotOf('visit-schedule-li');
    const forged = await direct(gw.backend, tokenOf(clinician), 'POST', fhirPath('Appointment'), {
      body: {
        resourceType: 'Appointment',
        status: 'booked',
        start: south.start,
        end: south.end,
        slot: [{ reference: `Slot/${south.id}` }],
        participant: [{ actor: { reference: `Patient/${accomplice.patient.patient.id}` }, status: 'accepted' }],
      },
    });
    expect(forged.status).toBe(403);
    expect(store()).toEqual(before);
    // Her own cancel, reschedule and unenroll free only what she holds.
    const [next] = await freeSlots(accomplice.patient, 3);
    expect((await reschedule(accomplice.patient, accomplice.appointment, next)).status).toBe(201);
    expect(await slotStatus(victim.slot)).toBe('busy');
    expect(
      (await gw.call('DELETE', `/v1/enrollments/${idOf(accomplice.carePlan)}`, { token: accomplice.patient.token }))
        .status,
    ).toBe(200);
    expect(await slotStatus(victim.slot)).toBe('busy');
  });

  it('an Appointment written around the bots (a project admin’s) is not hers to act on: 404, its Slot untouched', async () => {
    const patient = await withVisitToBook();
    const south = await slotOf('visit-schedule-li');
    await repo().updateResource<Slot>({ ...south, status: 'busy' });
    const forged = await repo().createResource<Appointment>({
      resourceType: 'Appointment',
      meta: { project: gw.backend.project.id },
      status: 'booked',
      start: south.start,
      end: south.end,
      slot: [{ reference: `Slot/${south.id}` }],
      participant: [{ actor: { reference: `Patient/${patient.patient.patient.id}` }, status: 'accepted' }],
    });
    expect((await cancel(patient.patient, `Appointment/${forged.id}`)).status).toBe(404);
    expect(await slotStatus(`Slot/${south.id}`)).toBe('busy');
  });

  it('no Encounter of anyone else’s making attaches to her visit: refused by policy; one made anyway neither blocks her cancel nor enters her record', async () => {
    const victim = await bookedVisit();
    const carol = gw.backend.patients.carol;
    const encounter = (status: 'planned' | 'in-progress') => ({
      resourceType: 'Encounter' as const,
      status,
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'VR' },
      subject: { reference: `Patient/${carol.patient.id}` },
      appointment: [{ reference: victim.appointment }],
      type: [{ text: 'Pay your copay at evil.example' }],
      extension: [{ url: EXTENSIONS.segmentPosition, valueInteger: 3 }],
    });
    for (const c of [foreign, clinician]) {
      const injected = await direct(gw.backend, tokenOf(c), 'POST', fhirPath('Encounter'), {
        body: encounter('in-progress'),
      });
      expect(injected.status).toBe(403);
    }
    await repo().createResource({ ...encounter('in-progress'), meta: { project: gw.backend.project.id } });
    await repo().createResource({ ...encounter('planned'), meta: { project: gw.backend.project.id } });
    const [next] = await freeSlots(victim.patient, 3);
    const moved = await reschedule(victim.patient, victim.appointment, next);
    expect(moved.status, moved.text).toBe(201);
    const segments = (moved.body as { segments: { purpose: string }[] }).segments;
    expect(segments.map((s) => s.purpose)).not.toContain('Pay your copay at evil.example');
    expect((await cancel(victim.patient, (moved.body as { appointment: string }).appointment)).status).toBe(200);
  });

  it('cancelling re-issues the visit only when nothing else books it, and a visit that is over is not cancelled', async () => {
    const patient = await bookedVisit();
    const legit = await repo().readReference<Appointment>({ reference: patient.appointment });
    const request = legit.basedOn?.[0]?.reference as string;
    // Two bookings of one visit cannot exist through the API; the re-issue check holds even if one did.
    const second = await repo().createResource<Appointment>({
      ...legit,
      id: undefined,
      meta: { project: gw.backend.project.id, author: legit.meta?.author },
      slot: undefined,
    } as Appointment);
    expect((await cancel(patient.patient, `Appointment/${second.id}`)).status).toBe(200);
    const ready = (
      await repo().searchResources<Task>({
        resourceType: 'Task',
        filters: [{ code: 'focus', operator: 'eq', value: request }],
      })
    ).filter((t) => t.status === 'ready');
    expect(ready).toEqual([]);
    // A visit whose time is over is not cancelled (nothing to free, nothing to re-issue).
    const over = await repo().createResource<Appointment>({
      ...legit,
      id: undefined,
      meta: { project: gw.backend.project.id, author: legit.meta?.author },
      start: '2020-01-01T10:00:00Z',
      end: '2020-01-01T10:30:00Z',
      slot: undefined,
    } as Appointment);
    expect(await cancel(patient.patient, `Appointment/${over.id}`)).toMatchObject({
      status: 409,
      body: { error: { details: { state: 'past' } } },
    });
  });

  it('a slot reference to something else than a Slot (written around the bots) is not freed, and her cancel is no 500', async () => {
    const patient = await bookedVisit();
    const schedule = (await repo().readReference<Slot>({ reference: patient.slot })).schedule.reference as string;
    expect((await clinicianPut(clinician, patient.appointment, { slot: [{ reference: schedule }] })).status).toBe(403);
    const stored = await repo().readReference<Appointment>({ reference: patient.appointment });
    await repo().updateResource<Appointment>({ ...stored, slot: [{ reference: schedule }] });
    expect((await cancel(patient.patient, patient.appointment)).status).toBe(200);
  });
});
