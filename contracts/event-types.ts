/** Her events' types (contracts/events.ts): zod-free, so the bots that read events carry no zod. */

/**
 * What each event says happened, by the state the change left her record in. A record that changes again
 * appears again, with its new state: an event is one version of one of her records.
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
  /** A visit has begun (she joined, or a segment started). */
  'visit.started',
  'visit.fulfilled',
  /**
   * Her care team wrote to her: a message in one of her threads (`GET /v1/messages/{thread}`), by the
   * clinician it names as its sender, in her own name.
   */
  'message.received',
  /** An agreement of her care provider was published or changed: ask `GET /v1/agreements/requirements`. */
  'agreements.changed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
