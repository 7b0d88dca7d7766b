import { createRoute, z } from '@hono/zod-openapi';
import { IdParam, secured } from './common';
import { errorResponses, SECURED_STATUSES, withExample } from './errors';
import { referenceTo } from './tasks';

export const BookRequestSchema = z
  .object({
    task: referenceTo('Task').openapi({ description: 'Her `schedule-visit` task (what the plan issued).' }),
    slot: referenceTo('Slot').optional().openapi({
      description:
        'A free slot of `GET /v1/availability`: required for a live visit, absent for an asynchronous review (it takes no slot).',
    }),
  })
  .strict()
  .openapi('BookRequest', {
    example: {
      task: 'Task/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      slot: 'Slot/7a1e3b9c-2d4f-4e6a-8b0c-1d2e3f4a5b6c',
    },
  });

export const RescheduleRequestSchema = z
  .object({ slot: referenceTo('Slot').openapi({ description: 'The new slot, free (`GET /v1/availability`).' }) })
  .strict()
  .openapi('RescheduleRequest', { example: { slot: 'Slot/7a1e3b9c-2d4f-4e6a-8b0c-1d2e3f4a5b6c' } });

export const EncounterRequestSchema = z
  .object({
    segment: referenceTo('Encounter')
      .optional()
      .openapi({ description: 'The segment to start; omitted: the next unfinished one.' }),
  })
  .strict()
  .openapi('EncounterRequest', { example: {} });

export const SegmentSchema = z
  .object({
    encounter: referenceTo('Encounter'),
    position: z.number().int().openapi({ description: 'From 1, in the visit’s declared order.' }),
    purpose: z.string(),
    status: z.string().openapi({ description: '`planned`, `in-progress` (started), `finished`, `cancelled`.' }),
  })
  .openapi('Segment');

export const AppointmentSchema = z
  .object({
    appointment: referenceTo('Appointment'),
    status: z.enum(['booked', 'arrived', 'fulfilled', 'cancelled']).openapi({
      description:
        '`booked`; `arrived` once a segment has started; `fulfilled` once every segment is finished (the next visit of a repeating plan is then a new task); `cancelled` (by her, or moved: see `replaces` on the new one).',
    }),
    start: z.string(),
    end: z.string(),
    practitioner: referenceTo('Practitioner')
      .optional()
      .openapi({ description: 'A live visit: who holds it. An asynchronous review is her care team’s.' }),
    modality: z.enum(['sync', 'async']),
    carePlan: referenceTo('CarePlan').optional(),
    replaces: referenceTo('Appointment')
      .optional()
      .openapi({ description: 'A rescheduled visit: the Appointment it replaces (cancelled, reason `rescheduled`).' }),
    segments: z.array(SegmentSchema),
  })
  .openapi('Appointment');

export const EncounterAnswerSchema = z
  .object({
    appointment: referenceTo('Appointment'),
    segment: SegmentSchema,
    resumed: z
      .boolean()
      .openapi({ description: 'True when the segment was already started (this call started nothing).' }),
  })
  .openapi('EncounterAnswer');

const APPOINTMENT_ERRORS = withExample(
  errorResponses(400, 404, 409, 413, 415, ...SECURED_STATUSES),
  409,
  'not_licensed',
  'This practitioner is not licensed where you live now',
  {
    state: 'US-NY',
    practitioner: 'Practitioner/4f4219f7-071f-4ca3-a579-68d859f2c4d6',
    use: 'POST /v1/appointments/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e/reschedule',
  },
);

export const bookRoute = createRoute({
  method: 'post',
  path: '/v1/appointments',
  operationId: 'appointments.book',
  tags: ['Scheduling'],
  summary: 'Book a visit',
  description:
    "Books the visit a `schedule-visit` task of her plan asks for. An asynchronous review (`visitType` `async-review`) takes no slot: it is booked from now for its review window (72 hours), modality `async`, with its segment planned, and her care team gets the review as work in its queue, due at the window's end; when a clinician completes it, the visit is `fulfilled` and its segment `finished`. A live visit takes a free slot, in ONE transaction: the slot `free -> busy` (under If-Match), a `booked` Appointment (modality `sync`, `basedOn` the visit's request, linked to the care plan), its segments as `planned` Encounters in the visit's declared order, and the task completed. A slot taken since it was listed: 409 `slot_unavailable`, nothing written (of two patients booking one slot at once, one gets it). A slot for another kind of visit: 400. The same booking again: 200 with it; another slot for a task already booked: 409 `invalid_state` (reschedule instead). Gated: unmet required agreements -> 409 `consent_required`. A slot of a practitioner of hers not licensed where she lives now (her record's address): 409 `not_licensed` (`details.state`, `details.practitioner`, `details.use`: `GET /v1/availability`, which lists only licensed practitioners). Another patient's task, or a slot she cannot book (another provider's, unknown): 404.",
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: BookRequestSchema } } } },
  responses: {
    201: { description: 'Booked.', content: { 'application/json': { schema: AppointmentSchema } } },
    200: {
      description: 'Already booked on this slot.',
      content: { 'application/json': { schema: AppointmentSchema } },
    },
    ...APPOINTMENT_ERRORS,
  },
});

