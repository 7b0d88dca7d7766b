import { createRoute, z } from '@hono/zod-openapi';
import { IdParam, INSTANT_PATTERN, secured, YEAR_SPAN } from './common';
import { errorResponses, SECURED_STATUSES, withExample } from './errors';
import { FULFILMENT_METHODS, TASK_KINDS } from './systems';

/** `Type/<id>`, as every resource field of the action plane holds it (spec rule 8). */
export const referenceTo = (type: string) =>
  z
    .string()
    .regex(new RegExp(`^${type}/[A-Za-z0-9\\-.]{1,64}$`))
    .openapi({ example: `${type}/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e` });

export { TASK_KINDS, type TaskKind } from './systems';

/**
 * Patient task statuses (R4 task-status, JOURNEY C): `ready` (to do), `completed`, `cancelled`
 * (unenrolled, revoked, superseded), `on-hold` (a clinician paused the plan). A patient never sets one
 * directly: completing is `POST /v1/tasks/{id}/complete`.
 */
export const PatientTaskStatusSchema = z.enum(['ready', 'completed', 'cancelled', 'on-hold']);

export const MeasurementRequestSchema = z
  .object({
    code: z
      .string()
      .openapi({ description: 'The measurement, `system|code` (LOINC).', example: 'http://loinc.org|29463-7' }),
    units: z
      .array(z.string())
      .openapi({ description: 'The UCUM units a reading may use, the stored one first.', example: ['kg', '[lb_av]'] }),
  })
  .openapi('MeasurementRequest');

export const PatientTaskSchema = z
  .object({
    task: referenceTo('Task'),
    kind: z.enum(TASK_KINDS),
    status: PatientTaskStatusSchema,
    description: z.string().optional(),
    questionnaire: z
      .string()
      .optional()
      .openapi({ description: 'Questionnaire tasks: the pinned Questionnaire to answer, `url|version`.' }),
    measurements: z
      .array(MeasurementRequestSchema)
      .optional()
      .openapi({ description: 'Measurement tasks: the readings to submit, one per entry.' }),
    visitType: z.enum(['video-visit', 'async-review']).optional().openapi({
      description: 'Schedule-visit tasks: the kind of visit to book (`POST /v1/appointments` with a free slot).',
    }),
    notBefore: z.string().optional().openapi({
      description:
        'Schedule-visit tasks of a repeating visit: the earliest time the next visit is for (one period after the last one was fulfilled); book a slot from then on.',
      example: '2027-01-01T17:30:00.000Z',
    }),
    careTeam: referenceTo('CareTeam').optional().openapi({
      description:
        'Schedule-visit tasks: the visit team to book with, readable at `/v1/fhir/CareTeam/{id}`; its free slots are `GET /v1/availability?careTeam=`.',
    }),
    complete: z.string().openapi({
      example: 'POST /v1/tasks/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e/complete {questionnaireResponse}',
      description:
        'The call that completes it, with what its body carries: `POST /v1/tasks/{id}/complete` with `{questionnaireResponse}`, `{measurements}` or `{decision}`; `POST /v1/orders/{offer id}/decisions` for an order; `POST /v1/appointments` with `{task, slot}` for a visit.',
    }),
    items: z
      .array(
        z.object({
          item: z.string().openapi({ example: 'MedicationRequest/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e' }),
          allowed: z.array(z.enum(FULFILMENT_METHODS)),
        }),
      )
      .optional()
      .openapi({
        description:
          'Order-decisions tasks: each item of the order with the fulfilment methods her care provider allows for it where she lives, as `POST /v1/orders/{id}/decisions` accepts them (checked again when she decides).',
      }),
    offer: referenceTo('RequestGroup').optional().openapi({
      description:
        'Treatment-offer and order-decisions tasks: the proposal RequestGroup (the consent bundle), readable at `/v1/fhir/RequestGroup/{id}`.',
    }),
  })
  .openapi('PatientTask');

export type PatientTask = z.infer<typeof PatientTaskSchema>;

export const ReadingSchema = z
  .object({
    code: z
      .string()
      .regex(/^\S+\|\S+$/)
      .max(256)
      .openapi({ example: 'http://loinc.org|29463-7' }),
    value: z.number().finite().openapi({ example: 82.4 }),
    unit: z
      .string()
      .min(1)
      .max(64)
      .openapi({ description: 'A UCUM code the task allows (its `units`).', example: 'kg' }),
    effective: z
      .string()
      .regex(INSTANT_PATTERN)
      .optional()
      .openapi({
        description: `When it was taken; default: now. Never in the future; a year from ${YEAR_SPAN.first} on.`,
        example: '2026-11-25T08:00:00Z',
      }),
  })
  .strict()
  .openapi('Reading');

