import { createRoute, z } from '@hono/zod-openapi';
import { secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { PatientTaskSchema, referenceTo } from './tasks';

export const StartAssessmentRequestSchema = z
  .object({
    healthcareService: referenceTo('HealthcareService').openapi({
      description: 'The offering, as `GET /v1/protocols` lists it.',
    }),
  })
  .openapi('StartAssessmentRequest', {
    example: { healthcareService: 'HealthcareService/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e' },
  });

export const AssessmentSchema = z
  .object({
    episodeOfCare: referenceTo('EpisodeOfCare').openapi({
      description:
        'The journey this assessment belongs to: every resource of it carries the tag `https://patient-care.example/episode|EpisodeOfCare/<id>`, so `GET /v1/fhir/{type}?_tag=…` finds them.',
    }),
    assessment: z.string().openapi({
      description: 'The pinned assessment, `url|version`.',
      example: 'https://patient-care.example/assessments/weight-intake|1',
    }),
    status: z.enum(['active', 'finished']),
    tasks: z.array(PatientTaskSchema),
  })
  .openapi('Assessment');

export const startAssessmentRoute = createRoute({
  method: 'post',
  path: '/v1/assessments',
  operationId: 'assessments.start',
  tags: ['Assessments'],
  summary: 'Start or resume an assessment',
  description:
    "Starts the assessment a catalog offering fronts, or resumes it: one EpisodeOfCare per patient and assessment (its url), so calling again answers 200 with the same episode and tasks. Issues the intake tasks: a questionnaire task pinned to the Questionnaire's `url|version`, and measurement tasks naming their ObservationDefinitions; an assessment is one-time and schedules no future care. Gated: required agreements not accepted -> 409 `consent_required` with `details.agreements` (the `unmet` entries of `GET /v1/agreements/requirements`) and nothing written. An offering that is not an assessment -> 409 `invalid_state` with `details.use` (its start endpoint). An offering the patient cannot see or start (another tenant's, another jurisdiction's, unknown) -> 404.",
  security: secured,
  request: {
    body: { required: true, content: { 'application/json': { schema: StartAssessmentRequestSchema } } },
  },
  responses: {
    201: { description: 'Started.', content: { 'application/json': { schema: AssessmentSchema } } },
    200: {
      description: 'Resumed: the episode and tasks as they are.',
      content: { 'application/json': { schema: AssessmentSchema } },
    },
    ...errorResponses(400, 404, 409, 413, 415, ...SECURED_STATUSES),
  },
});
