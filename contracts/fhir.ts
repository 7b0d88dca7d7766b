import { createRoute, z } from '@hono/zod-openapi';
import { DATE_PATTERN, FHIR_JSON, FhirResourceSchema, IdParam, ResourceTypeParam, secured, YEAR_SPAN } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';
import {
  FHIR_R4_RESOURCE_TYPES,
  isKnownResourceType,
  MEDPLUM_RESOURCE_TYPES,
  UNKNOWN_RESOURCE_TYPE,
} from './resource-types';

export const MAX_COUNT = 100;
export const DEFAULT_COUNT = 20;
/**
 * Largest search query the gateway forwards, in bytes once percent-encoded as sent to Medplum. Medplum
 * (Node's HTTP server) takes 16 KiB of request line and headers together, the patient's token among
 * them; 8 KiB leaves room for those and is also the request-line limit of common proxies in front of it.
 */
export const MAX_QUERY_BYTES = 8192;

const BundleSchema = z
  .object({
    resourceType: z.literal('Bundle'),
    type: z.literal('searchset'),
    total: z.number().int().optional(),
    link: z.array(z.object({ relation: z.string(), url: z.string() })).optional(),
    entry: z
      .array(
        z.object({ fullUrl: z.string().optional(), resource: FhirResourceSchema.optional() }).catchall(z.unknown()),
      )
      .optional(),
  })
  .catchall(z.unknown())
  .openapi('SearchBundle', {
    description: `A FHIR searchset Bundle. \`link\` and \`entry.fullUrl\` point at this API's own \`/v1/fhir\` URLs; follow \`link[relation=next]\` to page (\`_count\` default ${DEFAULT_COUNT}, max ${MAX_COUNT}).`,
  });

const SearchQuery = z
  .object({
    _count: z.coerce
      .number()
      .int()
      .min(0)
      .max(MAX_COUNT)
      .optional()
      // An integer in the query (coercion would otherwise document `null` too: `?_count=null` is 400).
      .openapi({ type: 'integer', description: `Page size, default ${DEFAULT_COUNT}, max ${MAX_COUNT}.` }),
    _offset: z.coerce
      .number()
      .int()
      .min(0)
      .max(10_000)
      .optional()
      .openapi({ type: 'integer', description: 'Paging offset; use the `next` link rather than building it.' }),
  })
  .catchall(z.union([z.string(), z.array(z.string())]))
  .openapi({
    description: `Standard FHIR search parameters of the type, plus \`status\` and \`_compartment\`. At most ${MAX_QUERY_BYTES} bytes once percent-encoded.`,
  });

/**
 * The `{type}` of every record-plane path: a type the record service does not know is 400 for every
 * method some type allows on that path (a read as a write), with `details.issues[0].path` = `type`; a
 * method no type allows there is 405 first.
 */
export const RecordTypeParam = ResourceTypeParam.refine(isKnownResourceType, {
  message: UNKNOWN_RESOURCE_TYPE,
}).openapi({
  param: { name: 'type', in: 'path' },
  // The document lists exactly the types the check accepts (a pattern admitted names it refuses).
  enum: [...FHIR_R4_RESOURCE_TYPES, ...MEDPLUM_RESOURCE_TYPES],
  example: 'Observation',
  description:
    "A FHIR R4 resource type (or one of Medplum's own). Any other is 400 `invalid_request`, unless the method is one no type allows on the path (DELETE, PATCH...): that is 405 first.",
});

const fhirContent = <T extends z.ZodType>(schema: T) => ({ [FHIR_JSON]: { schema } });

const OPERATIONS_NOTE =
  'FHIR operations (path segments beginning with `$`) are not available: they answer 404 `not_found` with `details.operation`.';

