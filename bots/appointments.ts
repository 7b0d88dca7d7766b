import { randomUUID } from 'node:crypto';
import { type BotEvent, formatHumanName, type MedplumClient } from '@medplum/core';
import type {
  Appointment,
  Bundle,
  BundleEntry,
  CarePlan,
  CareTeam,
  Encounter,
  Patient,
  ServiceRequest,
  Slot,
  Task,
} from '@medplum/fhirtypes';
import type { BotInput } from '../contracts/bot-inputs';
import { EXTENSIONS, SYSTEMS, VISIT_TYPES } from '../contracts/systems';
import { absent } from './lib/absent';
import { activeAcceptances, contextNotFound, freshCatalog, requireAgreements } from './lib/agreements';
import { isHerTask } from './lib/finished';
import { visitTypeOf } from './lib/plans';
import { ASYNC_REVIEW, clinicianTask, tenantQueue } from './lib/queues';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { jurisdictionOf, practitionerLicensed, slotLicensure } from './lib/scheduling';
import { searchAll } from './lib/search';
import { patientWorkflow } from './lib/trust';
import {
  type AppointmentView,
  appointmentView,
  bookedBy,
  encountersOf,
  isVisitTask,
  ownAppointment,
  positionOf,
  purposeOf,
  replacementOf,
  resumed,
  type SegmentView,
  segmentChosen,
  segmentsOf,
  segmentView,
  visitNote,
} from './lib/visits';

export type AppointmentsResult = BotResult<
  (AppointmentView & { created?: boolean }) | { appointment: string; segment: SegmentView; resumed: boolean }
>;

/** How long before its start a visit opens for its first segment (a slot's length: the next one is always open). */
const JOIN_EARLY_MS = 30 * 60_000;
const CANCELLATION_REASONS = 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason';

/**
 * A patient's visits (JOURNEY H): book a plan's visit on a free Slot, reschedule it (cancel and re-book
 * in one step, never in place), cancel it, start or resume a segment. Each checks first and writes ONE
 * transaction under If-Match on what it changes (the Slot, the Appointment, the Encounter), so two
 * bookings of one slot, or concurrent reschedules of one visit, give exactly one result.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<AppointmentsResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'appointments');
  if (!start.ok) {
    return start;
  }
  const input = start.input;
  const { patientId } = start.caller;
  askWhatTheCallReads(medplum, patientId, input);
  const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
  if (input.operation === 'book') {
    return book(medplum, patient, input.task.split('/')[1], input.slot?.split('/')[1]);
  }
  const appointment = await ownAppointment(medplum, input.appointment, patient.id);
  if (!appointment) {
    return contextNotFound();
  }
  switch (input.operation) {
    case 'reschedule':
      return reschedule(medplum, patient, appointment, input.slot.split('/')[1]);
    case 'cancel':
      return cancel(medplum, patient, appointment);
    default:
      return startSegment(medplum, patient, appointment, input.segment);
  }
}

/**
 * What every operation reads anyway, asked with her Patient (fewer round trips; each believed where it is
 * used): the gate's acceptances and published agreements, and what the call names. A reschedule's new
 * slot goes out with the appointment: its checks (schedule, role, licence) start from it.
 */
function askWhatTheCallReads(medplum: MedplumClient, patientId: string, input: BotInput<'appointments'>): void {
  ahead(activeAcceptances(medplum, patientId));
  ahead(freshCatalog(medplum).published());
  if (input.operation === 'book') {
    ahead(medplum.readResource('Task', input.task.split('/')[1]));
    if (input.slot) {
      ahead(medplum.readResource('Slot', input.slot.split('/')[1]));
    }
    return;
  }
  ahead(medplum.readResource('Appointment', input.appointment));
  ahead(encountersOf(medplum, input.appointment));
  if (input.operation === 'reschedule') {
    ahead(medplum.readResource('Slot', input.slot.split('/')[1]));
  }
}

// ------------------------------------------------------------------ book

