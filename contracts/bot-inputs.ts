import { z } from '@hono/zod-openapi';
import { Coordinate, RequirementsQuerySchema, WithdrawalRequestSchema } from './agreements';
import { BookRequestSchema, EncounterRequestSchema, RescheduleRequestSchema } from './appointments';
import { StartAssessmentRequestSchema } from './assessments';
import { EnrollRequestSchema } from './enrollments';
import { SendMessageRequestSchema, StartThreadRequestSchema } from './messages';
import { OrderDecisionsRequestSchema } from './orders';
import { PatientRequestSchema } from './requests';
import { AvailabilityQuerySchema } from './scheduling';
import { MeasurementCompletionSchema, OfferDecisionSchema, QuestionnaireCompletionSchema } from './tasks';
import { WEBHOOK_EVENT_ID_PATTERN } from './webhook-rules';

/**
 * What each bot accepts as `event.input`. A bot's input is untrusted (anyone who can read the Bot can
 * `$execute` it with anything, DESIGN section 7), so every bot validates it against these schemas,
 * built from the same pieces as the gateway's request contracts. Objects are strict: an unknown field
 * (a forged `session`, a `patient`, a `clientId`...) is refused, not ignored.
 *
 * Bots do not bundle zod: Medplum evaluates a bot's whole bundle on every run, and these schemas with zod
 * made each run 9-26 ms slower and each bundle 160-195 KB (docs/benchmarks.md, "Bot input checks: zod in
 * the bundle or a schema"). The bot build turns them into JSON Schema (scripts/bot-build.ts) and
 * bots/lib/input.ts checks that subset.
 */

/** `<payload>.<signature>`, both base64url: the gateway's signed edge statement (bots/lib/trust.ts). */
export const EdgeStatementToken = z
  .string()
  .max(2048)
  .regex(/^[A-Za-z0-9_-]{1,1800}\.[A-Za-z0-9_-]{43}$/);

const ResourceId = z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/);

/** The claims of an edge statement: bound to one patient session, valid for a minute. */
export interface EdgeStatement {
  /** The requester, `Patient/<id>`. */
  sub: string;
  /** The session's `login_id`. */
  lid: string;
  ip?: string;
  ua?: string;
  /** Seconds since the epoch. */
  iat: number;
  exp: number;
}

/** A delivery of clinician work: the completed Task, or the completed answers to its form. */
const WorkDelivery = z.union([
  z.object({ resourceType: z.literal('Task'), id: ResourceId }).passthrough(),
  z.object({ resourceType: z.literal('QuestionnaireResponse'), id: ResourceId }).passthrough(),
]);

