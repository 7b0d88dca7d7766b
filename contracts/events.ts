import { createRoute, z } from '@hono/zod-openapi';
import { secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { EVENT_TYPES } from './event-types';

/** How long a call may wait for something new, in seconds. */
export const MAX_EVENT_WAIT_SECONDS = 30;
/** Events a page holds at most, and by default. */
export const MAX_EVENTS_PER_PAGE = 100;
export const DEFAULT_EVENTS_PER_PAGE = 50;
/** A cursor's length at most (it carries the ids of the events just delivered: see the feed's description). */
export const MAX_CURSOR_LENGTH = 6_000;

export { EVENT_TYPES, type EventType } from './event-types';

const CURSOR = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/)
  .max(MAX_CURSOR_LENGTH);

export const EventsQuerySchema = z
  .object({
    after: CURSOR.optional().openapi({
      description: 'The `next` of the previous page (opaque). Without it, the feed starts at her first event.',
    }),
    wait: z
      .string()
      .regex(/^(0|[1-9][0-9]?)$/)
      .refine((v) => Number(v) <= MAX_EVENT_WAIT_SECONDS, { message: `at most ${MAX_EVENT_WAIT_SECONDS}` })
      .optional()
      .openapi({
        description: `Seconds to wait for an event when there is none yet, 0 to ${MAX_EVENT_WAIT_SECONDS} (default 0: answer at once).`,
        example: '25',
      }),
    limit: z
      .string()
      .regex(/^[1-9][0-9]{0,2}$/)
      .refine((v) => Number(v) <= MAX_EVENTS_PER_PAGE, { message: `at most ${MAX_EVENTS_PER_PAGE}` })
      .optional()
      .openapi({ description: `Events per page, 1 to ${MAX_EVENTS_PER_PAGE} (default ${DEFAULT_EVENTS_PER_PAGE}).` }),
    ticket: z.string().max(8192).optional().openapi({
      description:
        'Instead of `Authorization` (a browser’s `EventSource` cannot send it): a ticket of `POST /v1/events/tickets`, valid one minute, for this feed only.',
    }),
  })
  .strict();

export const PatientEventSchema = z
  .object({
    id: z.string().openapi({
      description: 'The event (the version of the record it is): the same event always has the same id.',
      example: 'Task/2b1c…/_history/9f3e…',
    }),
    type: z.enum(EVENT_TYPES),
    occurredAt: z.string().openapi({ description: 'When the change was recorded (the version’s instant).' }),
    subject: z.string().openapi({
      description:
        'What changed, as a reference to read with her token (`Task/…`, `Appointment/…`, `DocumentReference/…`; a message `Communication/…`, whose `partOf` is its thread: `GET /v1/messages/{thread}`).',
      example: 'Task/2b1c…',
    }),
    kind: z.string().optional().openapi({ description: 'A task’s kind (`questionnaire`, `schedule-visit`…).' }),
  })
  .openapi('PatientEvent');

export const EventsSchema = z
  .object({
    events: z.array(PatientEventSchema),
    next: CURSOR.openapi({
      description:
        'Ask again with `after` set to this for what comes next. A page may hold fewer than `limit` events while more follow; an empty page means nothing newer yet.',
    }),
  })
  .openapi('PatientEvents');

const FEED = [
  'What happened to her, oldest first: a changes feed of her own record (tasks, offers, visits, and her',
  'care provider’s agreements), read with her own token so that her access',
  'policy, not this gateway, decides what is hers. Each event is one version of one of her records and',
  'names the state it left it in; a record changed twice between two calls may show only its latest state.',
  'Only what the platform decided is an event: its workflows’ versions of her tasks and visits (a visit is',
  '`visit.fulfilled` when the platform found every segment finished, never on an app’s early mark), her',
  'care team’s messages as their writers sent them, agreements the platform published.',
  'Her feed begins where her story does, at her registration: what was published before she came (every',
  'agreement’s versions) is not told as news; her app reads `GET /v1/agreements/requirements` as she signs up.',
  'Events of one instant (written together) come in no fixed order.',
  'Delivery is at least once: an event can come again after a retry or a late write, so keep the ids you',
  'have seen. The cursor holds everything needed to continue (no state is kept in the gateway): any',
  'instance, before or after a restart, continues the same feed from it.',
  '',
  `With \`wait\`, an empty answer waits up to that many seconds (at most ${MAX_EVENT_WAIT_SECONDS}) for an event,`,
  'looking again every few seconds; while waiting the call holds no place among her calls in flight. Each',
  'look is one search of her own FHIR quota (20 points). Her uploads are taken into her record when the task',
  'they answer completes (`task.completed`): there is no later processing step to wait for.',
].join(' ');

export const EventTicketSchema = z
  .object({
    ticket: z.string().openapi({ description: 'Opaque; put it in the URL of her event stream, nowhere else.' }),
    expiresAt: z.string().openapi({ description: 'Until when it opens a stream (a minute); the stream then runs on.' }),
    url: z.string().openapi({
      description: 'The stream’s path with the ticket, for `new EventSource(gateway + url)`.',
      example: '/v1/events?ticket=et1.…',
    }),
  })
  .openapi('EventTicket');

export const eventTicketRoute = createRoute({
  method: 'post',
  path: '/v1/events/tickets',
  operationId: 'events.ticket',
  tags: ['Events'],
  summary: 'A one-minute ticket for her event stream in a browser',
  description: [
    'A web page’s native `EventSource` cannot send `Authorization`, and her token must not sit in a URL (logs,',
    'history, referrers). Asked with her token (never with a ticket), it answers a ticket that opens her',
    'stream, `GET /v1/events?ticket=…` with `Accept: text/event-stream`, for one minute: it holds her token',
    'sealed (encrypted and authenticated by the gateway), so the URL shows nothing of it, and it opens',
    'nothing but her event feed. A stream it opened runs its course (5 minutes); to reconnect, the page asks',
    'for a new ticket and opens a new `EventSource` (an `EventSource` would retry the same URL, whose ticket',
    'has expired: 401).',
  ].join(' '),
  security: secured,
  responses: {
    201: { description: 'The ticket', content: { 'application/json': { schema: EventTicketSchema } } },
    ...errorResponses(...SECURED_STATUSES),
  },
});

export const eventsRoute = createRoute({
  method: 'get',
  path: '/v1/events',
  operationId: 'events.list',
  tags: ['Events'],
  summary: 'Her events, oldest first',
  description: FEED,
  security: secured,
  request: { query: EventsQuerySchema },
  responses: {
    200: {
      description: [
        'The events after the cursor (possibly none), and the cursor to continue from. Asked with `Accept: text/event-stream`: the same feed as Server-Sent Events, each event’s `id` the cursor right after it (send it back as `Last-Event-ID`, or `after`, to resume), `event` its type and `data` the event as JSON, a look every 3 s and a comment line while idle; the stream ends after 5 minutes, and the client reconnects.',
        "Every event is named by its type, so a listener listens to each type it wants (`source.addEventListener('task.ready', ...)`; the types:",
        `${EVENT_TYPES.map((t) => `\`${t}\``).join(', ')});`,
        'an `onmessage` handler receives none of them.',
        "A browser's `EventSource` cannot send `Authorization`: a web page opens the stream with a one-minute ticket instead (`POST /v1/events/tickets`, then `new EventSource(gateway + url)`).",
      ].join(' '),
      content: {
        'application/json': { schema: EventsSchema },
        'text/event-stream': { schema: z.string().openapi({ description: 'Server-Sent Events (see above).' }) },
      },
    },
    ...errorResponses(400, 503, ...SECURED_STATUSES),
  },
});
