import { createRoute, z } from '@hono/zod-openapi';
import { fhirText, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import { referenceTo } from './tasks';

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

const Canonical = z
  .string()
  .regex(/^\S+\|\S+$/)
  .max(512);
const note = fhirText(2000).optional().openapi({
  description:
    'What the patient wants the care team to know: text, not only whitespace, without control characters (tab and line breaks are fine).',
});

const MedicationProposalSchema = z
  .object({
    medication: z
      .string()
      .regex(/^http:\/\/www\.nlm\.nih\.gov\/research\/umls\/rxnorm\|[0-9]{1,12}$/)
      .openapi({ description: `An RxNorm product, \`${RXNORM}|<code>\`.`, example: `${RXNORM}|314076` }),
    note,
  })
  .strict()
  .openapi('MedicationProposal');

const TreatmentOptionProposalSchema = z
  .object({
    treatmentOption: Canonical.openapi({
      description: "A treatment option of the patient's catalog (an ActivityDefinition), `url|version`.",
      example: 'https://patient-care.example/northwind/treatment-options/lisinopril-10|2',
    }),
    note,
  })
  .strict()
  .openapi('TreatmentOptionProposal');

const ProtocolProposalSchema = z
  .object({
    protocol: Canonical.openapi({
      description: 'A protocol `GET /v1/protocols` lists to the patient (its `protocol`), `url|version`.',
      example: 'https://patient-care.example/northwind/protocols/hypertension-treatment|2',
    }),
    note,
  })
  .strict()
  .openapi('ProtocolProposal');

export const PatientRequestSchema = z
  .union([MedicationProposalSchema, TreatmentOptionProposalSchema, ProtocolProposalSchema])
  .openapi('PatientRequest', {
    example: { protocol: 'https://patient-care.example/northwind/protocols/hypertension-treatment|2' },
  });

export const PatientRequestAnswerSchema = z
  .object({
    request: z
      .string()
      .regex(/^(MedicationRequest|ServiceRequest)\/[A-Za-z0-9\-.]{1,64}$/)
      .openapi({
        description:
          'The proposal (`intent` proposal, requester: the patient): a MedicationRequest for a medication or a treatment option, a ServiceRequest for a protocol.',
        example: 'MedicationRequest/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      }),
    task: referenceTo('Task').openapi({ description: "The care team's review task for it (in the tenant's queue)." }),
  })
  .openapi('PatientRequestAnswer');

export const createRequestRoute = createRoute({
  method: 'post',
  path: '/v1/requests',
  operationId: 'requests.create',
  tags: ['Requests'],
  summary: 'Propose a medication, protocol or treatment option for review',
  description:
    "Exactly one of `medication` (RxNorm), `treatmentOption` or `protocol` (`url|version`), and an optional `note`. Writes, in one transaction, the proposal (`intent` proposal, the patient as requester; `instantiatesCanonical` for an option or protocol) and a review task in the tenant's clinician queue. A proposal changes nothing of the patient's care: a clinician reviews it, and treatment still starts only through the clinical spine. While the same request is open, asking again answers it (200) instead of a second one. A treatment option or protocol the patient's catalog does not offer her (another tenant's, another jurisdiction's, unknown, not current) is 400. At most 10 requests can be opened in 24 hours: beyond, 429 `rate_limited` with `Retry-After` and `details.retryAfter` (seconds until the oldest of them is a day old) and `details.limit`.",
  security: secured,
  request: { body: { required: true, content: { 'application/json': { schema: PatientRequestSchema } } } },
  responses: {
    201: { description: 'Proposed.', content: { 'application/json': { schema: PatientRequestAnswerSchema } } },
    200: {
      description: 'The same request is already open: it, as it is.',
      content: { 'application/json': { schema: PatientRequestAnswerSchema } },
    },
    ...errorResponses(400, 413, 415, ...SECURED_STATUSES),
  },
});
