import type { Attachment, BundleEntry, Coding, DocumentReference, Media } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';

/**
 * What a patient uploaded, as her tenant's clinicians see it in Medplum's own apps (the Provider app's
 * timeline shows Media; the admin app shows any resource's attachments). The completing bot, which has just
 * read and checked her bytes, records each upload in her record as a Media (images) or a DocumentReference
 * (PDF) whose attachment points at her upload itself, `Binary/<id>`, at full size. That resource is about her,
 * so Medplum files it in her tenant's compartment and the clinician policy's tenant criteria decide who reads
 * it, as for the rest of her chart. The bytes stay in her Binary, whose `securityContext` is her Patient:
 * Medplum (since 5.1.18: packages/server/src/fhir/repo.ts authorizeBinarySecurityContext, on read, vread and
 * readReferences) lets read it only whoever may read her Patient, and presigns the URL on read for that
 * reader only (packages/server/src/fhir/rewrite.ts), so her tenant's clinicians open it and nobody else does.
 * Provisioning refuses an older Medplum (src/provision/apply.ts OLDEST_SUPPORTED_MEDPLUM).
 */
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
  return uploads.map((upload) => {
    const contentType = upload.attachment.contentType as string;
    const content: Attachment = {
      contentType,
      url: upload.binary,
      title: upload.attachment.title ?? 'Upload',
      size: upload.bytes.byteLength,
      ...(upload.attachment.hash ? { hash: upload.attachment.hash } : {}),
      creation: now,
    };
    const identifier = [{ system: SYSTEMS.evidence, value: upload.binary }];
    const meta = tags.length > 0 ? { meta: { tag: tags } } : {};
    if (contentType.startsWith('image/')) {
      const media: Media = {
        resourceType: 'Media',
        ...meta,
        identifier,
        status: 'completed',
        type: { coding: [PHOTO] },
        subject: { reference: patient },
        partOf: [{ reference: answers }],
        createdDateTime: now,
        content,
      };
      return { resource: media, request: { method: 'POST', url: 'Media' } };
    }
    const document: DocumentReference = {
      resourceType: 'DocumentReference',
      ...meta,
      identifier,
      status: 'current',
      subject: { reference: patient },
      date: now,
      description: 'Uploaded by the patient with her answers',
      content: [{ attachment: content }],
      context: { related: [{ reference: answers }] },
    };
    return { resource: document, request: { method: 'POST', url: 'DocumentReference' } };
  });
}
