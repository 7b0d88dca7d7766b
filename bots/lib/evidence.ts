import { Buffer } from 'node:buffer';
import type { Attachment, BundleEntry, Coding, DocumentReference, Media } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';

/**
 * What a patient uploaded, as her tenant's clinicians see it in Medplum's own apps (the Provider app's
 * timeline shows Media; the admin app shows any resource's attachments). Medplum 5.0.10 does not check a
 * Binary's securityContext on `GET Binary/<id>` (packages/server/src/fhir/binary.ts reads it with the
 * caller's repository only; access policies cannot restrict Binary: packages/core/src/access.ts), so a
 * clinician given Binary reads could read every upload of every tenant by id. Clinicians therefore get no
 * Binary at all: the completing bot, which has just read and checked her bytes, writes them INTO a resource
 * of her record, a Media (images) or a DocumentReference (PDF), as a `data:` URL. That resource is about her,
 * so Medplum files it in her tenant's compartment, and the clinician policy's tenant criteria decide who
 * reads it, as for the rest of her chart. `data:` URLs are not rewritten by Medplum (packages/server/src/fhir/
 * rewrite.ts rewrites `Binary/` URLs only) and `@medplum/react`'s AttachmentDisplay renders them.
 *
 * A request is bounded by the server's JSON limit (Medplum's `maxJsonSize`, 1 MB by default): up to
 * EVIDENCE_INLINE_BYTES of a completion's files are copied; a file past that budget is recorded without
 * its bytes, and the record says so (docs/clinicians.md).
 */
export const EVIDENCE_INLINE_BYTES = 512 * 1024;

export interface CheckedUpload {
  /** The Binary it was uploaded as. */
  binary: string;
  attachment: Attachment;
  bytes: Uint8Array;
}

const PHOTO: Coding = { system: 'http://terminology.hl7.org/CodeSystem/media-type', code: 'image', display: 'Image' };

/** The transaction entries that show her checked uploads to her tenant's clinicians, in the answers' order. */
export function evidenceEntries(
  uploads: CheckedUpload[],
  patient: string,
  answers: string,
  tags: Coding[],
  now: string,
): BundleEntry[] {
  let budget = EVIDENCE_INLINE_BYTES;
  return uploads.map((upload) => {
    const inline = upload.bytes.byteLength <= budget;
    if (inline) {
      budget -= upload.bytes.byteLength;
    }
    const contentType = upload.attachment.contentType as string;
    const content: Attachment = {
      contentType,
      title: upload.attachment.title ?? 'Upload',
      size: upload.bytes.byteLength,
      ...(upload.attachment.hash ? { hash: upload.attachment.hash } : {}),
      creation: now,
      ...(inline ? { url: `data:${contentType};base64,${Buffer.from(upload.bytes).toString('base64')}` } : {}),
    };
    const identifier = [{ system: SYSTEMS.evidence, value: upload.binary }];
    const note = inline
      ? []
      : [
          {
            text: `Too large to show here (${upload.bytes.byteLength} bytes); the patient's upload is ${upload.binary}.`,
          },
        ];
    const meta = tags.length > 0 ? { tag: tags } : undefined;
    if (contentType.startsWith('image/')) {
      const media: Media = {
        resourceType: 'Media',
        ...(meta ? { meta } : {}),
        identifier,
        status: 'completed',
        type: { coding: [PHOTO] },
        subject: { reference: patient },
        partOf: [{ reference: answers }],
        createdDateTime: now,
        content,
        ...(note.length > 0 ? { note } : {}),
      };
      return { resource: media, request: { method: 'POST', url: 'Media' } };
    }
    const document: DocumentReference = {
      resourceType: 'DocumentReference',
      ...(meta ? { meta } : {}),
      identifier,
      status: 'current',
      subject: { reference: patient },
      date: now,
      description: inline ? 'Uploaded by the patient with her answers' : note[0]?.text,
      content: [{ attachment: content }],
      context: { related: [{ reference: answers }] },
    };
    return { resource: document, request: { method: 'POST', url: 'DocumentReference' } };
  });
}
