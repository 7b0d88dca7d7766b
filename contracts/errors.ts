import { z } from '@hono/zod-openapi';
import { FHIR_JSON } from './common';

/** DESIGN section 4: every error code and the one status it is answered with. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  consent_required: 409,
  slot_unavailable: 409,
  invalid_state: 409,
  review_required: 409,
  not_licensed: 409,
  request_in_progress: 409,
  version_conflict: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  acknowledgement_required: 422,
  invalid_country: 422,
  invalid_measurement: 422,
  invalid_attachment: 422,
  invalid_fulfilment: 422,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal: 500,
  upstream_error: 502,
  upstream_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorStatus = (typeof ERROR_STATUS)[ErrorCode];
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/**
 * `details.reason` of a 401: what the gateway can tell without helping a forger (a bad signature, issuer,
 * audience or shape are all `invalid_token`). `revoked`: the token was sound but the session has ended.
 */
export const UNAUTHENTICATED_REASONS = ['missing_token', 'invalid_token', 'expired', 'revoked'] as const;
export type UnauthenticatedReason = (typeof UNAUTHENTICATED_REASONS)[number];

/** `details.reason` of a 403. */
export const FORBIDDEN_REASONS = ['not_a_patient', 'access_policy', 'not_own_record'] as const;
export type ForbiddenReason = (typeof FORBIDDEN_REASONS)[number];

/** The media types a request body may have (`details.accepted` of a 415). */
export const ACCEPTED_BODY_TYPES = ['application/json', FHIR_JSON];

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');

export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).openapi({ description: 'Machine-readable code. Clients branch on it.' }),
      message: z.string().openapi({ description: 'Human-readable text. Never contains internal details.' }),
      details: z
        .object({
          requestId: z.string().openapi({
            description: 'The request id, as in the `X-Request-Id` header: quote it when reporting a problem.',
          }),
        })
        .catchall(z.unknown())
        .openapi({
          description:
            "Structured detail: always `requestId`, and the fields of the code (see each response). Never internal text, tokens or anyone else's data.",
        }),
    }),
  })
  .openapi('Error', {
    description: 'The error envelope of every failure.',
    example: {
      error: {
        code: 'not_found',
        message: 'No such route',
        details: { method: 'GET', path: '/v1/nope', requestId: '6f1c2b0e-3c1d-4f7a-9a55-0c7e0a5d2b11' },
      },
    },
  });

export type ErrorEnvelope = z.infer<typeof ErrorEnvelopeSchema>;

const DESCRIPTIONS: Record<number, string> = {
  400: '`invalid_request`: malformed JSON or a schema violation; `details.issues[]` = `{path, message}` (`path` is `type` for a resource type the record service does not know; an over-long search also has `details.limit`, bytes).',
  401: `\`unauthenticated\`: no, invalid or expired token, or a session that has ended; \`details.reason\` is one of ${list(UNAUTHENTICATED_REASONS)}. \`WWW-Authenticate: Bearer error="invalid_token"\`.`,
  403: `\`forbidden\`: \`details.reason\` is \`not_a_patient\` (a staff, bot or machine token), \`access_policy\` (the platform's access policy denies the action) or \`not_own_record\`. Do not retry.`,
  404: '`not_found`: unknown route (`details.method` and `details.path`, as the gateway saw them) or id, or a resource of another patient or tenant (existence is never revealed).',
  405: '`method_not_allowed`: `details.allow` lists the methods the path does allow, as does the `Allow` header; a refused record-plane write also has `details.use`, the endpoint that owns the change.',
  409: 'A state conflict (`invalid_state` with `details.state`, `consent_required` with `details.agreements`, `review_required` with `details.use`: a clinical protocol is requested for review, never self-enrolled; `slot_unavailable` with `details.slot`: taken since it was listed; `not_licensed` with `details.state`, `details.practitioner` and `details.use`: the practitioner is not licensed where she lives now).',
  412: '`version_conflict`: `If-Match` is not the current version; `details.ifMatch` is the value sent. Read the resource again and retry with its version.',
  413: '`payload_too_large`: the body is over the limit (`details.limit`, bytes).',
  415: `\`unsupported_media_type\`: \`details.accepted\` lists the body media types: ${list(ACCEPTED_BODY_TYPES)}.`,
  422: 'A well-formed request the platform cannot accept: `invalid_country` (`details.path`), `acknowledgement_required` (`details.consequence`), `invalid_measurement` (`details.issues[{index, code, reason, allowedUnits?, range?}]`), `invalid_attachment` (`details.issues[{linkId, url, problems[]}]`), `invalid_fulfilment` (`details.allowed`: the methods allowed for every item of the order, `details.issues[{item, fulfilment, allowed[]}]`).',
  429: '`rate_limited`: too many requests; retry after `Retry-After` seconds (`details.retryAfter`).',
  500: '`internal`: a bug on our side; `details.requestId` identifies it.',
  502: '`upstream_error`: the record service failed; `details.requestId` identifies the call.',
  503: '`upstream_unavailable`: the record service (or the sign-in service) is unreachable; `details.requestId` identifies the call.',
  504: '`upstream_timeout`: the record service did not answer in time; `details.requestId` identifies the call.',
};

