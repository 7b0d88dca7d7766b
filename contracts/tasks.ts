import { z } from '@hono/zod-openapi';

/** `Type/<id>`, as every resource field of the action plane holds it (spec rule 8). */
export const referenceTo = (type: string) =>
  z
    .string()
    .regex(new RegExp(`^${type}/[A-Za-z0-9\\-.]{1,64}$`))
    .openapi({ example: `${type}/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e` });

/** The kinds of patient task (Task.code under SYSTEMS.taskKind). */
export const TASK_KINDS = ['questionnaire', 'measurement'] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

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
  })
  .openapi('PatientTask');

export type PatientTask = z.infer<typeof PatientTaskSchema>;
