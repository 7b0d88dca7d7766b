import { createRoute, z } from '@hono/zod-openapi';
import { fhirText, IdParam, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { MESSAGES_PER_HOUR, THREADS_PER_DAY } from './message-rules';
import { referenceTo } from './tasks';

/**
 * Her messages with her care team (issue 48): threads as Medplum's Provider app keeps them, so that
 * clinicians read and answer in its Messages. A thread is a Communication with no `partOf` about her
 * (`subject`) that names her among its participants (`recipient`); each message is a Communication
 * `partOf` it, with its `sender` and `sent`. Her care team opens threads (the Provider app's Messages);
 * she reads them and answers in them. A clinician's comment on her chart that names no recipient (the
 * app's timeline comment) is internal: she never sees it (docs/messages.md).
 */

/** What a message may say: FHIR text, at most 4,000 characters. */
export const MESSAGE_TEXT_MAX = 4000;

export const MessageParticipantSchema = z
  .object({
    reference: z
      .string()
      .regex(/^(Patient|Practitioner|PractitionerRole|CareTeam|Organization)\/[A-Za-z0-9\-.]{1,64}$/)
      .openapi({ example: 'Practitioner/6a0f3c1e-2b4d-4e8f-9a7b-1c2d3e4f5a6b' }),
    display: z.string().optional().openapi({ description: 'The name the record gives, when it gives one.' }),
  })
  .openapi('MessageParticipant');

export const MessageSchema = z
  .object({
    message: referenceTo('Communication'),
    from: MessageParticipantSchema.openapi({ description: 'Who wrote it.' }),
    fromMe: z.boolean().openapi({ description: 'She wrote it herself.' }),
    text: z.string().openapi({ description: 'What it says: its text (empty when it carries files only).' }),
    attachments: z.number().int().min(0).openapi({
      description:
        'How many files it carries (a clinician may attach one in the Provider app): each a `DocumentReference` about her, read in the record plane.',
    }),
    sentAt: z.string().openapi({ description: 'When it was sent (an instant).' }),
  })
  .openapi('Message');

export const MessageThreadSchema = z
  .object({
    thread: referenceTo('Communication'),
    topic: z.string().optional().openapi({ description: 'What the thread is about, as her care team named it.' }),
    status: z.enum(['open', 'closed']).openapi({
      description: 'Open threads take answers; a thread her care team closed (`completed`) is read-only.',
    }),
    participants: z.array(MessageParticipantSchema),
    lastMessage: MessageSchema.optional(),
    updatedAt: z.string().openapi({ description: 'When the thread last changed (an instant).' }),
  })
  .openapi('MessageThread');

/** Threads `GET /v1/messages` lists: her most recently active. */
export const MAX_THREADS = 50;
/** Messages `GET /v1/messages/{id}` returns: the thread's latest, oldest first. */
export const MAX_THREAD_MESSAGES = 100;

export const MessageThreadsSchema = z.object({ threads: z.array(MessageThreadSchema) }).openapi('MessageThreads');

export const MessageThreadPageSchema = z
  .object({
    thread: MessageThreadSchema,
    messages: z.array(MessageSchema).openapi({
      description: `The thread's latest ${MAX_THREAD_MESSAGES} messages, oldest first.`,
    }),
  })
  .openapi('MessageThreadPage');

export const SendMessageRequestSchema = z
  .object({
    text: fhirText(MESSAGE_TEXT_MAX).openapi({
      description: `What she answers: text of 1 to ${MESSAGE_TEXT_MAX} characters, not only whitespace, without control characters (tab and line breaks are fine).`,
      example: 'Thank you, the morning readings are lower since Monday.',
    }),
  })
  .strict()
  .openapi('SendMessageRequest', { example: { text: 'Thank you, the morning readings are lower since Monday.' } });

export const StartThreadRequestSchema = z
  .object({
    topic: fhirText(120).optional().openapi({
      description: 'What it is about, in a few words (1 to 120 characters).',
      example: 'My morning readings',
    }),
    text: fhirText(MESSAGE_TEXT_MAX).openapi({
      description: `Her first message: text of 1 to ${MESSAGE_TEXT_MAX} characters, not only whitespace, without control characters (tab and line breaks are fine).`,
      example: 'My readings were above 150 three mornings this week. Should I change anything?',
    }),
  })
  .strict()
  .openapi('StartThreadRequest', {
    example: { topic: 'My morning readings', text: 'My readings were above 150 three mornings this week.' },
  });

const ThreadId = IdParam.openapi({
  param: { name: 'id', in: 'path' },
  description: 'The thread (its Communication id, or as `thread` names it without `Communication/`).',
});

export const listThreadsRoute = createRoute({
  method: 'get',
  path: '/v1/messages',
  operationId: 'messages.list',
  tags: ['Messages'],
  summary: 'Her message threads with her care team',
  description: `Her threads (at most ${MAX_THREADS}, the most recently active first), each with its last message (a thread with no message yet is not listed). Read with her own token: threads about her that name her as a participant. Threads are opened by her care team (Medplum's Provider app, *Messages*); a clinician's internal comment on her chart is not a message and is not listed.`,
  security: secured,
  responses: {
    200: { description: 'Her threads.', content: { 'application/json': { schema: MessageThreadsSchema } } },
    ...errorResponses(...SECURED_STATUSES),
  },
});

export const readThreadRoute = createRoute({
  method: 'get',
  path: '/v1/messages/{id}',
  operationId: 'messages.read',
  tags: ['Messages'],
  summary: 'One thread and its messages',
  description: `The thread and its latest ${MAX_THREAD_MESSAGES} messages, oldest first. A thread that is not hers is 404, as one that does not exist.`,
  security: secured,
  request: { params: z.object({ id: ThreadId }) },
  responses: {
    200: { description: 'The thread.', content: { 'application/json': { schema: MessageThreadPageSchema } } },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

export const sendMessageRoute = createRoute({
  method: 'post',
  path: '/v1/messages/{id}',
  operationId: 'messages.send',
  tags: ['Messages'],
  summary: 'Answer in a thread',
  description: `Writes her message in the thread, from her to the thread's other participants (her care team reads it in the Provider app's *Messages*). Send an \`Idempotency-Key\`: a retry with the same key answers the first message instead of writing a second. A thread that is not hers is 404; one her care team closed is 409 \`invalid_state\`. At most ${MESSAGES_PER_HOUR} messages an hour: beyond, 429 \`rate_limited\` with \`Retry-After\`.`,
  security: secured,
  request: {
    params: z.object({ id: ThreadId }),
    body: { required: true, content: { 'application/json': { schema: SendMessageRequestSchema } } },
  },
  responses: {
    201: { description: 'Sent.', content: { 'application/json': { schema: MessageSchema } } },
    ...errorResponses(400, 404, 409, 413, 415, ...SECURED_STATUSES),
  },
});

export const startThreadRoute = createRoute({
  method: 'post',
  path: '/v1/messages',
  operationId: 'messages.start',
  tags: ['Messages'],
  summary: 'Write to her care team (a new thread)',
  description: `Opens a thread with her care team and writes her first message in it, in one transaction: the thread is addressed to her and to her care provider's care team (its intake queue), whose clinicians read and answer it in Medplum's Provider app (*Messages*). Answer in it with \`POST /v1/messages/{id}\`. Send an \`Idempotency-Key\`: a retry answers the same thread instead of opening a second one. At most ${THREADS_PER_DAY} threads in 24 hours and ${MESSAGES_PER_HOUR} messages an hour: beyond, 429 \`rate_limited\` with \`Retry-After\`. A care provider with no care team to write to: 409 \`invalid_state\`.`,
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: StartThreadRequestSchema } } } },
  responses: {
    201: { description: 'Opened.', content: { 'application/json': { schema: MessageThreadSchema } } },
    ...errorResponses(400, 409, 413, 415, ...SECURED_STATUSES),
  },
});
