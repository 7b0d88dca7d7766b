import type { MedplumClient } from '@medplum/core';
import type { Appointment, ClinicalImpression, Encounter, Task } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import { searchAll } from './search';

/**
 * A patient's visits as her appointments workflow answers them (bots/appointments.ts), from her
 * Appointment and its segments (Encounters). The gateway answers repeats of finished visit work from
 * her own reads with the same functions (src/medplum/finished-work.ts). No Node built-in
 * here: the gateway also runs as a Worker.
 */

export interface SegmentView {
  encounter: string;
  position: number;
  purpose: string;
  status: string;
}

export interface AppointmentView {
  appointment: string;
  status: 'booked' | 'arrived' | 'fulfilled' | 'cancelled';
  start: string;
  end: string;
  practitioner?: string;
  modality: 'sync' | 'async';
  carePlan?: string;
  replaces?: string;
  segments: SegmentView[];
}

/** Her Appointment by id, if the platform made it (a bot wrote it); else undefined. */
export async function ownAppointment(
  medplum: MedplumClient,
  id: string,
  patientId: string,
): Promise<(Appointment & { id: string }) | undefined> {
  const appointment = id
    ? ((await medplum.readResource('Appointment', id).catch(absent)) as (Appointment & { id: string }) | undefined)
    : undefined;
  // Hers, and the platform's: only the bots create Appointments (policy), and a write carries its author
  // (Medplum stamps meta.author, packages/server/src/fhir/repo.ts); a clinician may only mark her own
  // visit fulfilled (the Provider app's write), so a Practitioner's version is still the platform's visit.
  const author = appointment?.meta?.author?.reference ?? '';
  return appointment?.participant?.some((p) => p.actor?.reference === `Patient/${patientId}`) &&
    (author.startsWith('Bot/') || author.startsWith('Practitioner/'))
    ? appointment
    : undefined;
}

/** The Appointment that replaced a rescheduled one, hers. */
export async function replacementOf(
  medplum: MedplumClient,
  original: Appointment,
  her: string,
): Promise<(Appointment & { id: string }) | undefined> {
  const candidates = await searchAll(medplum, 'Appointment', {
    patient: her,
    'based-on': original.basedOn?.[0]?.reference ?? '',
  });
  return candidates.find((a) =>
    a.extension?.some(
      (e) => e.url === EXTENSIONS.appointmentReplaces && e.valueReference?.reference === `Appointment/${original.id}`,
    ),
  ) as (Appointment & { id: string }) | undefined;
}

/** The schedule-visit task that booked an appointment (or the one that booked what it replaced). */

export async function segmentsOf(
  medplum: MedplumClient,
  appointment: Appointment,
): Promise<(Encounter & { id: string })[]> {
  return ownSegments(appointment, await encountersOf(medplum, appointment.id as string));
}

export const encountersOf = async (medplum: MedplumClient, appointmentId: string) =>
  (await searchAll(medplum, 'Encounter', { appointment: `Appointment/${appointmentId}` })) as (Encounter & {
    id: string;
  })[];

/** The platform's segments of a visit among Encounters naming it, in position order. */
export function ownSegments(
  appointment: Appointment,
  encounters: (Encounter & { id: string })[],
): (Encounter & { id: string })[] {
  // Only the segments the platform made for this visit: hers, of its request, at a position (an
  // Encounter naming the appointment is otherwise data anyone with an Encounter write could have made).
  const her = appointment.participant?.find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor?.reference;
  const request = appointment.basedOn?.[0]?.reference;
  return encounters
    .filter(
      (e) =>
        e.subject?.reference === her &&
        e.basedOn?.some((b) => b.reference === request) &&
        Number.isInteger(positionOf(e)) &&
        positionOf(e) >= 1 &&
        positionOf(e) <= 100,
    )
    .sort((a, b) => positionOf(a) - positionOf(b));
}

export const positionOf = (e: Encounter): number =>
  e.extension?.find((x) => x.url === EXTENSIONS.segmentPosition)?.valueInteger ?? Number.MAX_SAFE_INTEGER;
export const purposeOf = (e: Encounter): string => e.type?.[0]?.text ?? 'Visit';

export const segmentView = (e: Encounter): SegmentView => ({
  encounter: `Encounter/${e.id}`,
  position: positionOf(e),
  purpose: purposeOf(e),
  status: e.status,
});

export async function appointmentView(
  medplum: MedplumClient,
  appointment: Appointment,
  created: boolean,
  /** Its Encounters as a transaction just wrote them; read when not given. */
  written?: (Encounter & { id: string })[],
): Promise<{ ok: true; created: boolean } & AppointmentView> {
  const segments = written ? ownSegments(appointment, written) : await segmentsOf(medplum, appointment);
  const practitioner = appointment.participant?.find((p) => p.actor?.reference?.startsWith('Practitioner/'))?.actor
    ?.reference;
  const replaces = appointment.extension?.find((e) => e.url === EXTENSIONS.appointmentReplaces)?.valueReference
    ?.reference;
  const carePlan = appointment.supportingInformation?.find((r) => r.reference?.startsWith('CarePlan/'))?.reference;
  return {
    ok: true,
    created,
    appointment: `Appointment/${appointment.id}`,
    status: appointment.status as AppointmentView['status'],
    start: appointment.start as string,
    end: appointment.end as string,
    ...(practitioner ? { practitioner } : {}),
    modality: (appointment.extension?.find((e) => e.url === EXTENSIONS.visitModality)?.valueCode ?? 'sync') as
      | 'sync'
      | 'async',
    ...(carePlan ? { carePlan } : {}),
    ...(replaces ? { replaces } : {}),
    segments: segments.map(segmentView),
  };
}

/** A schedule-visit task: what `POST /v1/appointments` books. */
export const isVisitTask = (task: Task): boolean =>
  task.code?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'schedule-visit') ?? false;

/** The Appointment a completed schedule-visit task booked (its output). */
export const bookedBy = (task: Task): string =>
  task.output?.find((o) => o.type.text === 'appointment')?.valueReference?.reference ?? '';

/** The segment a call to start one names (else her next unfinished one), and that next unfinished one. */
export function segmentChosen<T extends Encounter>(segments: T[], named: string | undefined) {
  const unfinished = segments.find((s) => s.status === 'planned' || s.status === 'in-progress');
  return { unfinished, chosen: named ? segments.find((s) => `Encounter/${s.id}` === named) : unfinished };
}

/** A segment already in progress, as starting it again answers: resumed. */
export const resumed = (appointment: Appointment, segment: Encounter) =>
  ({ ok: true, appointment: `Appointment/${appointment.id}`, segment: segmentView(segment), resumed: true }) as const;

/**
 * A live segment's note for its practitioner (issue 48): the ClinicalImpression Medplum's Provider app
 * finds on the encounter's page (`ClinicalImpression?encounter=`) and lets her write, sign and lock, as it
 * makes one with its own visits. Empty, `in-progress`, about her and the segment, its assessor the
 * practitioner (the only clinician who may write it: the clinician policy's OWN_NOTE_ONLY).
 */
export function visitNote(
  encounter: string,
  her: string,
  practitioner: string,
  purpose: string,
  tags?: NonNullable<ClinicalImpression['meta']>['tag'],
): ClinicalImpression {
  return {
    resourceType: 'ClinicalImpression',
    ...(tags?.length ? { meta: { tag: tags } } : {}),
    status: 'in-progress',
    description: `Visit note: ${purpose}`,
    subject: { reference: her },
    encounter: { reference: encounter },
    assessor: { reference: practitioner },
    date: new Date().toISOString(),
  };
}