async function book(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  taskId: string,
  slotId: string | undefined,
): Promise<AppointmentsResult> {
  const her = `Patient/${patient.id}`;
  for (let attempt = 0; ; attempt++) {
    // The slot's checks (its schedule, role, licence) run beside the task's; answered in their turn below.
    const slotCheck = slotId ? ahead(bookableSlot(medplum, slotId, patient)) : undefined;
    const task = (await medplum.readResource('Task', taskId).catch(absent)) as Task | undefined;
    if (!isHerTask(task, patient.id) || !isVisitTask(task)) {
      return contextNotFound();
    }
    if (task.status === 'completed') {
      const booked = bookedBy(task);
      const appointment = await ownAppointment(medplum, booked.split('/')[1] ?? '', patient.id);
      return appointment && appointment.slot?.[0]?.reference === (slotId ? `Slot/${slotId}` : undefined)
        ? appointmentView(medplum, appointment, false)
        : fail(409, 'invalid_state', 'This visit is already booked; reschedule it instead', {
            state: 'completed',
            ...(appointment ? { appointment: `Appointment/${appointment.id}` } : {}),
          });
    }
    if (task.status !== 'ready') {
      return fail(409, 'invalid_state', `This task is ${task.status}`, { state: task.status });
    }
    const visit = await visitOf(medplum, task, her);
    if (!visit) {
      return fail(409, 'invalid_state', 'This visit is no longer part of an active plan', { state: 'inactive' });
    }
    const gate = await requireAgreements(medplum, patient.id, { carePlan: `CarePlan/${visit.plan.id}` });
    if (gate) {
      return gate;
    }
    const asynchronous = visitTypeOf(task)?.code === 'async-review';
    if (asynchronous === (slotId !== undefined)) {
      return fail(
        400,
        'invalid_request',
        asynchronous ? 'An asynchronous review takes no slot' : 'A live visit needs a slot',
        {
          issues: [{ path: 'slot', message: asynchronous ? 'not for an asynchronous review' : 'required' }],
        },
      );
    }
    const slot = slotCheck ? await slotCheck : undefined;
    if (slot && !slot.ok) {
      return slot;
    }
    const segments = (task.input ?? []).filter((i) => i.type.coding?.some((c) => c.code === 'segment'));
    const appointmentUrl = `urn:uuid:${randomUUID()}`;
    const tags = (task.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);
    const appointment = slot
      ? appointmentFor(slot.slot, slot.practitioner, { reference: her, display: nameOf(patient) }, visit, tags)
      : reviewFor(her, visit, tags);
    // An asynchronous review is her care team's work: a task in her tenant's queue, due at its window's end.
    const review = slot
      ? undefined
      : asyncReviewTask(patient, await tenantQueue(medplum, patient, ASYNC_REVIEW), appointmentUrl, appointment, tags);
    const entries: BundleEntry[] = [
      ...(slot ? [takeSlot(slot.slot)] : []),
      { fullUrl: appointmentUrl, resource: appointment, request: { method: 'POST', url: 'Appointment' } },
      ...(review ? [review] : []),
      ...segments.flatMap((s, i) =>
        encounterEntry(appointmentUrl, her, slot?.practitioner, visit.request, i + 1, s.valueString ?? 'Visit', tags),
      ),
      {
        resource: {
          ...task,
          status: 'completed',
          lastModified: new Date().toISOString(),
          output: [{ type: { text: 'appointment' }, valueReference: { reference: appointmentUrl } }],
        },
        request: { method: 'PUT', url: `Task/${task.id}`, ifMatch: `W/"${task.meta?.versionId}"` },
      },
    ];
    try {
      const response = await medplum.executeBatch(transaction(entries));
      const saved = response.entry?.find((e) => e.resource?.resourceType === 'Appointment')?.resource;
      return appointmentView(medplum, saved as Appointment, true, writtenSegments(response, segments.length));
    } catch (err) {
      if (!lostRace(err) || attempt > 0) {
        if (lostRace(err)) {
          return fail(409, 'invalid_state', 'This visit changed while it was being booked; try again', {
            state: 'conflict',
          });
        }
        throw err;
      }
      // The slot was taken, or this task booked, at the same moment: read both again, once.
    }
  }
}

// ------------------------------------------------------------------ reschedule