export const QuestionnaireCompletionSchema = z
  .object({
    questionnaireResponse: referenceTo('QuestionnaireResponse').openapi({
      description:
        "The patient's own completed answers (`POST /v1/fhir/QuestionnaireResponse`), answering exactly the task's pinned Questionnaire `url|version`.",
    }),
  })
  .strict()
  .openapi('QuestionnaireCompletion');

export const MeasurementCompletionSchema = z
  .object({
    measurements: z
      .array(ReadingSchema)
      .min(1)
      .max(20)
      .openapi({ description: 'One reading per measurement the task asks for (its `measurements`).' }),
  })
  .strict()
  .openapi('MeasurementCompletion');

const reason = z.string().min(1).max(2000).optional().openapi({ description: 'Why, in her words, for the care team.' });

export const OfferAcceptanceSchema = z
  .object({ decision: z.literal('accept') })
  .strict()
  .openapi('OfferAcceptance');

export const OfferDeclineSchema = z
  .object({ decision: z.literal('decline'), reason })
  .strict()
  .openapi('OfferDecline');

export const OfferCounterSchema = z
  .object({
    decision: z.literal('counter'),
    proposal: z
      .object({
        medication: z
          .string()
          .regex(/^http:\/\/www\.nlm\.nih\.gov\/research\/umls\/rxnorm\|[0-9]{1,12}$/)
          .openapi({
            description: 'The medication she proposes instead, an RxNorm product `system|code`.',
            example: 'http://www.nlm.nih.gov/research/umls/rxnorm|197361',
          }),
      })
      .strict(),
    reason,
  })
  .strict()
  .openapi('OfferCounter');

/** A treatment-offer task's answer (JOURNEY D.4). */
export const OfferDecisionSchema = z.union([OfferAcceptanceSchema, OfferDeclineSchema, OfferCounterSchema]);

export const CompleteTaskRequestSchema = z
  .union([QuestionnaireCompletionSchema, MeasurementCompletionSchema, ...OfferDecisionSchema.options])
  .openapi('CompleteTaskRequest', {
    example: { measurements: [{ code: 'http://loinc.org|29463-7', value: 82.4, unit: 'kg' }] },
  });

export const CompletedTaskSchema = z
  .object({
    task: referenceTo('Task'),
    status: z.literal('completed'),
    questionnaireResponse: z
      .string()
      .optional()
      .openapi({ description: 'Questionnaire tasks: the answers, pinned to the version completed.' }),
    observations: z.array(referenceTo('Observation')).optional().openapi({
      description:
        'Measurement tasks: the Observations the platform wrote: one per reading, except the readings of a vital-sign panel, which are one Observation (a blood pressure: LOINC 85354-9 with the systolic and diastolic readings as components).',
    }),
    decision: z
      .enum(['accept', 'decline', 'counter'])
      .optional()
      .openapi({ description: 'Treatment-offer tasks: her answer.' }),
    consent: referenceTo('Consent')
      .optional()
      .openapi({ description: 'Accepted offers: the treatment Consent, pinned to the versions offered.' }),
    carePlan: referenceTo('CarePlan')
      .optional()
      .openapi({ description: 'Accepted offers: the active CarePlan, instantiating exactly the pinned set.' }),
    tasks: z.array(referenceTo('Task')).optional().openapi({
      description:
        'Accepted offers: the tasks the plan issued to her (its first monitoring tasks, then the order-decisions task).',
    }),
    proposal: referenceTo('MedicationRequest')
      .optional()
      .openapi({ description: 'Counters: her medication proposal, for the care team to review.' }),
  })
  .openapi('CompletedTask');

