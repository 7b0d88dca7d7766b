import { z } from '@hono/zod-openapi';

export const BEARER = 'patientToken';
export const secured = [{ [BEARER]: [] }];

export const FHIR_JSON = 'application/fhir+json';

/** An open FHIR resource: the record plane passes FHIR through; only the fields we check are described. */
export const FhirResourceSchema = z
  .object({
    resourceType: z.string().openapi({ example: 'Observation' }),
    id: z.string().optional(),
    meta: z.record(z.string(), z.unknown()).optional(),
  })
  .catchall(z.unknown())
  .openapi('FhirResource', { description: 'A FHIR R4 resource (see hl7.org/fhir/R4).' });

export const ResourceTypeParam = z
  .string()
  .regex(/^[A-Z][A-Za-z]+$/)
  .openapi({ param: { name: 'type', in: 'path' }, example: 'Observation', description: 'A FHIR R4 resource type.' });

export const IdParam = z
  .string()
  .regex(/^[A-Za-z0-9\-.]{1,64}$/)
  .openapi({
    param: { name: 'id', in: 'path' },
    example: '0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
    description: 'Resource id.',
  });
