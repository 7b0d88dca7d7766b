import { createRoute, z } from '@hono/zod-openapi';
import {
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_OPERATIONS,
  WEBHOOK_RETRY_MINUTES,
  WEBHOOK_TEST_EVENT_TYPE,
  WEBHOOK_TIMEOUT_MS,
} from './webhook-rules';

export * from './webhook-rules';

export const WebhookEventSchema = z
  .object({
    type: z.enum(WEBHOOK_EVENT_TYPES),
    timestamp: z.string().openapi({ description: 'When the change was recorded (the same as `data.occurredAt`).' }),
    data: z
      .object({
        id: z.string().openapi({
          description: 'The event, as her feed names it (`GET /v1/events`); also the `webhook-id` header.',
          example: 'Task/2b1c…/_history/9f3e…',
        }),
        type: z.enum(WEBHOOK_EVENT_TYPES),
        occurredAt: z.string(),
        subject: z.string().openapi({
          description:
            'What changed, to read with her token (`Task/…`, `Appointment/…`; a message `Communication/…`, whose `partOf` is its thread).',
          example: 'Appointment/5d2e…',
        }),
        patient: z.string().openapi({ description: 'Whose event it is: `Patient/<id>`.', example: 'Patient/8a7c…' }),
      })
      .strict(),
  })
  .strict()
  .openapi('WebhookEvent');

export type WebhookEvent = z.infer<typeof WebhookEventSchema>;

export const WEBHOOK_DESCRIPTION = [
  "Every event of the tenant's patients, POSTed to the endpoint its operator set (provisioning: the",
  'tenant’s `webhook`), with the Standard Webhooks headers: `webhook-id` (the event id, the same as in',
  'her feed: deduplicate by it, a delivery can come more than once), `webhook-timestamp` (Unix seconds)',
  'and `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`',
  'keyed with the base64-decoded part of the tenant’s `whsec_` secret; while the tenant rotates its secret,',
  'one such signature per secret, separated by a space: accept a delivery when one matches). Check it, and refuse a',
  'timestamp more than 5 minutes away. The body holds ids, never her record: read what changed with her',
  "token, or from the tenant's own server with its backend credential (a Medplum client, client credentials,",
  "made by provisioning for each of the tenant's `backends`): it reads the records of the tenant's patients",
  '(`GET <Medplum>/fhir/R4/<subject>`), never her messages or notes, nothing of another tenant.',
  `Answer 2xx within ${WEBHOOK_TIMEOUT_MS / 1000} s; anything else is tried again after`,
  `${WEBHOOK_RETRY_MINUTES.join(', ')} minutes (each retry has the same id and a new timestamp and signature),`,
  'then kept as failed for the operator. Events come in about the order they happened, not exactly: order',
  "them by `occurredAt`. Her agreements' changes are not delivered (they are the tenant's, in her feed).",
  "The tenant's backend reads the deliveries kept after a failed try, and asks for a test event or a replay",
  'of a kept delivery, with its own credential on Medplum (docs/webhooks.md).',
].join(' ');

/** The webhook in the OpenAPI document (`webhooks`): what a tenant's backend receives. */
export const patientEventWebhook = createRoute({
  method: 'post',
  path: 'patientEvent',
  operationId: 'webhooks.patientEvent',
  tags: ['Events'],
  summary: "An event of one of the tenant's patients, POSTed to the tenant's endpoint",
  description: WEBHOOK_DESCRIPTION,
  security: [{ webhookSignature: [] }],
  request: {
    headers: z.object({
      'webhook-id': z.string().openapi({ description: 'The event id (`data.id`): deduplicate by it.' }),
      'webhook-timestamp': z.string().openapi({ description: 'When this try was signed, in Unix seconds.' }),
      'webhook-signature': z.string().openapi({ description: '`v1,<base64 HMAC-SHA256>` (see above).' }),
    }),
    body: { content: { 'application/json': { schema: WebhookEventSchema } } },
  },
  responses: {
    200: { description: 'Any 2xx within the timeout: delivered. Anything else is tried again.' },
  },
});

/** What a backend's test of its endpoint POSTs: the same headers and signature, an id of its own, no patient. */
export const WebhookTestEventSchema = z
  .object({
    type: z.literal(WEBHOOK_TEST_EVENT_TYPE),
    timestamp: z.string().openapi({ description: 'When the test was asked for.' }),
    data: z
      .object({
        id: z.string().openapi({
          description:
            'The test’s own id (`webhook-test/<uuid>`), also the `webhook-id` header; never an event of hers.',
          example: 'webhook-test/0b9c1f4e-…',
        }),
        type: z.literal(WEBHOOK_TEST_EVENT_TYPE),
        occurredAt: z.string(),
      })
      .strict(),
  })
  .strict()
  .openapi('WebhookTestEvent');

export type WebhookTestEvent = z.infer<typeof WebhookTestEventSchema>;

/** The webhook a tenant's backend asks for to check its endpoint (the `webhook-test` bot, docs/webhooks.md). */
export const testEventWebhook = createRoute({
  method: 'post',
  path: 'testEvent',
  operationId: 'webhooks.testEvent',
  tags: ['Events'],
  summary: "A test event, POSTed to the tenant's endpoint when its backend asks for one",
  description: [
    `Sent only when the tenant's backend runs the \`${WEBHOOK_OPERATIONS.test.bot}\` bot (at most`,
    `${WEBHOOK_OPERATIONS.test.perMinute} a minute for one backend), whatever event types the endpoint takes;`,
    'signed and timed out exactly as every event (see `patientEvent`), tried once and never kept: the',
    'backend is answered how the endpoint answered. Answer it 2xx; it names no patient.',
  ].join(' '),
  security: [{ webhookSignature: [] }],
  request: {
    headers: z.object({
      'webhook-id': z.string().openapi({ description: 'The test’s id (`data.id`).' }),
      'webhook-timestamp': z.string().openapi({ description: 'When it was signed, in Unix seconds.' }),
      'webhook-signature': z.string().openapi({ description: '`v1,<base64 HMAC-SHA256>`, as every event.' }),
    }),
    body: { content: { 'application/json': { schema: WebhookTestEventSchema } } },
  },
  responses: {
    200: { description: 'Any 2xx within the timeout: the backend is told it was delivered.' },
  },
});

/**
 * What the `webhook-test` and `webhook-replay` bots answer a tenant's backend (Medplum's 200 with the bot's
 * result): how its endpoint answered this one try; for a replay, how the kept delivery stands now.
 */
export const WebhookTryResultSchema = z
  .object({
    ok: z.literal(true),
    eventId: z.string(),
    delivered: z.boolean(),
    outcome: z.union([z.number().int(), z.enum(['unreachable', 'timeout'])]).openapi({
      description: "The endpoint's status code, or that it could not be reached or did not answer in time.",
    }),
    status: z.enum(WEBHOOK_DELIVERY_STATUSES).optional().openapi({ description: 'A replay: the kept delivery now.' }),
    attempts: z.number().int().optional().openapi({ description: 'A replay: tries made in all, this one included.' }),
  })
  .openapi('WebhookTryResult');

export type WebhookTryResult = z.infer<typeof WebhookTryResultSchema>;

/** How a receiver knows a delivery is the platform's: the signature header, checked with the tenant's secret. */
export const WEBHOOK_SIGNATURE_SCHEME = {
  type: 'apiKey',
  in: 'header',
  name: 'webhook-signature',
  description:
    "Standard Webhooks: the receiver checks `webhook-signature` against the tenant's secret (see the webhook's description).",
} as const;