async function reschedule(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  original: Appointment & { id: string },
  slotId: string,
): Promise<AppointmentsResult> {
  const her = `Patient/${patient.id}`;
  if (original.status === 'cancelled') {
    const replacement = await replacementOf(medplum, original, her);
    return replacement && replacement.slot?.[0]?.reference === `Slot/${slotId}`
      ? appointmentView(medplum, replacement, false)
      : fail(409, 'invalid_state', 'This visit is cancelled', {
          state: 'cancelled',
          ...(replacement ? { appointment: `Appointment/${replacement.id}` } : {}),
        });
  }
  if (original.status !== 'booked') {
    return fail(409, 'invalid_state', `This visit is ${original.status}`, { state: original.status });
  }
  if (!original.slot?.length) {
    return fail(409, 'invalid_state', 'An asynchronous review has no slot to move', { state: 'asynchronous' });
  }
  // Every check's reads at once; each answered in its turn.
  const slotCheck = ahead(bookableSlot(medplum, slotId, patient));
  const holding = ahead(heldSlot(medplum, original));
  const visiting = ahead(visitOfAppointment(medplum, original, her));
  const segments = await segmentsOf(medplum, original);
  if (segments.some((s) => s.status !== 'planned')) {
    return fail(409, 'invalid_state', 'This visit has started', { state: 'in-progress' });
  }
  const visit = await visiting;
  if (!visit) {
    return fail(409, 'invalid_state', 'This visit is no longer part of an active plan', { state: 'inactive' });
  }
  const gate = await requireAgreements(medplum, patient.id, { carePlan: `CarePlan/${visit.plan.id}` });
  if (gate) {
    return gate;
  }
  const slot = await slotCheck;
  if (!slot.ok) {
    return slot;
  }
  const oldSlot = await holding;
  const tags = (original.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);
  const replacementUrl = `urn:uuid:${randomUUID()}`;
  const replacement = appointmentFor(
    slot.slot,
    slot.practitioner,
    { reference: her, display: nameOf(patient) },
    visit,
    tags,
  );
  replacement.extension = [
    ...(replacement.extension ?? []),
    { url: EXTENSIONS.appointmentReplaces, valueReference: { reference: `Appointment/${original.id}` } },
  ];
  const entries: BundleEntry[] = [
    {
      resource: {
        ...original,
        status: 'cancelled',
        cancelationReason: { coding: [{ system: SYSTEMS.cancelReason, code: 'rescheduled' }], text: 'rescheduled' },
      },
      request: { method: 'PUT', url: `Appointment/${original.id}`, ifMatch: `W/"${original.meta?.versionId}"` },
    },
    { fullUrl: replacementUrl, resource: replacement, request: { method: 'POST', url: 'Appointment' } },
    ...(oldSlot ? [freeSlot(oldSlot)] : []),
    takeSlot(slot.slot),
    ...segments.map(cancelEncounter),
    ...segments.flatMap((s) =>
      encounterEntry(replacementUrl, her, slot.practitioner, visit.request, positionOf(s), purposeOf(s), tags),
    ),
  ];
  try {
    const response = await medplum.executeBatch(transaction(entries));
    return appointmentView(
      medplum,
      response.entry?.[1]?.resource as Appointment,
      true,
      writtenSegments(response, segments.length, 'planned'),
    );
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // A concurrent reschedule of this visit, or a booking of that slot, got there first.
    const now = await ownAppointment(medplum, original.id, patient.id);
    const winner = now?.status === 'cancelled' ? await replacementOf(medplum, now, her) : undefined;
    if (winner && winner.slot?.[0]?.reference === `Slot/${slotId}`) {
      return appointmentView(medplum, winner, false);
    }
    const taken = (await medplum.readResource('Slot', slotId).catch(absent)) as Slot | undefined;
    return taken?.status !== 'free'
      ? fail(409, 'slot_unavailable', 'This slot was just taken', { slot: `Slot/${slotId}` })
      : fail(409, 'invalid_state', 'This visit changed while it was being rescheduled', {
          state: now?.status ?? 'unknown',
        });
  }
}

// ------------------------------------------------------------------ cancel

