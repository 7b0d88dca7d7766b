import { createRoute, z } from '@hono/zod-openapi';
import { secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';

const reference = (type: string) =>
  z
    .string()
    .regex(new RegExp(`^${type}/[A-Za-z0-9\\-.]{1,64}$`))
    .optional()
    .openapi({ example: `${type}/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e` });

export const Coordinate = z
  .string()
  .regex(/^\S+\|\S+$/)
  .max(512)
  .openapi({
    description: 'A pinned agreement version, `url|version`.',
    example: 'https://patient-care.example/agreements/terms|2026-01',
  });

export const AgreementCategorySchema = z.enum(['terms', 'privacy', 'sms', 'voice', 'state-specific', 'program']);

export const AgreementRequirementSchema = z
  .object({
    url: z.string(),
    version: z.string(),
    sourceUrl: z.string().openapi({ description: 'Where the text of this version is (it is never embedded).' }),
    category: AgreementCategorySchema,
  })
  .openapi('AgreementRequirement');

export const RequirementsSchema = z
  .object({
    satisfied: z.boolean(),
    unmet: z.array(AgreementRequirementSchema),
  })
  .openapi('AgreementRequirements', {
    example: {
      satisfied: false,
      unmet: [
        {
          url: 'https://patient-care.example/agreements/terms',
          version: '2026-01',
          sourceUrl: 'https://patient-care.example/agreements/terms/2026-01.html',
          category: 'terms',
        },
      ],
    },
  });

const RESOLUTION = `Resolved by the spec's rules: (1) the organization's always-required agreements, or the platform baseline when it sets none, plus agreements attached to the context (the PlanDefinition's relatedArtifact of type depends-on, label agreement; a HealthcareService reaches its PlanDefinition through its fronts-plan extension; a CarePlan through instantiatesCanonical; a Task through basedOn), plus jurisdiction-bound required agreements; (2) filtered by the patient's jurisdiction from Patient.address (country + state, ISO 3166-2); (3) per category, the version for the patient's jurisdiction replaces the default: one per category; (4) a state-specific agreement has its own category. The latest published version of an agreement counts: an accepted older version does not cover a newer one. Categories: terms, privacy, sms, voice, state-specific, program (an agreement attached to an assessment or care plan). A context that is not the patient's own (another patient's care plan or task, another tenant's service) answers 404 not_found, exactly as one that does not exist.`;

/** What is being entered; each reference must be the patient's own (else 404, as if it did not exist). */
export const RequirementsQuerySchema = z.object({
  healthcareService: reference('HealthcareService'),
  carePlan: reference('CarePlan'),
  task: reference('Task'),
  protocol: Coordinate.optional().openapi({
    description: 'A protocol or assessment canonical, `url|version`.',
    example: 'https://patient-care.example/assessments/weight-intake|1',
  }),
});

export const requirementsRoute = createRoute({
  method: 'get',
  path: '/v1/agreements/requirements',
  operationId: 'agreements.requirements',
  tags: ['Agreements'],
  summary: 'What the patient must still accept',
  description: RESOLUTION,
  security: secured,
  request: { query: RequirementsQuerySchema },
  responses: {
    200: {
      description: '`satisfied` and the `unmet` entries.',
      content: { 'application/json': { schema: RequirementsSchema } },
    },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

const SdkCoordinate = z
  .object({ agreementUrl: z.string().min(1).max(500), agreementVersion: z.string().min(1).max(64) })
  .openapi('AgreementCoordinate');

/** An `unmet` entry of the requirements answer, as it is: `url` and `version` pin it, the rest is ignored. */
const RequirementCoordinate = z
  .object({ url: z.string().min(1).max(500), version: z.string().min(1).max(64) })
  .openapi('AgreementRequirementCoordinate');

export const AcceptanceRequestSchema = z
  .object({
    agreements: z
      .array(z.union([Coordinate, SdkCoordinate, RequirementCoordinate]))
      .min(1)
      .max(20),
  })
  .openapi('AgreementAcceptanceRequest', {
    description:
      'The agreements to accept, each as a pinned `url|version` string, as `{agreementUrl, agreementVersion}`, or as an `unmet` entry of `GET /v1/agreements/requirements` as it was answered (`{url, version, ...}`). The forms may be mixed.',
    example: { agreements: ['https://patient-care.example/agreements/terms|2026-01'] },
  });

export const AcceptanceSchema = z
  .object({
    agreementUrl: z.string(),
    agreementVersion: z.string(),
    consent: z.string().regex(/^Consent\/[^/]+$/),
    acceptedAt: z.string(),
  })
  .openapi('AgreementAcceptance');

export const AcceptancesSchema = z.object({ acceptances: z.array(AcceptanceSchema) }).openapi('AgreementAcceptances');

export const WithdrawnSchema = z
  .object({
    withdrawn: z.array(z.object({ agreementUrl: z.string(), agreementVersion: z.string(), consent: z.string() })),
  })
  .openapi('AgreementWithdrawal');

export const acceptancesRoute = createRoute({
  method: 'post',
  path: '/v1/agreements/acceptances',
  operationId: 'agreements.accept',
  tags: ['Agreements'],
  summary: 'Accept agreements',
  description:
    "Creates one active Consent per agreement (`policy.uri` = the pinned `url|version`) with clickwrap proof stamped by the server from the session: who (the patient), when (server time), and from what session (the token's login, the client address and user agent). The proof can never be changed. Idempotent: accepting again returns the existing acceptance. Unknown coordinates, a version that is not current or does not apply to the patient, or an empty list: 400, nothing written.",
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: AcceptanceRequestSchema } } } },
  responses: {
    200: {
      description: 'The acceptances (existing ones are returned as they are).',
      content: { 'application/json': { schema: AcceptancesSchema } },
    },
    ...errorResponses(400, 413, 415, ...SECURED_STATUSES),
  },
});

export const WithdrawalRequestSchema = z
  .object({
    agreementUrl: z.string().min(1).max(500),
    agreementVersion: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .openapi({ description: 'Default: every active acceptance of the agreement.' }),
    acknowledgeConsequence: z
      .boolean()
      .optional()
      .openapi({ description: 'Must be `true` to withdraw a required agreement.' }),
  })
  .openapi('AgreementWithdrawalRequest', {
    example: { agreementUrl: 'https://patient-care.example/agreements/sms', acknowledgeConsequence: false },
  });

export const withdrawalsRoute = createRoute({
  method: 'post',
  path: '/v1/agreements/withdrawals',
  operationId: 'agreements.withdraw',
  tags: ['Agreements'],
  summary: 'Withdraw an acceptance',
  description:
    'The Consent becomes `inactive`; the record and its proof are kept. A required agreement needs `acknowledgeConsequence: true`, else 422 `acknowledgement_required` with `details.consequence`. Nothing accepted to withdraw: 404.',
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: WithdrawalRequestSchema } } } },
  responses: {
    200: {
      description: 'What was withdrawn.',
      content: { 'application/json': { schema: WithdrawnSchema } },
    },
    ...errorResponses(400, 404, 413, 415, 422, ...SECURED_STATUSES),
  },
});
