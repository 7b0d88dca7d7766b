import { z } from '@hono/zod-openapi';

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
  version_conflict: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  acknowledgement_required: 422,
  invalid_country: 422,
  invalid_measurement: 422,
  rate_limited: 429,
  internal: 500,
  upstream_error: 502,
  upstream_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorStatus = (typeof ERROR_STATUS)[ErrorCode];
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).openapi({ description: 'Machine-readable code. Clients branch on it.' }),
      message: z.string().openapi({ description: 'Human-readable text. Never contains internal details.' }),
      details: z
        .record(z.string(), z.unknown())
        .optional()
        .openapi({ description: 'Structured detail; its shape depends on the code (see each response).' }),
    }),
  })
  .openapi('Error', {
    description: 'The error envelope of every failure.',
    example: { error: { code: 'not_found', message: 'Not found', details: { requestId: '6f1c...' } } },
  });

export type ErrorEnvelope = z.infer<typeof ErrorEnvelopeSchema>;

const DESCRIPTIONS: Record<number, string> = {
  400: '`invalid_request`: malformed JSON or a schema violation; `details.issues[]` = `{path, message}`.',
  401: '`unauthenticated`: no, invalid or expired token, or a revoked session. `WWW-Authenticate: Bearer error="invalid_token"`.',
  403: '`forbidden`: a staff, bot or machine token, or the access policy denies the action. Do not retry.',
  404: '`not_found`: unknown route or id, or a resource of another patient or tenant (existence is never revealed).',
  405: '`method_not_allowed`: this write is not allowed on the record plane; `details.use` names the endpoint that owns the change. `Allow` lists what is.',
  409: 'A state conflict (`invalid_state` with `details.state`, `consent_required` with `details.agreements`).',
  412: '`version_conflict`: `If-Match` is not the current version.',
  413: '`payload_too_large`: the body is over the limit (`details.limit`, bytes).',
  415: '`unsupported_media_type`: send `application/json` or `application/fhir+json`.',
  422: 'A well-formed request the platform cannot accept (e.g. `invalid_country`).',
  500: '`internal`: a bug on our side; `details.requestId` identifies it.',
  502: '`upstream_error`: the record service failed.',
  503: '`upstream_unavailable`: the record service is unreachable.',
  504: '`upstream_timeout`: the record service did not answer in time.',
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
};

/** Documented error responses for a route: spread into `createRoute({ responses })`. */
export function errorResponses<S extends DocumentedStatus>(...statuses: S[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: DESCRIPTIONS[status],
        headers: { ...requestIdHeader, ...HEADERS[status] },
        content: { 'application/json': { schema: ErrorEnvelopeSchema } },
      },
    ]),
  ) as unknown as Record<
    S,
    {
      description: string;
      headers: Record<string, { description: string; schema: { type: 'string' } }>;
      content: { 'application/json': { schema: typeof ErrorEnvelopeSchema } };
    }
  >;
}

/** What every route can answer whatever it does: the frame's own failures. */
export const FRAME_STATUSES = [500] as const;
/** Added to every route that needs a session and reaches Medplum. */
export const SECURED_STATUSES = [401, 403, 500, 502, 503, 504] as const;