export const rescheduleRoute = createRoute({
  method: 'post',
  path: '/v1/appointments/{id}/reschedule',
  operationId: 'appointments.reschedule',
  tags: ['Scheduling'],
  summary: 'Reschedule a visit',
  description:
    "Moves a `booked` visit to another free slot in ONE transaction, every write under If-Match: the original Appointment `cancelled` with reason `rescheduled`, a new `booked` Appointment linked to it (`replaces`), the old slot freed and the new one taken, the segments moved (the old ones `cancelled`, new `planned` ones). No in-place move. A stale slot: 409 `slot_unavailable`, nothing changed. A visit already started, or not booked: 409 `invalid_state`. A new slot of a practitioner not licensed where she lives now: 409 `not_licensed`. The same reschedule again: 200 with the new Appointment; of concurrent reschedules of one visit, one wins and the others are 409. Gated. Another patient's appointment: 404.",
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    body: { required: true, content: { 'application/json': { schema: RescheduleRequestSchema } } },
  },
  responses: {
    201: {
      description: 'Rescheduled: the new Appointment.',
      content: { 'application/json': { schema: AppointmentSchema } },
    },
    200: {
      description: 'Already rescheduled onto this slot.',
      content: { 'application/json': { schema: AppointmentSchema } },
    },
    ...APPOINTMENT_ERRORS,
  },
});

export const cancelRoute = createRoute({
  method: 'post',
  path: '/v1/appointments/{id}/cancel',
  operationId: 'appointments.cancel',
  tags: ['Scheduling'],
  summary: 'Cancel a visit',
  description:
    "Cancels a `booked` visit in ONE transaction: the Appointment `cancelled` (reason `pat-cpp`, cancelled by the patient through the portal), its slot freed, its segments `cancelled`; while her plan still asks for the visit, a new `schedule-visit` task is issued for it. Not gated (stopping care never is). Already cancelled: 200. A visit already started: 409 `invalid_state`. Another patient's appointment: 404.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: { description: 'Cancelled.', content: { 'application/json': { schema: AppointmentSchema } } },
    ...errorResponses(400, 404, 409, ...SECURED_STATUSES),
  },
});

export const getAppointmentRoute = createRoute({
  method: 'get',
  path: '/v1/appointments/{id}',
  operationId: 'appointments.get',
  tags: ['Scheduling'],
  summary: 'A visit',
  description:
    "Her visit as the workflow calls answer it, read with her own token: `booked`; `arrived` once a segment has started; `fulfilled` once every segment is finished by the visit's practitioner (in Medplum's Provider app: the encounter's status `Finished`) or, for an asynchronous review, once her care team completes the review; `cancelled`. When a visit is fulfilled its request is completed and, when her plan repeats the visit, the next one to book is a new `schedule-visit` task in `GET /v1/tasks`, not before one period later (`notBefore`). A visit marked fulfilled in the Provider app while segments remain goes back to `arrived` within moments. Another patient's appointment, or one that does not exist: 404.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: {
      description: 'The visit.',
      content: {
        'application/json': {
          schema: AppointmentSchema,
          example: {
            appointment: 'Appointment/7d1c2f0e-9a43-4c55-8f2b-3e6d1a0b9c84',
            status: 'fulfilled',
            start: '2026-12-01T17:00:00.000Z',
            end: '2026-12-01T17:30:00.000Z',
            practitioner: 'Practitioner/4f4219f7-071f-4ca3-a579-68d859f2c4d6',
            modality: 'sync',
            carePlan: 'CarePlan/0b6f3d2a-51c8-4e7d-9a1f-2c3b4d5e6f70',
            segments: [
              {
                encounter: 'Encounter/1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
                position: 1,
                purpose: 'Check-in with a nurse',
                status: 'finished',
              },
              {
                encounter: 'Encounter/2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e',
                position: 2,
                purpose: 'Visit with your clinician',
                status: 'finished',
              },
            ],
          },
        },
      },
    },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

export const segmentsRoute = createRoute({
  method: 'get',
  path: '/v1/appointments/{id}/segments',
  operationId: 'appointments.segments',
  tags: ['Scheduling'],
  summary: 'The segments of a visit',
  description:
    "The visit's segments (Encounters) in declared order, each with its position, purpose and status; read with her own token. Another patient's appointment, or one that does not exist: 404.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: {
      description: 'The segments.',
      content: {
        'application/json': {
          schema: z
            .object({ appointment: referenceTo('Appointment'), segments: z.array(SegmentSchema) })
            .openapi('Segments'),
        },
      },
    },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

export const encounterRoute = createRoute({
  method: 'post',
  path: '/v1/appointments/{id}/encounter',
  operationId: 'appointments.encounter',
  tags: ['Scheduling'],
  summary: 'Start or resume a visit segment',
  description:
    "Starts a segment of her visit (`planned -> in-progress`, under If-Match), or resumes it if it is already started (200, `resumed`, nothing written): the one named, or with no `segment` the next unfinished one. Only the next unfinished segment, or one in progress, can be started; the first start moves the Appointment `booked -> arrived`. Open from 30 minutes before the visit's start until its end; otherwise 409 `invalid_state` (`details.state` `not-open`, `details.opensAt`). A cancelled visit: 409 `invalid_state`. Licensure at the time of care: a live visit starts only while its practitioner is licensed where she lives now (her record's address when she starts), else 409 `not_licensed` (`details.state`, `details.practitioner`, `details.use`: reschedule with a practitioner licensed there), nothing changed; the segment records that jurisdiction (extension `patient-jurisdiction`). A segment already in progress resumes whatever her address says now. Gated: unmet required agreements -> 409 `consent_required`, nothing changed. Another patient's appointment: 404.",
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    body: { required: false, content: { 'application/json': { schema: EncounterRequestSchema } } },
  },
  responses: {
    200: { description: 'Started or resumed.', content: { 'application/json': { schema: EncounterAnswerSchema } } },
    ...APPOINTMENT_ERRORS,
  },
});
