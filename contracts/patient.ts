import { createRoute, z } from '@hono/zod-openapi';
import { FHIR_JSON, FhirResourceSchema, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';

export const profileRoute = createRoute({
  method: 'get',
  path: '/v1/patient/profile',
  operationId: 'patient.profile',
  tags: ['Session'],
  summary: 'The signed-in patient',
  description: 'Returns the signed-in Patient. The canonical session check: 401 means sign in again.',
  security: secured,
  responses: {
    200: { description: 'The Patient resource.', content: { [FHIR_JSON]: { schema: FhirResourceSchema } } },
    ...errorResponses(404, ...SECURED_STATUSES),
  },
});

export const PatientHomeSchema = z
  .object({
    organization: z
      .string()
      .regex(/^Organization\/[^/]+$/)
      .openapi({ example: 'Organization/7c1f...' }),
    patient: z
      .string()
      .regex(/^Patient\/[^/]+$/)
      .openapi({ example: 'Patient/0d2c...' }),
  })
  .openapi('PatientHome', { description: "The patient's organization (tenant), decided by the platform." });

export const homeRoute = createRoute({
  method: 'post',
  path: '/v1/patient/home',
  operationId: 'patient.home',
  tags: ['Session'],
  summary: 'Assign a self-registered patient to their organization',
  description:
    "Called once during registration. The organization is decided server-side from the app the patient registered with (the verified token's client), never from the request. Idempotent: calling it again returns the same result and changes nothing. A patient already in another organization gets 409 `invalid_state`; a token not issued to a tenant app gets 403.",
  security: secured,
  responses: {
    200: { description: 'The assignment.', content: { 'application/json': { schema: PatientHomeSchema } } },
    ...errorResponses(409, ...SECURED_STATUSES),
  },
});

export const ConfigSchema = z
  .object({
    projectId: z.string().openapi({ description: 'The Medplum project patients register into.' }),
    medplumBaseUrl: z.string().openapi({ description: 'Where the sign-in and registration endpoints live.' }),
    registration: z
      .object({
        steps: z.array(z.string()),
      })
      .openapi({
        description:
          "The registration flow, in order (Medplum's; `clientId` is the patient app's own, fixed when it is built).",
      }),
    signIn: z
      .object({
        steps: z.array(z.string()),
      })
      .openapi({
        description:
          "Signing in a registered patient, in order (Medplum's password login with PKCE). Medplum takes 5 sign-ins and registrations (`auth/login`, `auth/newuser`) a minute from one client address; the sixth is 429, its OperationOutcome's diagnostics naming the wait (`_msBeforeNext`, milliseconds) and its header `RateLimit: \"requests\";r=0;t=<seconds>`: show it and try again then (the SDK's `signInRetryAfterMs`).",
      }),
  })
  .openapi('Config');

export const configRoute = createRoute({
  method: 'get',
  path: '/v1/config',
  operationId: 'config.get',
  tags: ['Session'],
  summary: 'Environment configuration (public)',
  description: 'No session needed. Read during registration.',
  security: [],
  responses: {
    200: { description: 'The configuration.', content: { 'application/json': { schema: ConfigSchema } } },
    ...errorResponses(500),
  },
});

export type PatientHome = z.infer<typeof PatientHomeSchema>;
export type Config = z.infer<typeof ConfigSchema>;
