import { createRoute, z } from '@hono/zod-openapi';
import { INSTANT_PATTERN, onTheCalendar, secured, YEAR_SPAN } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';

/**
 * Her access log (GET /v1/patient/access-log): who opened or changed her records, from Medplum's own
 * AuditEvents (its `saveAuditEvents` setting), read by the `access-log` bot. What Medplum 5.0.10 records
 * decides what is here (docs/medplum-auditevents.md): reads of one record by its id, its history, and
 * every change; never a search or a list (a clinician's task board, a chart's tabs), so those are not here.
 */

import {
  ACCESS_ACTIONS,
  ACCESS_LOG_READS_PER_MINUTE,
  ACCESSOR_KINDS,
  DEFAULT_ACCESS_LOG_ENTRIES,
  MAX_ACCESS_LOG_ENTRIES,
} from './access-log-rules';

export * from './access-log-rules';

/** An instant in UTC of a year from 1900 to 2199, on the calendar (no 30 February). */
const INSTANT = z
  .string()
  .regex(/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?Z$/)
  .regex(INSTANT_PATTERN, `an instant of a year from ${YEAR_SPAN.first} to ${YEAR_SPAN.last}`)
  .refine(onTheCalendar, { message: 'not a date on the calendar' });

export const AccessLogQuerySchema = z
  .object({
    before: INSTANT.optional().openapi({
      description: 'Only entries before this instant (the `next` of the previous page). Without it, the newest.',
      example: '2026-11-28T09:30:00.000Z',
    }),
    limit: z
      .string()
      .regex(/^[1-9][0-9]{0,2}$/)
      .refine((v) => Number(v) <= MAX_ACCESS_LOG_ENTRIES, { message: `at most ${MAX_ACCESS_LOG_ENTRIES}` })
      .optional()
      .openapi({
        description: `Entries per page, 1 to ${MAX_ACCESS_LOG_ENTRIES} (default ${DEFAULT_ACCESS_LOG_ENTRIES}).`,
      }),
  })
  .strict();

export const AccessLogEntrySchema = z
  .object({
    at: z.string().openapi({
      description:
        'When Medplum stored its record of the interaction (its own time; the log is ordered and paged by it).',
    }),
    action: z.enum(ACCESS_ACTIONS),
    resourceType: z
      .string()
      .openapi({ description: 'What kind of record (never its content).', example: 'Observation' }),
    by: z
      .object({
        kind: z.enum(ACCESSOR_KINDS),
        name: z.string().optional().openapi({
          description: 'A clinician’s name (a member of staff who signs in), an application’s name.',
          example: 'Dr. Demo Clinician of Northwind',
        }),
        purpose: z.string().optional().openapi({
          description: 'What the platform was doing (one of its workflows).',
          example: 'Issues her intake review when she completes an assessment.',
        }),
      })
      .strict(),
    count: z.number().int().min(1).openapi({
      description: 'How many times in a row, within the same minute (the same person, action and kind of record).',
    }),
  })
  .strict()
  .openapi('AccessLogEntry');

export const AccessLogSchema = z
  .object({
    entries: z.array(AccessLogEntrySchema),
    next: z.string().optional().openapi({ description: 'Ask again with `before` set to this for older entries.' }),
    scope: z.string().openapi({ description: 'What the log covers and what it cannot (show it with the log).' }),
  })
  .openapi('AccessLog');

export type AccessLog = z.infer<typeof AccessLogSchema>;

export const accessLogRoute = createRoute({
  method: 'get',
  path: '/v1/patient/access-log',
  operationId: 'patient.accessLog',
  tags: ['Session'],
  summary: 'Who opened or changed her records',
  description: [
    'Her access log, newest first: who opened one of her records or changed it, when, what kind of record',
    '(never its content), and who: her care team’s clinicians (and any other member of staff who signs in) by',
    'name, the platform by the workflow it ran, an application by its name, herself. It is read from the records the health record server keeps of',
    'each interaction (Medplum’s AuditEvents), which nobody using the platform can alter or remove; entries',
    'that do not name their true author are left out. Reads of one record, its history, and changes are',
    'recorded; lists and searches are not (`scope` says so with every answer). Only she reads hers. Needs the',
    'server to keep AuditEvents (docs/deploy.md; Medplum 5.0.10 cannot, safely): without them the log is empty.',
    `Ordered and paged by when the server stored each record (an entry dated otherwise by its writer is left out). At most ${ACCESS_LOG_READS_PER_MINUTE} reads (pages) a minute: then 429 with Retry-After.`,
  ].join(' '),
  security: secured,
  request: { query: AccessLogQuerySchema },
  responses: {
    200: { description: 'Her entries, newest first.', content: { 'application/json': { schema: AccessLogSchema } } },
    ...errorResponses(400, 503, ...SECURED_STATUSES),
  },
});
