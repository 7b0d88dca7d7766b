import { createRoute, z } from '@hono/zod-openapi';
import { secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { START_ENDPOINT } from './systems';

export { START_ENDPOINT };

const Canonical = z
  .string()
  .regex(/^\S+\|\S+$/)
  .openapi({ description: 'The pinned plan this offering fronts, `url|version`.' });

const offering = {
  healthcareService: z
    .string()
    .regex(/^HealthcareService\/[^/]+$/)
    .openapi({
      description: 'The offering: pass it to the start endpoint as it is.',
      example: 'HealthcareService/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
    }),
  name: z.string(),
  description: z.string().optional(),
};

const AssessmentOfferingSchema = z
  .object({
    ...offering,
    type: z.literal('assessment'),
    assessment: Canonical.openapi({ example: 'https://patient-care.example/assessments/weight-intake|1' }),
    start: z.literal(START_ENDPOINT.assessment),
  })
  .openapi('AssessmentOffering', {
    description:
      "A one-time assessment: questionnaires and measurements. Once its tasks are complete a clinician reviews it; the treatment protocol that may follow is her clinician's choice (the clinical spine), and reaches her as a `treatment-offer` task in `GET /v1/tasks` naming the offer.",
  });

const ProgramOfferingSchema = z
  .object({
    ...offering,
    type: z.literal('program'),
    protocol: Canonical,
    start: z.literal(START_ENDPOINT.program),
  })
  .openapi('ProgramOffering', { description: 'A program the patient enrolls in.' });

const ClinicalProtocolOfferingSchema = z
  .object({
    ...offering,
    type: z.literal('clinical-protocol'),
    protocol: Canonical,
    start: z.literal(START_ENDPOINT['clinical-protocol']),
  })
  .openapi('ClinicalProtocolOffering', {
    description:
      'A treatment protocol: it is requested for clinician review, never self-enrolled (care starts only through the clinical spine).',
  });

export const ProtocolSchema = z
  .discriminatedUnion('type', [AssessmentOfferingSchema, ProgramOfferingSchema, ClinicalProtocolOfferingSchema])
  .openapi('Protocol');

/** What an answer withholds for want of her address, and how she gives it. */
export const IncompleteProfileSchema = z
  .object({
    missing: z
      .array(z.string())
      .openapi({ example: ['Patient.address[0].state'], description: 'What her Patient lacks, as FHIR paths.' }),
    withheld: z
      .number()
      .int()
      .openapi({ description: 'Offerings limited to an area, not listed until her address says where she is.' }),
    fix: z.string().openapi({
      example: 'PUT /v1/fhir/Patient/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      description:
        'The call that gives it: her Patient with `address[0].country` (ISO 3166-1, e.g. US) and `address[0].state` (e.g. CA).',
    }),
  })
  .openapi('IncompleteProfile');

export const ProtocolsSchema = z
  .object({
    protocols: z.array(ProtocolSchema),
    incomplete: IncompleteProfileSchema.optional().openapi({
      description:
        'Present when her address lacks a country or state and some offerings are limited to an area: those are withheld until she gives it.',
    }),
  })
  .openapi('Protocols', {
    example: {
      protocols: [
        {
          healthcareService: 'HealthcareService/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
          name: 'Weight-management assessment',
          type: 'assessment',
          assessment: 'https://patient-care.example/assessments/weight-intake|1',
          start: 'POST /v1/assessments',
        },
        {
          healthcareService: 'HealthcareService/5b0e8c1a-0d2c-4b4c-9a45-5fe8c1a5f3e1',
          name: 'Hypertension treatment',
          type: 'clinical-protocol',
          protocol: 'https://patient-care.example/northwind/protocols/hypertension-treatment|2',
          start: 'POST /v1/requests',
        },
      ],
    },
  });

export const protocolsRoute = createRoute({
  method: 'get',
  path: '/v1/protocols',
  operationId: 'protocols.list',
  tags: ['Catalog'],
  summary: 'The care catalog',
  description:
    "The offerings published to the signed-in patient: their organization's own and the platform's (never another organization's), each an active HealthcareService fronting a published, active PlanDefinition through its `fronts-plan` extension, with the plan's pinned `url|version` (`assessment` for assessments, `protocol` for programs and clinical protocols) and the endpoint that starts it (`start`). An offering restricted to jurisdictions (`HealthcareService.coverageArea`: Locations naming a country and, optionally, a state) is listed only to a patient whose first address (`Patient.address[0]`, country and state: the jurisdiction agreements use) is inside one of them; a patient without that address sees only unrestricted offerings. Sorted by type (assessment, program, clinical-protocol), then name. At most 100 offerings. 404: the signed-in patient's own Patient no longer exists (as `GET /v1/patient/profile`).",
  security: secured,
  responses: {
    200: { description: 'The catalog.', content: { 'application/json': { schema: ProtocolsSchema } } },
    ...errorResponses(404, ...SECURED_STATUSES),
  },
});

export type Protocol = z.infer<typeof ProtocolSchema>;
export type Protocols = z.infer<typeof ProtocolsSchema>;