async function cancel(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  appointment: Appointment & { id: string },
): Promise<AppointmentsResult> {
  const her = `Patient/${patient.id}`;
  if (appointment.status === 'cancelled') {
    return appointmentView(medplum, appointment, false);
  }
  if (appointment.status !== 'booked') {
    return fail(409, 'invalid_state', `This visit is ${appointment.status}`, { state: appointment.status });
  }
  if (Date.parse(appointment.end ?? '') <= Date.now()) {
    return fail(409, 'invalid_state', 'This visit is over', { state: 'past' });
  }
  const holding = ahead(heldSlot(medplum, appointment));
  const visiting = ahead(visitOfAppointment(medplum, appointment, her));
  const rebooking = ahead(bookingTask(medplum, appointment, her));
  const segments = await segmentsOf(medplum, appointment);
  if (segments.some((s) => s.status !== 'planned')) {
    return fail(409, 'invalid_state', 'This visit has started', { state: 'in-progress' });
  }
  const slot = await holding;
  const entries: BundleEntry[] = [
    {
      resource: {
        ...appointment,
        status: 'cancelled',
        cancelationReason: {
          coding: [{ system: CANCELLATION_REASONS, code: 'pat-cpp' }],
          text: 'cancelled by the patient',
        },
      },
      request: { method: 'PUT', url: `Appointment/${appointment.id}`, ifMatch: `W/"${appointment.meta?.versionId}"` },
    },
    ...(slot ? [freeSlot(slot)] : []),
    ...segments.map(cancelEncounter),
  ];
  // Re-issued while her plan still asks for this visit: a new schedule-visit task like the one that booked it.
  const visit = await visiting;
  const booked = visit ? await rebooking : undefined;
  if (visit && booked && !(await visitStillBooked(medplum, appointment, her))) {
    const { id: _id, meta, output: _output, executionPeriod: _period, lastModified: _modified, ...rest } = booked;
    entries.push({
      resource: {
        ...rest,
        meta: { tag: meta?.tag },
        status: 'ready',
        authoredOn: new Date().toISOString(),
      } as Task,
      request: { method: 'POST', url: 'Task' },
    });
  }
  try {
    const response = await medplum.executeBatch(transaction(entries));
    return appointmentView(
      medplum,
      response.entry?.[0]?.resource as Appointment,
      false,
      writtenSegments(response, segments.length, 'cancelled'),
    );
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    const now = await ownAppointment(medplum, appointment.id, patient.id);
    return now?.status === 'cancelled'
      ? appointmentView(medplum, now, false)
      : fail(409, 'invalid_state', 'This visit changed while it was being cancelled; try again', {
          state: now?.status ?? 'unknown',
        });
  }
}

// ------------------------------------------------------------------ start a segment

async function startSegment(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  appointment: Appointment & { id: string },
  segment: string | undefined,
): Promise<AppointmentsResult> {
  if (appointment.status !== 'booked' && appointment.status !== 'arrived') {
    return fail(409, 'invalid_state', `This visit is ${appointment.status}`, { state: appointment.status });
  }
  // The licence and the gate are asked now, beside the segments (fewer round trips), and believed in turn below.
  const practitioner = appointment.participant?.find((p) => p.actor?.reference?.startsWith('Practitioner/'))?.actor
    ?.reference;
  const licensing = ahead(
    practitioner ? practitionerLicensed(medplum, practitioner, patient) : Promise.resolve(undefined),
  );
  const gating = ahead(
    requireAgreements(medplum, patient.id, {
      ...(appointment.supportingInformation?.[0]?.reference?.startsWith('CarePlan/')
        ? { carePlan: appointment.supportingInformation[0].reference }
        : {}),
    }),
  );
  const { unfinished, chosen } = segmentChosen(await segmentsOf(medplum, appointment), segment);
  if (!chosen) {
    return segment
      ? contextNotFound()
      : fail(409, 'invalid_state', 'Every segment of this visit is done', { state: 'finished' });
  }
  if (chosen.status === 'in-progress') {
    return resumed(appointment, chosen);
  }
  if (chosen !== unfinished || chosen.status !== 'planned') {
    return fail(409, 'invalid_state', 'Only the next unfinished segment can be started', {
      state: chosen.status,
      ...(unfinished ? { next: `Encounter/${unfinished.id}` } : {}),
    });
  }
  const now = Date.now();
  const opensAt = Date.parse(appointment.start ?? '') - JOIN_EARLY_MS;
  if (!(now >= opensAt && now <= Date.parse(appointment.end ?? ''))) {
    return fail(409, 'invalid_state', 'This visit is not open now', {
      state: 'not-open',
      opensAt: new Date(opensAt).toISOString(),
    });
  }
  // Licensed where she is at the time of care (her record's address now), not only when she booked.
  if (practitioner && (await licensing) === false) {
    return notLicensed(patient, practitioner, `POST /v1/appointments/${appointment.id}/reschedule`);
  }
  const gate = await gating;
  if (gate) {
    return gate;
  }
  const startedAt = new Date(now).toISOString();
  // Where she was when care began, as her record said (the licence checked above was for it).
  const jurisdiction = jurisdictionOf(patient);
  const entries: BundleEntry[] = [
    {
      resource: {
        ...chosen,
        status: 'in-progress',
        period: { start: startedAt },
        ...(jurisdiction
          ? {
              extension: [
                ...(chosen.extension ?? []),
                {
                  url: EXTENSIONS.patientJurisdiction,
                  valueCodeableConcept: { coding: [{ system: SYSTEMS.jurisdiction, code: jurisdiction }] },
                },
              ],
            }
          : {}),
      },
      request: { method: 'PUT', url: `Encounter/${chosen.id}`, ifMatch: `W/"${chosen.meta?.versionId}"` },
    },
  ];
  if (appointment.status === 'booked') {
    entries.push({
      resource: { ...appointment, status: 'arrived' },
      request: { method: 'PUT', url: `Appointment/${appointment.id}`, ifMatch: `W/"${appointment.meta?.versionId}"` },
    });
  }
  try {
    const response = await medplum.executeBatch(transaction(entries));
    const started = response.entry?.[0]?.resource as Encounter;
    return { ok: true, appointment: `Appointment/${appointment.id}`, segment: segmentView(started), resumed: false };
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // Started by a concurrent call: resumed.
    const again = (await medplum.readResource('Encounter', chosen.id as string)) as Encounter;
    return again.status === 'in-progress'
      ? resumed(appointment, again)
      : fail(409, 'invalid_state', 'This segment changed while it was being started', { state: again.status });
  }
}