const COMPLETE = `Completes one of the patient's tasks; the payload matches the task's kind.
- Questionnaire task: \`{questionnaireResponse}\`, her own answers, \`completed\`, answering exactly the pinned Questionnaire (\`url|version\`); every attachment an answer uses must be her own upload (\`POST /v1/documents\`). The task's output pins the answers' version: the platform first stores them as clinicians read them (each item's question text from the pinned Questionnaire, each choice's display, each file as the checked upload), a new version with the same answers when her app left any of that out, and pins that one; submitted answers can no longer be changed.
- Measurement task: \`{measurements: [{code, value, unit, effective?}]}\`, one reading per measurement the task asks for, each checked against its ObservationDefinition: a code the task asks for, a UCUM unit it allows (a customary unit is converted: the Observation holds the stored unit and what was entered), a value inside the absolute range, not in the future. Any problem: 422 \`invalid_measurement\` with \`details.issues[{index, code, reason, allowedUnits?, range?}]\` and nothing written. The platform writes one \`final\` Observation per reading (performer: the patient, method patient-reported), a blood pressure's two readings as one panel (LOINC 85354-9, the FHIR vital-signs convention, its components interpreted each), interpreted against the reference range for the patient's country (L/N/H; LL/HH for a critical value, which also issues an urgent task to the care team), in the same transaction that completes the task.
- Treatment-offer task (the consent bundle a clinician's selection composed: a proposal RequestGroup pinned to the versions of protocol, option and condition): \`{decision: "accept"}\`, \`{decision: "decline", reason?}\` or \`{decision: "counter", proposal: {medication}, reason?}\`. Only acceptance activates care, gated by the agreements: in one transaction the task completes, a treatment Consent (\`scope\` treatment, \`provision.data\` the offered RequestGroup and its items at the exact versions offered, with the clickwrap proof: who, when, session) and an \`active\` CarePlan instantiating exactly the pinned canonicals are written, with the plan's first monitoring tasks and an \`order-decisions\` task (answered at \`POST /v1/orders/{id}/decisions\`). An offer superseded before she answers is 409 \`invalid_state\` with \`details.state\` \`superseded\`, nothing written: the offer withdrawn, or its diagnosis revised clinically (its code, clinical or verification status; a note is not a revision), in which case the platform cancels the offer task (\`businessStatus\` \`condition-revised\`, \`statusReason\` saying why) and her care team gets a new selection for the revised diagnosis, from which a new offer follows. Decline and counter (not gated: they start nothing) revoke the offer (its items \`cancelled\`) and return it to clinician review (a \`review-response\` task in the tenant's queue); a counter also records her medication proposal (\`intent\` proposal, requester the patient). Nothing active is created.
- Order-decisions task: 409 \`invalid_state\` with \`details.use\` = \`POST /v1/orders/{id}/decisions\`, the one path that answers it; a schedule-visit task likewise names \`POST /v1/appointments\`.
Task statuses (R4 task-status): \`ready\` -> \`completed\` here; \`cancelled\` (unenrolled, revoked, superseded) and \`on-hold\` (a clinician paused the plan) are set by the platform. Repeating the same completion answers 200 with the same result; a different payload for a completed task, or any payload for a cancelled or on-hold one, is 409 \`invalid_state\` with \`details.state\`. A payload of the other kind is 400. Gated: unmet required agreements -> 409 \`consent_required\`, nothing written. When the last task of an assessment completes, a review task is issued to the tenant's clinician queue. Another patient's task, or one that does not exist: 404.`;

export const completeTaskRoute = createRoute({
  method: 'post',
  path: '/v1/tasks/{id}/complete',
  operationId: 'tasks.complete',
  tags: ['Tasks'],
  summary: 'Complete a task',
  description: COMPLETE,
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    body: { required: true, content: { 'application/json': { schema: CompleteTaskRequestSchema } } },
  },
  responses: {
    200: {
      description: 'Completed (or already completed with this payload).',
      content: { 'application/json': { schema: CompletedTaskSchema } },
    },
    // The example: an offer whose diagnosis a clinician revised before she answered (JOURNEY D.1).
    ...withExample(
      errorResponses(400, 404, 409, 413, 415, 422, ...SECURED_STATUSES),
      409,
      'invalid_state',
      'This offer was superseded; your care team will send you another',
      { state: 'superseded' },
    ),
  },
});

export const PatientTasksSchema = z.object({ tasks: z.array(PatientTaskSchema) }).openapi('PatientTasks', {
  example: {
    tasks: [
      {
        task: 'Task/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
        kind: 'questionnaire',
        status: 'ready',
        description: 'Blood pressure history',
        questionnaire: 'https://patient-care.example/northwind/questionnaires/bp-history|1',
        complete: 'POST /v1/tasks/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e/complete {questionnaireResponse}',
      },
    ],
  },
});

export const listTasksRoute = createRoute({
  method: 'get',
  path: '/v1/tasks',
  operationId: 'tasks.list',
  tags: ['Tasks'],
  summary: 'Her open tasks, as what they are',
  description:
    "Her tasks still to do (`ready` or `in-progress`), newest first, at most 100: each with its kind, what completing it needs and the call that takes it (`complete`), so that an app can list and act on her work without knowing the platform's code systems. The same view `POST /v1/assessments` and an activated enrollment return. Read with her own token: her record only.",
  security: secured,
  responses: {
    200: { description: 'Her open tasks.', content: { 'application/json': { schema: PatientTasksSchema } } },
    ...errorResponses(...SECURED_STATUSES),
  },
});
