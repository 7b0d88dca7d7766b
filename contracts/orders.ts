import { createRoute, z } from '@hono/zod-openapi';
import { IdParam, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { FULFILMENT_METHODS } from './systems';

/** An item of an order: one of its requests, `MedicationRequest/<id>` or `ServiceRequest/<id>`. */
const OrderItem = z
  .string()
  .regex(/^(MedicationRequest|ServiceRequest)\/[A-Za-z0-9\-.]{1,64}$/)
  .openapi({ example: 'MedicationRequest/5b1f3c2e-8d9a-4f6b-9c1e-2a7d4e6f8b90' });

const Fulfilment = z.enum(FULFILMENT_METHODS).openapi({
  description:
    "How she receives the item. Which methods are allowed depends on the item's kind and her country (her address), by her care provider's policy.",
});

export const ItemAcceptanceSchema = z
  .object({ item: OrderItem, decision: z.literal('accept'), fulfilment: Fulfilment })
  .strict()
  .openapi('OrderItemAcceptance');

export const ItemDeclineSchema = z
  .object({ item: OrderItem, decision: z.literal('decline') })
  .strict()
  .openapi('OrderItemDecline');

export const OrderDecisionsRequestSchema = z
  .object({
    items: z
      .array(z.union([ItemAcceptanceSchema, ItemDeclineSchema]))
      .min(1)
      .max(20)
      .openapi({ description: 'Every item of the order, each exactly once.' }),
  })
  .strict()
  .openapi('OrderDecisionsRequest', {
    example: {
      items: [
        { item: 'MedicationRequest/5b1f3c2e-8d9a-4f6b-9c1e-2a7d4e6f8b90', decision: 'accept', fulfilment: 'delivery' },
      ],
    },
  });

export const OrderDecisionsSchema = z
  .object({
    order: z
      .string()
      .regex(/^RequestGroup\/[A-Za-z0-9\-.]{1,64}$/)
      .openapi({ example: 'RequestGroup/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e' }),
    status: z.enum(['completed', 'revoked']).openapi({
      description: "The order's status: `completed` once an item is placed, `revoked` when every item was declined.",
    }),
    items: z.array(
      z
        .object({
          item: OrderItem,
          decision: z.enum(['accept', 'decline']),
          intent: z
            .enum(['order', 'proposal'])
            .openapi({ description: '`order` once placed; a declined item stays a proposal.' }),
          status: z.enum(['active', 'cancelled']),
          fulfilment: Fulfilment.optional(),
        })
        .openapi('OrderItemDecision'),
    ),
  })
  .openapi('OrderDecisions');

const DECIDE = `Places the order of a treatment the patient accepted (\`{id}\`: the RequestGroup of the offer, the \`offer\` of her \`order-decisions\` task): each item accepted with a fulfilment method, or declined.
- Every item of the order exactly once (an item that is not in it, a repeat or a missing one: 400). An item the treatment requires cannot be declined (400): stopping treatment is unenrolling.
- Fulfilment: the methods allowed for an item's kind in her country (from her address), by her care provider's policy; anything else is 422 \`invalid_fulfilment\` with \`details.allowed\` (per item) and nothing placed.
- In one transaction: each accepted item, the same resource, moves \`intent\` proposal -> order with its fulfilment method recorded; each declined item is \`cancelled\` and stays a proposal; the order moves \`intent\` proposal -> order and \`status\` to \`completed\` (\`revoked\` when every item was declined); her order-decisions task completes. The versions she consented to stay pinned by her treatment Consent.
- Before the offer is accepted (or after it was declined): 409 \`invalid_state\` with \`details.use\` naming the offer task. The same decisions again answer 200 with the same result; other decisions once placed: 409 \`invalid_state\`. Gated: unmet required agreements -> 409 \`consent_required\`, nothing written. Another patient's order, or one that does not exist: 404.`;

export const decideOrderRoute = createRoute({
  method: 'post',
  path: '/v1/orders/{id}/decisions',
  operationId: 'orders.decide',
  tags: ['Orders'],
  summary: 'Decide the items of an order',
  description: DECIDE,
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    body: { required: true, content: { 'application/json': { schema: OrderDecisionsRequestSchema } } },
  },
  responses: {
    200: {
      description: 'Placed (or already placed with these decisions).',
      content: { 'application/json': { schema: OrderDecisionsSchema } },
    },
    ...errorResponses(400, 404, 409, 413, 415, 422, ...SECURED_STATUSES),
  },
});