// ------------------------------------------------------------------ shared

/**
 * 409 `not_licensed`: the practitioner is not licensed where she lives now (her record's address), so this
 * care cannot happen with them; `details.use` says what she can do instead.
 */
function notLicensed(patient: Patient, practitioner: string, use: string) {
  return fail(409, 'not_licensed', 'This practitioner is not licensed where you live now', {
    state: jurisdictionOf(patient),
    practitioner,
    use,
  });
}

interface Visit {
  request: ServiceRequest & { id: string };
  plan: CarePlan & { id: string };
}

/** The visit a schedule-visit task books: its request (hers, active) in an active plan of hers. */
async function visitOf(medplum: MedplumClient, task: Task, her: string): Promise<Visit | undefined> {
  return visitFrom(medplum, task.focus?.reference, her);
}

async function visitOfAppointment(
  medplum: MedplumClient,
  appointment: Appointment,
  her: string,
): Promise<Visit | undefined> {
  return visitFrom(medplum, appointment.basedOn?.[0]?.reference, her);
}

async function visitFrom(
  medplum: MedplumClient,
  reference: string | undefined,
  her: string,
): Promise<Visit | undefined> {
  const [type, id] = (reference ?? '').split('/');
  const request =
    type === 'ServiceRequest' && id
      ? ((await medplum.readResource('ServiceRequest', id).catch(absent)) as
          | (ServiceRequest & { id: string })
          | undefined)
      : undefined;
  if (request?.subject?.reference !== her || request.status !== 'active') {
    return undefined;
  }
  const [planType, planId] = (request.basedOn?.[0]?.reference ?? '').split('/');
  const plan =
    planType === 'CarePlan' && planId
      ? ((await medplum.readResource('CarePlan', planId).catch(absent)) as (CarePlan & { id: string }) | undefined)
      : undefined;
  return plan?.subject?.reference === her && plan.status === 'active' ? { request, plan } : undefined;
}

/** A slot she may book, free now; else 404 (not hers to book) or 409 `slot_unavailable`. */
async function bookableSlot(
  medplum: MedplumClient,
  slotId: string,
  patient: Patient,
): Promise<{ ok: true; slot: Slot & { id: string }; practitioner: string } | ReturnType<typeof fail>> {
  const slot = (await medplum.readResource('Slot', slotId).catch(absent)) as (Slot & { id: string }) | undefined;
  const whose = slot ? await slotLicensure(medplum, slot, patient) : undefined;
  if (!slot || !whose) {
    return contextNotFound();
  }
  if (!whose.licensed) {
    return notLicensed(patient, whose.practitioner, 'GET /v1/availability');
  }
  const practitioner = whose.practitioner;
  if (
    !slot.serviceType?.some((s) => s.coding?.some((c) => c.system === SYSTEMS.visitType && c.code === 'video-visit'))
  ) {
    return fail(400, 'invalid_request', 'This slot is for another kind of visit', {
      issues: [{ path: 'slot', message: 'not a video-visit slot' }],
    });
  }
  if (slot.status !== 'free' || Date.parse(slot.start) <= Date.now()) {
    return fail(409, 'slot_unavailable', 'This slot is no longer free', { slot: `Slot/${slot.id}` });
  }
  return { ok: true, slot, practitioner };
}

