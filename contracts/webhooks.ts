import { createRoute, z } from '@hono/zod-openapi';
import { WEBHOOK_EVENT_TYPES, WEBHOOK_RETRY_MINUTES, WEBHOOK_TIMEOUT_MS } from './webhook-rules';

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

/** How a receiver knows a delivery is the platform's: the signature header, checked with the tenant's secret. */
export const WEBHOOK_SIGNATURE_SCHEME = {
  type: 'apiKey',
  in: 'header',
  name: 'webhook-signature',
  description:
    "Standard Webhooks: the receiver checks `webhook-signature` against the tenant's secret (see the webhook's description).",
} as const;
