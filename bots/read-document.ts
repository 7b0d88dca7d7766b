import { Buffer } from 'node:buffer';
import type { BotEvent, MedplumClient } from '@medplum/core';
import { DOCUMENT_MAX_BYTES, isDocumentType } from '../contracts/attachments';
import { absent } from './lib/absent';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type ReadDocumentResult = BotResult<{ contentType: string; size: number; data: string }>;

/**
 * GET /v1/documents/{id}: one of her own uploads, its bytes (base64). Patients may not read Binaries
 * on Medplum (a read grant would open every Binary of the project on Medplum 5.0.10, which does not
 * check `securityContext` on `GET Binary/:id`), so this bot reads it with its own access and hands it
 * over only when its security context is the caller herself and it is a document type. Anything else,
 * someone else's upload, a bot's code, an id that does not exist: the same 404.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<ReadDocumentResult> {
  const start = await patientWorkflow(medplum, event, 'read-document');
  if (!start.ok) {
    return start;
  }
  const binary = await medplum.readResource('Binary', start.input.document).catch(absent);
  const own = binary?.securityContext?.reference === `Patient/${start.caller.patientId}`;
  if (!binary || !own || !isDocumentType(binary.contentType)) {
    return fail(404, 'not_found', 'No document of yours has this id');
  }
  const bytes = new Uint8Array(
    await (await medplum.download(medplum.fhirUrl('Binary', binary.id as string))).arrayBuffer(),
  );
  if (bytes.byteLength > DOCUMENT_MAX_BYTES) {
    return fail(404, 'not_found', 'No document of yours has this id');
  }
  return {
    ok: true,
    contentType: binary.contentType as string,
    size: bytes.byteLength,
    data: Buffer.from(bytes).toString('base64'),
  };
}