/** Her name as the practitioner's calendar shows it (the Provider app titles a visit by its patient's display). */
const nameOf = (patient: Patient): string | undefined => {
  const name = patient.name?.[0];
  return name ? formatHumanName(name) || undefined : undefined;
};

function appointmentFor(
  slot: Slot,
  practitioner: string,
  her: { reference: string; display?: string },
  visit: Visit,
  tags: NonNullable<Appointment['meta']>['tag'],
): Appointment {
  return {
    resourceType: 'Appointment',
    meta: { tag: tags },
    status: 'booked',
    serviceType: slot.serviceType,
    start: slot.start,
    end: slot.end,
    created: new Date().toISOString(),
    slot: [{ reference: `Slot/${slot.id}` }],
    basedOn: [{ reference: `ServiceRequest/${visit.request.id}` }],
    supportingInformation: [{ reference: `CarePlan/${visit.plan.id}` }],
    participant: [
      { actor: her.display ? her : { reference: her.reference }, status: 'accepted' },
      { actor: { reference: practitioner }, status: 'accepted' },
    ],
    extension: [{ url: EXTENSIONS.visitModality, valueCode: 'sync' }],
  };
}

/**
 * An asynchronous review: no slot; booked from now for its review window, her care team's (a participant
 * by type: R4's Appointment cannot name a CareTeam as actor).
 */
function reviewFor(her: string, visit: Visit, tags: NonNullable<Appointment['meta']>['tag']): Appointment {
  const now = Date.now();
  return {
    resourceType: 'Appointment',
    meta: { tag: tags },
    status: 'booked',
    serviceType: [{ coding: [{ system: SYSTEMS.visitType, code: 'async-review' }] }],
    start: new Date(now).toISOString(),
    end: new Date(now + VISIT_TYPES['async-review'].reviewHours * 3_600_000).toISOString(),
    created: new Date(now).toISOString(),
    basedOn: [{ reference: `ServiceRequest/${visit.request.id}` }],
    supportingInformation: [{ reference: `CarePlan/${visit.plan.id}` }],
    participant: [
      { actor: { reference: her }, status: 'accepted' },
      { type: [{ text: 'care team' }], status: 'needs-action' },
    ],
    extension: [{ url: EXTENSIONS.visitModality, valueCode: 'async' }],
  };
}

/**
 * The care team's review of an asynchronous visit: a task in her tenant's queue about the visit (its
 * focus), due when the review window ends (`restriction.period.end`, which the Provider app shows as its due
 * date); the clinician who takes it and completes it fulfils the visit (bots/visit-review.ts).
 */
function asyncReviewTask(
  patient: Patient & { id: string },
  queue: CareTeam | undefined,
  appointment: string,
  visit: Appointment,
  tags: NonNullable<Appointment['meta']>['tag'],
): BundleEntry {
  const entry = clinicianTask({
    code: ASYNC_REVIEW,
    description: 'Review what the patient sent for her asynchronous visit before its review window ends (the due date)',
    patient,
    queue,
    focus: { reference: appointment },
    tags,
    due: visit.end,
  });
  return entry;
}

/**
 * A segment of her visit (an Encounter), and for a live one its practitioner's note (issue 48): the chart
 * note Medplum's Provider app writes on the encounter's page, a ClinicalImpression `in-progress` about her
 * and the segment, its assessor the practitioner (the app makes one with its own visits, and shows the
 * note's box only when one exists). She writes it, and signs it there (docs/clinicians.md).
 */
