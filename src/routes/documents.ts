import {
  DOCUMENT_MAX_BYTES,
  DOCUMENT_TYPES,
  detectDocumentType,
  isDocumentType,
  mediaTypeOf,
} from '../../contracts/attachments';
import { DocumentAttachmentSchema, readDocumentRoute, uploadDocumentRoute } from '../../contracts/documents';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { ApiError } from '../errors';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';

export function registerDocumentRoutes(app: App): void {
  app.openapi(uploadDocumentRoute, async (c) => {
    const { filename } = c.req.valid('query');
    // Nothing refused here reaches Medplum otherwise: ask it once, so a revoked session is 401 here too.
    const refuse = async (error: ApiError): Promise<never> => {
      await medplumOf(c).readResource('Patient', c.get('session').patientId);
      throw error;
    };
    const declared = mediaTypeOf(c.req.header('content-type'));
    if (!isDocumentType(declared)) {
      return refuse(unsupported(declared, undefined, `Send one of ${DOCUMENT_TYPES.join(', ')}`));
    }
    const bytes = await readBody(c.req.raw, c.req.header('content-length')).catch(refuse);
    if (bytes.byteLength === 0) {
      return refuse(
        new ApiError('invalid_request', 'The body is empty: send the file', {
          issues: [{ path: '', message: 'empty body' }],
        }),
      );
    }
    const detected = detectDocumentType(bytes);
    if (detected !== declared) {
      return refuse(unsupported(declared, detected, `The bytes are not ${declared}`));
    }
    // Written with the patient's own token, so Medplum stamps it hers and her policy judges it; the
    // security context makes it readable only to who may read her record.
    const binary = await medplumOf(c).createBinary({
      data: bytes,
      contentType: declared,
      securityContext: { reference: c.get('session').profile },
    });
    const attachment = {
      contentType: declared,
      url: `Binary/${binary.id}`,
      size: bytes.byteLength,
      hash: await sha1Base64(bytes),
      title: filename,
      creation: binary.meta?.lastUpdated ?? new Date().toISOString(),
    };
    return c.json(DocumentAttachmentSchema.parse(attachment), 201);
  });

  app.openapi(readDocumentRoute, async (c) => {
    const { id } = c.req.valid('param');
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'read-document' }, { document: id });
    const contentType = String(result.contentType);
    if (!isDocumentType(contentType) || typeof result.data !== 'string') {
      throw new Error('read-document answered no document');
    }
    const bytes = Uint8Array.from(atob(result.data), (ch) => ch.charCodeAt(0));
    return c.body(bytes, 200, {
      'Content-Type': contentType,
      'Content-Disposition': `attachment; filename="${id}"`,
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': "sandbox; default-src 'none'",
      'Cache-Control': 'private, no-store',
    });
  });
}

function unsupported(declared: string | undefined, detected: string | undefined, message: string): ApiError {
  return new ApiError('unsupported_media_type', message, {
    declared: declared ?? null,
    detected: detected ?? null,
    accepted: DOCUMENT_TYPES,
  });
}

const tooLarge = () =>
  new ApiError('payload_too_large', `The document is over ${DOCUMENT_MAX_BYTES} bytes`, { limit: DOCUMENT_MAX_BYTES });

/**
 * The whole body, counted as it streams: a declared length over the limit is refused before reading,
 * and a body that grows past it is cancelled there. Held whole (at most the limit) because its
 * signature and hash are checked before anything is written.
 */
async function readBody(request: Request, contentLength: string | undefined): Promise<Uint8Array<ArrayBuffer>> {
  if (contentLength !== undefined && Number(contentLength) > DOCUMENT_MAX_BYTES) {
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = request.body?.getReader();
  while (reader) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    total += value.byteLength;
    if (total > DOCUMENT_MAX_BYTES) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

async function sha1Base64(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-1', bytes));
  return btoa(String.fromCharCode(...digest));
}
