import { createRoute, z } from '@hono/zod-openapi';
import { DOCUMENT_MAX_BYTES, DOCUMENT_TYPES } from './attachments';
import { IdParam, secured } from './common';
import { errorResponses, SECURED_STATUSES } from './errors';

const list = DOCUMENT_TYPES.map((t) => `\`${t}\``).join(', ');

export const DocumentQuerySchema = z.object({
  filename: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[^/\\]+$/)
    .refine((name) => !/\p{Cc}/u.test(name), 'no control characters')
    .optional()
    .openapi({ description: "The file's name, kept as the attachment's `title`.", example: 'labs.pdf' }),
});

/** The body is the file itself: bytes, not JSON. */
const DocumentBytes = z.string().openapi({ type: 'string', format: 'binary', description: 'The file, as it is.' });

export const DocumentAttachmentSchema = z
  .object({
    contentType: z.enum(DOCUMENT_TYPES),
    url: z
      .string()
      .regex(/^Binary\/[A-Za-z0-9\-.]{1,64}$/)
      .openapi({ description: 'The stored file, a reference the record service resolves (`Binary/<id>`).' }),
    size: z.number().int().min(1).max(DOCUMENT_MAX_BYTES).openapi({ description: 'Bytes.' }),
    hash: z
      .string()
      .regex(/^[A-Za-z0-9+/]{27}=$/)
      .openapi({ description: 'SHA-1 of the bytes, base64 (as FHIR Attachment.hash).' }),
    title: z.string().optional().openapi({ description: 'The `filename` sent, if any.' }),
    creation: z.string().openapi({ description: 'When the record service stored it.' }),
  })
  .openapi('DocumentAttachment', {
    description: 'A FHIR Attachment: put it as it is in a QuestionnaireResponse answer, `{"valueAttachment": <this>}`.',
    example: {
      contentType: 'application/pdf',
      url: 'Binary/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      size: 48213,
      hash: '2jmj7l5rSw0yVb/vlWAYkK/YBwk=',
      title: 'labs.pdf',
      creation: '2026-01-15T10:00:00.000Z',
    },
  });

const documented = errorResponses(400, 413, 415, ...SECURED_STATUSES);

export const uploadDocumentRoute = createRoute({
  method: 'post',
  path: '/v1/documents',
  operationId: 'documents.upload',
  tags: ['Documents'],
  summary: 'Upload a document',
  description: `The body is the file's bytes; \`Content-Type\` names its type, one of ${list}, and the bytes must carry that type's signature (a PNG sent as \`application/pdf\` is refused). At most ${DOCUMENT_MAX_BYTES} bytes (10 MiB), counted as the body arrives. The file is stored as a Binary of the patient's own record; she reads it back with \`GET /v1/documents/{id}\` (the id of \`Binary/<id>\`). The answer is an attachment to use as it is in a QuestionnaireResponse \`valueAttachment\`; when an answer is submitted with a task, every attachment it uses is checked again (own file, type, signature, size, hash). Not idempotent: the same file sent twice is stored twice, harmlessly. Any refusal stores nothing.`,
  security: secured,
  request: {
    query: DocumentQuerySchema,
    body: {
      required: true,
      content: Object.fromEntries(DOCUMENT_TYPES.map((type) => [type, { schema: DocumentBytes }])),
    },
  },
  responses: {
    201: {
      description: 'Stored: the attachment.',
      content: { 'application/json': { schema: DocumentAttachmentSchema } },
    },
    ...documented,
    400: { ...documented[400], description: '`invalid_request`: an empty body, or a bad `filename`.' },
    413: {
      ...documented[413],
      description: `\`payload_too_large\`: over ${DOCUMENT_MAX_BYTES} bytes (\`details.limit\`).`,
    },
    415: {
      ...documented[415],
      description: `\`unsupported_media_type\`: \`details.declared\` is the \`Content-Type\` sent, \`details.detected\` the type the bytes' signature shows (\`null\`: none of the accepted), \`details.accepted\` the accepted types: ${list}.`,
    },
  },
});

export const readDocumentRoute = createRoute({
  method: 'get',
  path: '/v1/documents/{id}',
  operationId: 'documents.read',
  tags: ['Documents'],
  summary: 'Read one of her documents',
  description:
    "The bytes of a document she uploaded (`id` is the id of the attachment's `Binary/<id>`), with its type. Only her own uploads: another patient's file, or any other stored file, is 404 like an id that does not exist. The record service never lets a patient read a stored file by id directly (`GET /v1/fhir/Binary/{id}` is 404 and names this endpoint), so this is the one way back to her files. Served as a download that no browser runs (`Content-Disposition: attachment`, `X-Content-Type-Options: nosniff`, a sandboxing `Content-Security-Policy`), never cached by shared caches.",
  security: secured,
  request: { params: z.object({ id: IdParam }) },
  responses: {
    200: {
      description: 'The document.',
      content: Object.fromEntries(DOCUMENT_TYPES.map((type) => [type, { schema: DocumentBytes }])),
    },
    ...errorResponses(400, 404, ...SECURED_STATUSES),
  },
});
