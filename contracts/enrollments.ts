import { createRoute, z } from '@hono/zod-openapi';
import { IdParam, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { PatientTaskSchema, referenceTo } from './tasks';

export const EnrollRequestSchema = z
  .object({
    healthcareService: referenceTo('HealthcareService').openapi({
      description: 'A program offering, as `GET /v1/protocols` lists it (its `start` is this endpoint).',
    }),
  })
  .strict()
  .openapi('EnrollRequest', {
    example: { healthcareService: 'HealthcareService/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e' },
  });

export const EnrollmentSchema = z
  .object({
    carePlan: referenceTo('CarePlan').openapi({ description: 'The enrollment: its `{id}` is this CarePlan’s id.' }),
    episodeOfCare: referenceTo('EpisodeOfCare').optional().openapi({
      description:
        'The journey it belongs to: every resource of it carries the tag `https://patient-care.example/episode|EpisodeOfCare/<id>`.',
    }),
    protocol: z.string().openapi({
      description: 'The pinned program, `url|version`.',
      example: 'https://patient-care.example/northwind/programs/blood-pressure-monitoring|1',
    }),
    status: z.enum(['draft', 'active', 'revoked']),
    tasks: z
      .array(PatientTaskSchema)
      .optional()
      .openapi({ description: 'Active: the tasks the plan issued to her and still open.' }),
    cancelledTasks: z
      .array(referenceTo('Task'))
      .optional()
      .openapi({ description: 'Revoked by this call: the open tasks of the plan it cancelled.' }),
    cancelledAppointments: z.array(referenceTo('Appointment')).optional().openapi({
      description: 'Revoked by this call: the future visits of the plan it cancelled (their slots freed).',
    }),
  })
  .openapi('Enrollment');

export const enrollRoute = createRoute({
  method: 'post',
  path: '/v1/enrollments',
  operationId: 'enrollments.create',
  tags: ['Enrollments'],
  summary: 'Enroll in a program',
  description:
    "Enrolls the patient in a program of her catalog: a `draft` CarePlan instantiating the program's pinned `url|version`, with one activity per action of the program, in a journey (EpisodeOfCare) of its own. One enrollment per patient and program (its url) that is draft or active: calling again answers 200 with it. Nothing is issued until `POST /v1/enrollments/{id}/activate`. Gated: required agreements not accepted -> 409 `consent_required`, nothing written. A clinical protocol is not self-enrollable: 409 `review_required` with `details.use` = `POST /v1/requests` (a clinician's review decides treatment); an assessment: 409 `invalid_state` with `details.use` = `POST /v1/assessments`. An offering she cannot see (another tenant's, another jurisdiction's, unknown) -> 404.",
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: EnrollRequestSchema } } } },
  responses: {
    201: { description: 'Enrolled: the draft plan.', content: { 'application/json': { schema: EnrollmentSchema } } },
    200: {
      description: 'Already enrolled: the enrollment as it is (draft or active).',
      content: { 'application/json': { schema: EnrollmentSchema } },
    },
    ...errorResponses(400, 404, 409, 413, 415, ...SECURED_STATUSES),
  },
});

export const activateEnrollmentRoute = createRoute({
  method: 'post',
  path: '/v1/enrollments/{id}/activate',
  operationId: 'enrollments.activate',
  tags: ['Enrollments'],
  summary: 'Activate an enrollment',
  description:
    "Activates her draft plan (`draft` -> `active`) and, in the same transaction, issues its first tasks: one per questionnaire or measurement action of the program, pinned to the definitions' versions (recurring actions issue their first occurrence). Already active: 200 with it as it is. Revoked: 409 `invalid_state` with `details.state`, nothing changed. Gated: required agreements not accepted -> 409 `consent_required`, nothing written. Another patient's plan, or one that does not exist: 404.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: { description: 'Active.', content: { 'application/json': { schema: EnrollmentSchema } } },
    ...errorResponses(400, 404, 409, ...SECURED_STATUSES),
  },
});

export const unenrollRoute = createRoute({
  method: 'delete',
  path: '/v1/enrollments/{id}',
  operationId: 'enrollments.delete',
  tags: ['Enrollments'],
  summary: 'Unenroll',
  description:
    "Revokes her plan (a draft or active enrollment, or the CarePlan of a treatment she accepted) and, in the same transaction, cancels its open tasks (`ready`, `on-hold`), withdraws the visits it asks for and cancels its future booked visits (reason `unenrolled`, their slots freed, their segments cancelled). Placed medication orders stay (stopping a medicine is a clinician's decision): when the plan has any, a `review-unenrollment` task goes to her care team. Not gated: stopping care never is. Already revoked: 200, nothing changed. A plan in another state (completed by the care team): 409 `invalid_state` with `details.state`. Another patient's plan, or one that does not exist: 404.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: { description: 'Revoked.', content: { 'application/json': { schema: EnrollmentSchema } } },
    ...errorResponses(400, 404, 409, ...SECURED_STATUSES),
  },
});