export type DocumentedStatus = keyof typeof DESCRIPTIONS & number;

const requestIdHeader = {
  'X-Request-Id': {
    description: 'The request id (yours if you sent a valid one), also in logs.',
    schema: { type: 'string' as const },
  },
};

/** Headers that come with particular statuses (DESIGN section 4). */
const HEADERS: Partial<Record<number, Record<string, { description: string; schema: { type: 'string' } }>>> = {
  401: { 'WWW-Authenticate': { description: 'Bearer error="invalid_token"', schema: { type: 'string' } } },
  405: { Allow: { description: 'The methods this path does allow.', schema: { type: 'string' } } },
  429: { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'string' } } },
};

const RID = '6f1c2b0e-3c1d-4f7a-9a55-0c7e0a5d2b11';
const envelope = (code: ErrorCode, message: string, details: Record<string, unknown> = {}) => ({
  error: { code, message, details: { ...details, requestId: RID } },
});

/** One realistic answer per status (the reference showed the same 404 for every one). */
const EXAMPLES: Record<DocumentedStatus, ErrorEnvelope> = {
  400: envelope('invalid_request', 'The request body does not match the schema', {
    issues: [{ path: 'healthcareService', message: 'Invalid string: must match pattern ^HealthcareService/' }],
  }),
  401: envelope('unauthenticated', 'The access token has expired', { reason: 'expired' }),
  403: envelope('forbidden', 'Only a patient can use this API', { reason: 'not_a_patient' }),
  404: envelope('not_found', 'Not found'),
  405: envelope('method_not_allowed', 'DELETE is not allowed on this path', { allow: ['GET'] }),
  409: envelope('consent_required', 'Required agreements have not been accepted', {
    agreements: [
      {
        url: 'https://patient-care.example/agreements/terms',
        version: '2026-01',
        sourceUrl: 'https://patient-care.example/agreements/terms/2026-01.html',
        category: 'terms',
      },
    ],
  }),
  412: envelope('version_conflict', 'The resource has changed since it was read', { ifMatch: 'W/"3"' }),
  413: envelope('payload_too_large', 'The body is over the limit', { limit: 1048576 }),
  415: envelope('unsupported_media_type', 'The body must be JSON', { accepted: ['application/json'] }),
  422: envelope('invalid_measurement', 'A reading cannot be accepted', {
    issues: [{ index: 0, code: 'http://loinc.org|8480-6', reason: 'unit', allowedUnits: ['mm[Hg]'] }],
  }),
  429: envelope('rate_limited', 'Too many requests; try again later', { retryAfter: 12 }),
  500: envelope('internal', 'Something went wrong on our side'),
  502: envelope('upstream_error', 'The record service failed'),
  503: envelope('upstream_unavailable', 'The record service is at capacity; try again shortly', { retryAfter: 5 }),
  504: envelope('upstream_timeout', 'The record service did not answer in time'),
};

/** Documented error responses for a route: spread into `createRoute({ responses })`. */
export function errorResponses<S extends DocumentedStatus>(...statuses: S[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: DESCRIPTIONS[status],
        headers: { ...requestIdHeader, ...HEADERS[status] },
        content: { 'application/json': { schema: ErrorEnvelopeSchema, example: EXAMPLES[status] } },
      },
    ]),
  ) as unknown as Record<
    S,
    {
      description: string;
      headers: Record<string, { description: string; schema: { type: 'string' } }>;
      content: { 'application/json': { schema: typeof ErrorEnvelopeSchema; example: ErrorEnvelope } };
    }
  >;
}

/**
 * The same documented responses with a status's example replaced by one of that route's own (a route whose
 * typical 409 is not the agreements gate, say), so its reference shows the answer a client will meet.
 */
export function withExample<R extends Record<number, { content: { 'application/json': { example: ErrorEnvelope } } }>>(
  responses: R,
  status: keyof R & number,
  code: ErrorCode,
  message: string,
  details: Record<string, unknown>,
): R {
  const response = responses[status];
  return {
    ...responses,
    [status]: {
      ...response,
      content: {
        'application/json': { ...response.content['application/json'], example: envelope(code, message, details) },
      },
    },
  };
}

/** What every route can answer whatever it does: the frame's own failures. */
export const FRAME_STATUSES = [500] as const;
/** Added to every route that needs a session and reaches Medplum. */
export const SECURED_STATUSES = [401, 403, 429, 500, 502, 503, 504] as const;