export const BOT_INPUTS = {
  /** The trust bench's fixture (test/embedded/fixtures/bots/requirements-checked.ts); no platform bot. */
  'agreement-requirements': z.object({ context: RequirementsQuerySchema.strict() }).strict(),
  'accept-agreements': z
    .object({ agreements: z.array(Coordinate).min(1).max(20), edge: EdgeStatementToken.optional() })
    .strict(),
  'withdraw-agreement': WithdrawalRequestSchema.strict(),
  /** Her access log's page: before an instant (exclusive), so many entries (the gateway checked both). */
  'access-log': z
    .object({
      before: z
        .string()
        .regex(/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,12}Z$/)
        .optional(),
      limit: z.number().int().min(1).max(100),
    })
    .strict(),
  /** One of her uploads, by the Binary's id (from the path). */
  'read-document': z.object({ document: ResourceId }).strict(),
  'start-assessment': StartAssessmentRequestSchema.strict(),
  'request-review': PatientRequestSchema,
  /** Her answer in a thread (its id, from the path), or a new thread with her care team. */
  'send-message': z.union([
    SendMessageRequestSchema.extend({ thread: ResourceId }).strict(),
    StartThreadRequestSchema.strict(),
  ]),
  /** The task (its id, from the path) and what completes it; an offer's answer also the gateway's edge statement. */
  'complete-task': z.union([
    QuestionnaireCompletionSchema.extend({ task: ResourceId }).strict(),
    MeasurementCompletionSchema.extend({ task: ResourceId }).strict(),
    ...OfferDecisionSchema.options.map((decision) =>
      decision.extend({ task: ResourceId, edge: EdgeStatementToken.optional() }).strict(),
    ),
  ]),
  /** The order (its RequestGroup id, from the path) and her decision on each item. */
  'decide-order': OrderDecisionsRequestSchema.extend({ order: ResourceId }).strict(),
  /** An enrollment's three operations (the plan's id from the path). */
  enrollment: z.union([
    EnrollRequestSchema.extend({ operation: z.literal('enroll') }).strict(),
    z.object({ operation: z.literal('activate'), carePlan: ResourceId }).strict(),
    z.object({ operation: z.literal('unenroll'), carePlan: ResourceId }).strict(),
  ]),
  /** The availability query as the gateway validated it (cross-field rules are the bot's). */
  availability: AvailabilityQuerySchema,
  /** A visit's operations (the appointment's id from the path). */
  appointments: z.union([
    BookRequestSchema.extend({ operation: z.literal('book') }).strict(),
    RescheduleRequestSchema.extend({ operation: z.literal('reschedule'), appointment: ResourceId }).strict(),
    z.object({ operation: z.literal('cancel'), appointment: ResourceId }).strict(),
    EncounterRequestSchema.extend({ operation: z.literal('encounter'), appointment: ResourceId }).strict(),
  ]),
  /** Nothing: the tenant is decided from what the patient registered through, never from input. */
  'patient-home': z.object({}).strict(),
  /** Nothing: it answers the id of the Project's edge-statement key to the gateway's client. */
  'edge-key-check': z.object({}).strict(),
  /** Nothing: a test event to the tenant's endpoint; the tenant is the calling backend's. */
  'webhook-test': z.object({}).strict(),
  /** The kept delivery to try now, by its event id (`webhook-id`); of the calling backend's tenant only. */
  'webhook-replay': z.object({ eventId: z.string().max(160).regex(WEBHOOK_EVENT_ID_PATTERN) }).strict(),
  /** A subscription delivery: the Communication that was written; the bot re-reads it by id. */
  'sms-opt-out': z
    .object({
      resourceType: z.literal('Communication'),
      id: z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/),
    })
    .passthrough(),
  /**
   * A subscription delivery: the intake review Task that was completed, or the answers to its form that
   * were completed after it (the Provider app completes the task first), or a Condition revised since; the
   * bot re-reads it by id.
   */
  eligibility: z.union([
    ...WorkDelivery.options,
    z.object({ resourceType: z.literal('Condition'), id: ResourceId }).passthrough(),
  ]),
  /** A subscription delivery: the selection Task that was completed, or its answers after it; as above. */
  'compose-offer': WorkDelivery,
  /** A subscription delivery: the care team's review of an asynchronous visit, completed; re-read by id. */
  'visit-review': z.object({ resourceType: z.literal('Task'), id: ResourceId }).passthrough(),
  /** A subscription delivery: a visit segment finished, or an Appointment marked fulfilled; re-read by id. */
  'visit-completion': z.object({ resourceType: z.enum(['Encounter', 'Appointment']), id: ResourceId }).passthrough(),
  /** A cron run (or provisioning's one run): its input is ignored; the work comes from the Schedules. */
  'materialize-slots': z.unknown(),
  /** A cron run: Medplum's own input, which the reconciler ignores (it derives its work from the data). */
  reconcile: z.unknown(),
  /**
   * A subscription delivery: a Task or Appointment of a tenant that takes webhooks (the bot reads the
   * version itself); or a scheduled run, whose input is the Bot (the work comes from the kept deliveries).
   */
  webhooks: z.union([
    z.object({ resourceType: z.enum(['Task', 'Appointment', 'Communication']), id: ResourceId }).passthrough(),
    z.object({ resourceType: z.literal('Bot') }).passthrough(),
  ]),
} as const;

export type BotName = keyof typeof BOT_INPUTS;
export type BotInput<N extends BotName> = z.output<(typeof BOT_INPUTS)[N]>;
