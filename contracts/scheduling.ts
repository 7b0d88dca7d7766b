import { createRoute, z } from '@hono/zod-openapi';
import { DATE_OR_INSTANT_PATTERN, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { referenceTo } from './tasks';

/** An instant with its offset (`2026-12-01T09:00:00-08:00`, `…Z`), or a date (its UTC midnight). */
const Instant = z.string().regex(DATE_OR_INSTANT_PATTERN).max(40);

export const AvailabilityQuerySchema = z
  .object({
    careTeam: referenceTo('CareTeam').optional().openapi({
      description: 'A visit team of her care provider: its members’ slots. Exactly one of `careTeam`, `practitioner`.',
    }),
    practitioner: referenceTo('Practitioner')
      .optional()
      .openapi({ description: 'One practitioner of her care provider: her slots.' }),
    start: Instant.openapi({
      description: 'Window start (inclusive): a slot starting at or after it.',
      example: '2026-12-01T00:00:00-08:00',
    }),
    end: Instant.openapi({
      description: 'Window end (exclusive), after `start` and at most 31 days later.',
      example: '2026-12-15T00:00:00-08:00',
    }),
    visitType: z.enum(['video-visit']).optional().openapi({
      description:
        'The kind of visit (default `video-visit`, live, one 30-minute slot). An asynchronous review takes no slot, so it has no availability.',
    }),
    view: z.enum(['slots', 'days']).optional().openapi({
      description:
        '`slots` (default): the free slots, in start order, paged. `days`: the number of free slots per local date, for a calendar.',
    }),
    timezone: z.string().max(64).optional().openapi({
      description: 'An IANA time zone (`America/Los_Angeles`): the local dates of the `days` view (required there).',
      example: 'America/Los_Angeles',
    }),
    count: z
      .string()
      .regex(/^[1-9][0-9]{0,2}$/)
      .optional()
      .openapi({ description: 'Slots per page, 1 to 200 (default 50).', example: '50' }),
    cursor: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/)
      .optional()
      .openapi({ description: 'The `next` of the previous page (opaque).' }),
  })
  .strict();

export const AvailableSlotSchema = z
  .object({
    slot: referenceTo('Slot').openapi({ description: 'What booking names.' }),
    start: z.string(),
    end: z.string(),
    practitioner: referenceTo('Practitioner'),
    visitType: z.enum(['video-visit']),
    modality: z.enum(['sync', 'async']),
  })
  .openapi('AvailableSlot');

export const AvailabilitySchema = z
  .object({
    view: z.enum(['slots', 'days']),
    slots: z.array(AvailableSlotSchema).optional().openapi({ description: 'The `slots` view.' }),
    next: z
      .string()
      .optional()
      .openapi({ description: 'The `slots` view: the cursor of the next page, when there is one.' }),
    timezone: z.string().optional(),
    days: z
      .array(z.object({ date: z.string().openapi({ example: '2026-12-01' }), count: z.number().int() }))
      .optional()
      .openapi({ description: 'The `days` view: every local date the window touches, in order, with its free slots.' }),
  })
  .openapi('Availability');

export const availabilityRoute = createRoute({
  method: 'get',
  path: '/v1/availability',
  operationId: 'availability.get',
  tags: ['Scheduling'],
  summary: 'Free visit slots, or per-day counts',
  description:
    "Free slots of her care provider's practitioners for a kind of visit, in a window: of a visit team (`careTeam`) or of one practitioner (`practitioner`), only practitioners licensed in her state (her address). Slots are real resources (`Slot/<id>`), so booking names one. `view=slots` lists them in start order, `count` a page, `next` for the following page; `view=days` counts them per local date in `timezone` (a calendar), every date the window touches, day boundaries by that zone's wall clock (daylight-saving changes included), so the counts add up to the slots of the same window. 400 when: neither or both of `careTeam` and `practitioner`; `start` or `end` not a date or instant of a year from 1900 to 2199; `end` not after `start` or more than 31 days later; `days` without a known `timezone`. A team or practitioner that is not her care provider's: 404. A practitioner of hers not licensed in her state has no slots for her (200, empty). Her address without a country or state: 409 `invalid_state`, `details.missing` naming what to give and `details.fix` the call that gives it.",
  security: secured,
  request: { query: AvailabilityQuerySchema },
  responses: {
    200: { description: 'Availability.', content: { 'application/json': { schema: AvailabilitySchema } } },
    ...errorResponses(400, 404, 409, ...SECURED_STATUSES),
  },
});
