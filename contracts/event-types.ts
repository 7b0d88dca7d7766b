/** Her events' types (contracts/events.ts): zod-free, so the bots that read events carry no zod. */

/**
 * What each event says happened, by the state the change left her record in. A record that changes again
 * appears again, with its new state: an event is one version of one of her records, and only a version the
 * platform decided (bots/lib/events.ts): its workflows' writes, never a clinician's or patient's own edit
 * (a clinician's message excepted, told as hers).
 */
export const EVENT_TYPES = [
  /** A task of hers is ready to do: issued, or changed while ready (its due date, its priority). */
  'task.ready',
  /** A task of hers was withdrawn (cancelled) by the platform or her care team. */
  'task.withdrawn',
  'task.completed',
  /** A treatment offer is ready for her answer (a consent bundle composed by her care team). */
  'offer.ready',
  /** An offer was withdrawn before she answered (declined, superseded by a revised diagnosis). */
  'offer.revoked',
  'offer.answered',
  'visit.booked',
  /** A visit was moved: this Appointment is cancelled as `rescheduled`; the new one is its own `visit.booked`. */
  'visit.moved',
  'visit.cancelled',
  /**
   * A visit has begun (she joined, or a segment started); told again when the platform puts a visit back
   * under way that a practitioner's app marked fulfilled too early.
   */
  'visit.started',
  /** Every segment of the visit finished by its practitioner, as the platform decided (never an app's mark). */
  'visit.fulfilled',
  /**
   * Her care team wrote to her: a message in one of her threads (`GET /v1/messages/{thread}`), by the
   * clinician it names as its sender, in her own name.
   */
  'message.received',
  /**
   * An agreement of her care provider was published or changed by the platform (never a document a person
   * wrote): ask `GET /v1/agreements/requirements`.
   */
  'agreements.changed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