function encounterEntry(
  appointment: string,
  her: string,
  practitioner: string | undefined,
  request: ServiceRequest,
  position: number,
  purpose: string,
  tags: NonNullable<Encounter['meta']>['tag'],
): BundleEntry[] {
  const episode = tags?.find((t) => t.system === SYSTEMS.episode)?.code;
  const encounterUrl = `urn:uuid:${randomUUID()}`;
  const encounter: Encounter = {
    resourceType: 'Encounter',
    meta: { tag: tags },
    status: 'planned',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'VR', display: 'virtual' },
    subject: { reference: her },
    appointment: [{ reference: appointment }],
    basedOn: [{ reference: `ServiceRequest/${request.id}` }],
    ...(episode ? { episodeOfCare: [{ reference: episode }] } : {}),
    type: [{ text: purpose }],
    ...(practitioner ? { participant: [{ individual: { reference: practitioner } }] } : {}),
    extension: [{ url: EXTENSIONS.segmentPosition, valueInteger: position }],
  };
  const note = practitioner ? visitNote(encounterUrl, her, practitioner, purpose, tags) : undefined;
  return [
    { fullUrl: encounterUrl, resource: encounter, request: { method: 'POST', url: 'Encounter' } },
    ...(note ? [{ resource: note, request: { method: 'POST' as const, url: 'ClinicalImpression' } }] : []),
  ];
}

const takeSlot = (slot: Slot): BundleEntry => ({
  resource: { ...slot, status: 'busy' },
  request: { method: 'PUT', url: `Slot/${slot.id}`, ifMatch: `W/"${slot.meta?.versionId}"` },
});

const freeSlot = (slot: Slot): BundleEntry => ({
  resource: { ...slot, status: 'free' },
  request: { method: 'PUT', url: `Slot/${slot.id}`, ifMatch: `W/"${slot.meta?.versionId}"` },
});

const cancelEncounter = (encounter: Encounter): BundleEntry => ({
  resource: { ...encounter, status: 'cancelled' },
  request: { method: 'PUT', url: `Encounter/${encounter.id}`, ifMatch: `W/"${encounter.meta?.versionId}"` },
});

const transaction = (entry: BundleEntry[]): Bundle => ({ resourceType: 'Bundle', type: 'transaction', entry });

/** Her appointment (she is a participant), or undefined. */
async function bookingTask(medplum: MedplumClient, appointment: Appointment, her: string): Promise<Task | undefined> {
  const tasks = await searchAll(medplum, 'Task', {
    code: `${SYSTEMS.taskKind}|schedule-visit`,
    focus: appointment.basedOn?.[0]?.reference ?? '',
    subject: her,
  });
  return tasks.find((t) => t.for?.reference === her);
}

/** The Slot an Appointment holds: a Slot, busy; else undefined (nothing to free). */
async function heldSlot(medplum: MedplumClient, appointment: Appointment): Promise<Slot | undefined> {
  const [type, id] = (appointment.slot?.[0]?.reference ?? '').split('/');
  const slot =
    type === 'Slot' && id ? ((await medplum.readResource('Slot', id).catch(absent)) as Slot | undefined) : undefined;
  return slot?.resourceType === 'Slot' && slot.status === 'busy' ? slot : undefined;
}

/**
 * Whether the visit is otherwise in hand: another booked or started Appointment of it, or a ready task to
 * book it. Then cancelling this one re-issues nothing (one visit is never booked twice).
 */
async function visitStillBooked(medplum: MedplumClient, appointment: Appointment, her: string): Promise<boolean> {
  const request = appointment.basedOn?.[0]?.reference ?? '';
  const others = (await searchAll(medplum, 'Appointment', { patient: her, 'based-on': request })).filter(
    (a) => a.id !== appointment.id && (a.status === 'booked' || a.status === 'arrived'),
  );
  const ready = (
    await searchAll(medplum, 'Task', { code: `${SYSTEMS.taskKind}|schedule-visit`, focus: request, subject: her })
  ).filter((t) => t.status === 'ready');
  return others.length > 0 || ready.length > 0;
}

/** The segments of a visit, in position order. */
/**
 * The segments a transaction wrote (created or changed), when its answer holds all `count` of them in
 * that status; else undefined (they are read back).
 */
function writtenSegments(
  response: Bundle,
  count: number,
  status?: Encounter['status'],
): (Encounter & { id: string })[] | undefined {
  const written = (response.entry ?? [])
    .map((e) => e.resource)
    .filter(
      (r): r is Encounter & { id: string } => r?.resourceType === 'Encounter' && (!status || r.status === status),
    );
  return written.length === count ? written : undefined;
}
