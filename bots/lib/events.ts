import type { Appointment, Communication, DocumentReference, Resource, Task } from '@medplum/fhirtypes';
import type { EventType } from '../../contracts/event-types';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { isHerTask } from './finished';
import { taskKind } from './journey';

/**
 * What one version of one of her records says happened (contracts/events.ts): the one reading of her
 * records that her event feed (src/events/feed.ts) and the webhooks bot (bots/webhooks.ts) share, so an
 * app hears the same events, with the same ids, from either.
 */

/** The resource types events come from. */
export type EventResourceType = 'Task' | 'Appointment' | 'DocumentReference' | 'Communication';

export interface EventReading {
  type: EventType;
  kind?: string;
}

/**
 * Whether a reference names a person (a patient, a practitioner, a related person), as opposed to the
 * platform (a bot, a machine client): what a person writes is never an event the platform tells, and never
 * a caller of the platform's scheduled work.
 */
export const isPerson = (reference: string | undefined): boolean =>
  /^(Patient|Practitioner|RelatedPerson)\//.test(reference ?? '');

const TASK_STATES: Partial<Record<NonNullable<Task['status']>, [EventType, EventType]>> = {
  ready: ['task.ready', 'offer.ready'],
  cancelled: ['task.withdrawn', 'offer.revoked'],
  completed: ['task.completed', 'offer.answered'],
};

const READINGS: Record<EventResourceType, (resource: Resource, patientId: string) => EventReading | undefined> = {
  Task: (resource, patientId) => {
    const task = resource as Task;
    // Only what the platform issued her and wrote (its tag, her as its subject, and this version written
    // by a Bot, as Medplum stamps it: a tag is data).
    if (!isHerTask(task, patientId) || !task.status || !task.meta?.author?.reference?.startsWith('Bot/')) {
      return undefined;
    }
    const kind = taskKind(task);
    const types = TASK_STATES[task.status];
    if (!kind || !types) {
      return undefined;
    }
    return { type: types[kind === 'treatment-offer' ? 1 : 0], kind };
  },
  // A visit's change as the platform decided it: versions its bots wrote (booking, moving, cancelling,
  // a segment started, the visit fulfilled once every segment is finished). A practitioner's own mark of
  // `fulfilled` (Medplum's app marks it as it finishes any segment) is not one.
  Appointment: (resource, patientId) => {
    const visit = resource as Appointment;
    if (
      !visit.participant?.some((p) => p.actor?.reference === `Patient/${patientId}`) ||
      !visit.meta?.author?.reference?.startsWith('Bot/')
    ) {
      return undefined;
    }
    if (visit.status === 'fulfilled' && !visit.extension?.some((e) => e.url === EXTENSIONS.visitFulfilled)) {
      return undefined;
    }
    switch (visit.status) {
      case 'booked':
        return { type: 'visit.booked' };
      case 'arrived':
        return { type: 'visit.started' };
      case 'fulfilled':
        return { type: 'visit.fulfilled' };
      case 'cancelled':
        return {
          type: visit.cancelationReason?.coding?.some(
            (c) => c.system === SYSTEMS.cancelReason && c.code === 'rescheduled',
          )
            ? 'visit.moved'
            : 'visit.cancelled',
        };
      default:
        return undefined;
    }
  },
  // A message to her in a thread, from a clinician who wrote it herself (Medplum stamps the writer as the
  // version's author: a sender is data), the version that sent it (a later change, such as a colleague's
  // edit of its thread, is not a second message).
  Communication: (resource, patientId) => {
    const message = resource as Communication;
    const her = `Patient/${patientId}`;
    const sender = message.sender?.reference;
    return message.partOf?.length &&
      message.sent &&
      message.subject?.reference === her &&
      message.recipient?.some((r) => r.reference === her) &&
      sender?.startsWith('Practitioner/') &&
      message.meta?.author?.reference === sender &&
      !message.received
      ? { type: 'message.received' }
      : undefined;
  },
  // Her care provider's agreements (and the platform's) as her policy lets her read them: published ones,
  // as the platform wrote them (provisioning's client, a bot), never a version a person wrote.
  DocumentReference: (resource) =>
    (resource as DocumentReference).identifier?.some((i) => i.system === SYSTEMS.agreement) &&
    !isPerson(resource.meta?.author?.reference ?? 'Patient/')
      ? { type: 'agreements.changed' }
      : undefined,
};

export const EVENT_RESOURCE_TYPES = Object.keys(READINGS) as EventResourceType[];

/** What this version of a record says happened to the patient, if anything. */
export function eventOf(resource: Resource, patientId: string): EventReading | undefined {
  const read = READINGS[resource.resourceType as EventResourceType];
  return read ? read(resource, patientId) : undefined;
}

/** An event's id: the version it is (`Task/<id>/_history/<versionId>`), the same wherever it is heard. */
export const eventId = (resource: Resource & { id: string; meta: { versionId: string } }): string =>
  `${resource.resourceType}/${resource.id}/_history/${resource.meta.versionId}`;

/** The patient a record of an event is about: a task's subject, a visit's patient participant. */
export function patientOf(resource: Resource): string | undefined {
  const reference =
    resource.resourceType === 'Task'
      ? resource.for?.reference
      : resource.resourceType === 'Appointment'
        ? resource.participant?.find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor?.reference
        : resource.resourceType === 'Communication'
          ? resource.subject?.reference
          : undefined;
  return reference?.startsWith('Patient/') ? reference.slice('Patient/'.length) : undefined;
}