export const searchRoute = createRoute({
  method: 'get',
  path: '/v1/fhir/{type}',
  operationId: 'fhir.search',
  tags: ['Record plane'],
  summary: "Search the patient's record",
  description: `Standard FHIR search over the signed-in patient's own record and their organization's catalog. Results of other patients never appear. The query is forwarded percent-encoded (\`,\` \`:\` \`|\` \`/\` take 3 bytes each); encoded, \`_count\` included, it may be at most ${MAX_QUERY_BYTES} bytes, which the record service accepts with room to spare. A longer query is 400 \`invalid_request\` with \`details.limit\` (bytes). ${OPERATIONS_NOTE}`,
  security: secured,
  request: { params: z.object({ type: RecordTypeParam }), query: SearchQuery },
  responses: {
    200: { description: 'A searchset Bundle.', content: fhirContent(BundleSchema) },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

export const readRoute = createRoute({
  method: 'get',
  path: '/v1/fhir/{type}/{id}',
  operationId: 'fhir.read',
  tags: ['Record plane'],
  summary: 'Read one resource',
  description: `Reads one resource of the patient's record. Another patient's resource is 404, exactly like one that does not exist. ${OPERATIONS_NOTE}`,
  security: secured,
  request: { params: z.object({ type: RecordTypeParam, id: IdParam }) },
  responses: {
    200: { description: 'The resource.', content: fhirContent(FhirResourceSchema) },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});

/**
 * The reads of the record plane's concrete paths. `/v1/fhir/Patient/{id}` and the QuestionnaireResponse
 * paths are listed for their writes; a client that matches the most concrete path first (as OpenAPI says)
 * must find their reads there too. They are the templated reads, served by the same handlers.
 */
export const readPatientRoute = createRoute({
  ...readRoute,
  path: '/v1/fhir/Patient/{id}',
  operationId: 'fhir.readPatient',
  summary: 'Read own demographics',
  description: `The signed-in patient's own Patient (\`GET /v1/fhir/{type}/{id}\` for \`Patient\`). Any other id is 404.`,
  request: { params: z.object({ id: IdParam }) },
});
export const searchQuestionnaireResponsesRoute = createRoute({
  ...searchRoute,
  path: '/v1/fhir/QuestionnaireResponse',
  operationId: 'fhir.searchQuestionnaireResponses',
  summary: 'Search own answers',
  description: `Her QuestionnaireResponses (\`GET /v1/fhir/{type}\` for \`QuestionnaireResponse\`), with the same search rules.`,
  request: { query: SearchQuery },
});
export const readQuestionnaireResponseRoute = createRoute({
  ...readRoute,
  path: '/v1/fhir/QuestionnaireResponse/{id}',
  operationId: 'fhir.readQuestionnaireResponse',
  summary: 'Read own answers',
  description: `One of her QuestionnaireResponses (\`GET /v1/fhir/{type}/{id}\` for \`QuestionnaireResponse\`). Anyone else's is 404.`,
  request: { params: z.object({ id: IdParam }) },
});
export const concreteReadRoutes = [readPatientRoute, searchQuestionnaireResponsesRoute, readQuestionnaireResponseRoute];

const E164 = /^\+[1-9]\d{1,14}$/;

const ContactPointSchema = z
  .object({ system: z.string().optional(), value: z.string().optional(), use: z.string().optional() })
  .catchall(z.unknown())
  .superRefine((point, ctx) => {
    if (point.system === 'phone' && (!point.value || !E164.test(point.value))) {
      ctx.addIssue({ code: 'custom', path: ['value'], message: 'Phone numbers must be E.164, e.g. +14155550101' });
    }
  });

const AddressSchema = z
  .object({
    line: z.array(z.string()).optional(),
    city: z.string().optional(),
    state: z.string().optional(),
    postalCode: z.string().optional(),
    country: z
      .string()
      .optional()
      .openapi({ description: 'Required: ISO 3166-1 alpha-2 (e.g. `US`), else 422 `invalid_country`.' }),
  })
  .catchall(z.unknown());

export const PatientWriteSchema = z
  .object({
    resourceType: z.literal('Patient'),
    id: z.string(),
    name: z
      .array(z.object({ family: z.string().optional(), given: z.array(z.string()).optional() }).catchall(z.unknown()))
      .optional(),
    birthDate: z
      .string()
      .regex(DATE_PATTERN)
      .optional()
      .openapi({ description: `\`YYYY-MM-DD\`, a year from ${YEAR_SPAN.first} to ${YEAR_SPAN.last}.` }),
    gender: z.enum(['male', 'female', 'other', 'unknown']).optional(),
    telecom: z.array(ContactPointSchema).optional(),
    address: z.array(AddressSchema).optional(),
  })
  .catchall(z.unknown())
  .openapi('PatientWrite', {
    example: {
      resourceType: 'Patient',
      id: '0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      name: [{ given: ['Alice'], family: 'Nguyen' }],
      birthDate: '1984-03-02',
      telecom: [{ system: 'phone', value: '+14155550101', use: 'mobile' }],
      address: [{ line: ['1 Main St'], city: 'Oakland', state: 'CA', postalCode: '94607', country: 'US' }],
    },
    description:
      "The patient's own demographics. `address[].country` is required (ISO 3166-1 alpha-2); phones are E.164. `managingOrganization` and `identifier` are kept as stored.",
  });

const IfMatchHeader = z.object({
  'if-match': z.string().optional().openapi({
    description: 'Optional `W/"<versionId>"`: the write only happens if this is still the current version, else 412.',
  }),
});

export const updatePatientRoute = createRoute({
  method: 'put',
  path: '/v1/fhir/Patient/{id}',
  operationId: 'fhir.updatePatient',
  tags: ['Record plane'],
  summary: 'Update own demographics',
  description:
    "Updates the signed-in patient's own Patient resource; the body's `id` is the path's. Any other id, in the path or the body, is 404.",
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    headers: IfMatchHeader,
    body: {
      required: true,
      content: { [FHIR_JSON]: { schema: PatientWriteSchema }, 'application/json': { schema: PatientWriteSchema } },
    },
  },
  responses: {
    200: { description: 'The updated Patient.', content: fhirContent(FhirResourceSchema) },
    ...errorResponses(400, 404, 412, 413, 415, 422, ...SECURED_STATUSES),
  },
});

export const QuestionnaireResponseWriteSchema = z
  .object({
    resourceType: z.literal('QuestionnaireResponse'),
    id: z.string().optional(),
    status: z.enum(['in-progress', 'completed', 'amended', 'entered-in-error', 'stopped']),
    questionnaire: z.string().optional().openapi({ description: 'The answered Questionnaire, pinned: `url|version`.' }),
    subject: z.object({ reference: z.string() }).catchall(z.unknown()).optional().openapi({
      description: 'Must be the signed-in patient (`Patient/<id>`); set to them when omitted.',
    }),
    item: z.array(z.record(z.string(), z.unknown())).optional(),
    // The rest of R4's QuestionnaireResponse, checked by the record service; no other property
    // (a document that allowed any would promise what the record service refuses).
    ...Object.fromEntries(
      [
        'meta',
        'implicitRules',
        'language',
        'text',
        'contained',
        'extension',
        'modifierExtension',
        'identifier',
        'basedOn',
        'partOf',
        'encounter',
        'authored',
        'author',
        'source',
      ].map((field) => [field, z.unknown().optional()]),
    ),
  })
  .strict()
  .openapi('QuestionnaireResponseWrite', {
    description:
      "The patient's own answers: R4's QuestionnaireResponse, no other property (400). Answers can use `valueAttachment`.",
    example: {
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      questionnaire: 'https://patient-care.example/questionnaire/intake|1',
      item: [{ linkId: 'goal', answer: [{ valueString: 'Lose weight' }] }],
    },
  });

const questionnaireResponseBody = {
  required: true,
  content: {
    [FHIR_JSON]: { schema: QuestionnaireResponseWriteSchema },
    'application/json': { schema: QuestionnaireResponseWriteSchema },
  },
} as const;

export const createQuestionnaireResponseRoute = createRoute({
  method: 'post',
  path: '/v1/fhir/QuestionnaireResponse',
  operationId: 'fhir.createQuestionnaireResponse',
  tags: ['Record plane'],
  summary: 'Create own answers',
  security: secured,
  request: {
    body: questionnaireResponseBody,
  },
  responses: {
    201: { description: 'The created QuestionnaireResponse.', content: fhirContent(FhirResourceSchema) },
    ...errorResponses(400, 413, 415, ...SECURED_STATUSES),
  },
});

export const updateQuestionnaireResponseRoute = createRoute({
  method: 'put',
  path: '/v1/fhir/QuestionnaireResponse/{id}',
  operationId: 'fhir.updateQuestionnaireResponse',
  tags: ['Record plane'],
  summary: 'Update own answers',
  description:
    "Updates the signed-in patient's own answers while they are a draft. The body's `id` may be left out (the path names the resource); when given it must be the path's, else 400. Answers already submitted are kept as submitted: 403.",
  security: secured,
  request: {
    params: z.object({ id: IdParam }),
    headers: IfMatchHeader,
    body: questionnaireResponseBody,
  },
  responses: {
    200: { description: 'The updated QuestionnaireResponse.', content: fhirContent(FhirResourceSchema) },
    ...errorResponses(400, 404, 412, 413, 415, ...SECURED_STATUSES),
  },
});

/**
 * The one table of who owns writes of each resource type (spec rule 2). A record-plane write to
 * anything here, or to any other known type, is refused with 405 and `details.use`; to an unknown
 * type, with 400 (RecordTypeParam).
 */
export const WRITE_OWNERS: Record<string, string> = {
  Observation: 'POST /v1/tasks/{id}/complete',
  Task: 'POST /v1/tasks/{id}/complete',
  Consent: 'POST /v1/agreements/acceptances (withdraw: POST /v1/agreements/withdrawals)',
  CarePlan: 'POST /v1/enrollments',
  EpisodeOfCare: 'POST /v1/assessments',
  Appointment: 'POST /v1/appointments/{id}/reschedule (cancel: POST /v1/appointments/{id}/cancel)',
  Encounter: 'POST /v1/appointments/{id}/encounter',
  RequestGroup: 'POST /v1/orders/{id}/decisions',
  MedicationRequest: 'POST /v1/orders/{id}/decisions',
  ServiceRequest: 'POST /v1/orders/{id}/decisions',
  DocumentReference: 'POST /v1/documents',
  Binary: 'POST /v1/documents',
  Media: 'POST /v1/documents',
  Patient: 'PUT /v1/fhir/Patient/{id} (own demographics; registration: POST /v1/patient/home)',
  QuestionnaireResponse: 'POST /v1/fhir/QuestionnaireResponse or PUT /v1/fhir/QuestionnaireResponse/{id}',
};

/** The record-plane methods a patient has per type (the `Allow` header of a refused write). */
export const PATIENT_METHODS: Record<string, { collection: string[]; instance: string[] }> = {
  Patient: { collection: ['GET'], instance: ['GET', 'PUT'] },
  QuestionnaireResponse: { collection: ['GET', 'POST'], instance: ['GET', 'PUT'] },
};

/**
 * What the record plane lets a patient do on a path of a type (`instance`: `/v1/fhir/{type}/{id}`): the
 * one `Allow` every 405 on that path answers, whichever method was refused (HEAD with GET).
 */
export function recordPlaneAllow(type: string, instance: boolean): string[] {
  const allowed = PATIENT_METHODS[type] ?? { collection: ['GET'], instance: ['GET'] };
  const methods = instance ? allowed.instance : allowed.collection;
  return [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].sort();
}

/**
 * Whether any type lets a patient use `method` on a record-plane path of this shape. A method none does
 * (DELETE, PATCH, POST on an instance, PUT on a collection) is 405 before the type is looked at: the
 * method is wrong whatever the type ("method before type").
 */
export function someTypeAllows(method: string, instance: boolean): boolean {
  return Object.keys(PATIENT_METHODS).some((type) => recordPlaneAllow(type, instance).includes(method));
}

/** Types written only by clinicians or the platform: there is no patient endpoint at all. */
export const NO_PATIENT_WRITE = 'none: written by clinicians or the platform only';

const refusal = (method: 'post' | 'put' | 'patch' | 'delete', path: string, operationId: string, summary: string) =>
  createRoute({
    method,
    path,
    operationId,
    tags: ['Record plane'],
    summary,
    description:
      'Record-plane writes other than the ones listed are refused: 405 `method_not_allowed`, with `details.use` naming the endpoint that owns the change, `details.allow` and an `Allow` header. DELETE and PATCH, which no type allows, are 405 whatever the type; for POST and PUT, a type the record service does not know is 400 `invalid_request`, as it is for a read.',
    security: secured,
    request: {
      params: path.includes('{id}')
        ? z.object({ type: RecordTypeParam, id: IdParam })
        : z.object({ type: RecordTypeParam }),
    },
    responses: errorResponses(400, 404, 405, ...SECURED_STATUSES),
  });

export const refusedCreateRoute = refusal('post', '/v1/fhir/{type}', 'fhir.refuseCreate', 'Create (refused)');
export const refusedUpdateRoute = refusal('put', '/v1/fhir/{type}/{id}', 'fhir.refuseUpdate', 'Update (refused)');
export const refusedPatchRoute = refusal('patch', '/v1/fhir/{type}/{id}', 'fhir.refusePatch', 'Patch (refused)');
export const refusedDeleteRoute = refusal('delete', '/v1/fhir/{type}/{id}', 'fhir.refuseDelete', 'Delete (refused)');
