import type { Binary, DocumentReference, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryIdOf } from '../../contracts/attachments';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Attachment URLs as Medplum 5.0.10 serves them (packages/server/src/fhir/rewrite.ts and storage/): stored
 * as `Binary/<id>`, handed to a reader who may read the Binary as a presigned
 * `<storageBaseUrl><id>/<versionId>?Expires=…&Signature=…`, and turned back into `Binary/<id>` on write.
 */
let backend: TestBackend;
let now = new Date();
beforeAll(async () => {
  backend = await startTestBackend({ clock: () => now });
});
afterAll(() => backend?.close());

const PRESIGNED = /^http:\/\/embedded\.medplum\.local\/storage\/([\w-]+)\/([\w-]+)\?Expires=(\d+)&Signature=[\w-]+$/;

async function aliceUpload(): Promise<Binary & { id: string }> {
  const alice = backend.patients.alice;
  const res = await direct(backend, alice.token, 'POST', fhirPath('Binary'), {
    rawBody: '%PDF-1.7 presigned',
    headers: { 'content-type': 'application/pdf', 'x-security-context': `Patient/${alice.patient.id}` },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as Binary & { id: string };
}

/** Her answers holding the upload, written by her (as POST /v1/fhir/QuestionnaireResponse does). */
async function answersWith(url: string): Promise<QuestionnaireResponse & { id: string }> {
  const alice = backend.patients.alice;
  return (await alice.medplum.createResource<QuestionnaireResponse>({
    resourceType: 'QuestionnaireResponse',
    status: 'in-progress',
    subject: { reference: `Patient/${alice.patient.id}` },
    author: { reference: `Patient/${alice.patient.id}` },
    source: { reference: `Patient/${alice.patient.id}` },
    item: [{ linkId: 'photo', answer: [{ valueAttachment: { contentType: 'application/pdf', url } }] }],
  })) as QuestionnaireResponse & { id: string };
}

const attachmentUrl = (answers: QuestionnaireResponse) => answers.item?.[0]?.answer?.[0]?.valueAttachment?.url;

describe('attachment URLs, as Medplum serves them', () => {
  it('a reader who may read the Binary gets a presigned URL; the stored form stays Binary/<id>', async () => {
    const binary = await aliceUpload();
    const answers = await answersWith(`Binary/${binary.id}`);
    const asAdmin = await backend.admin.readResource('QuestionnaireResponse', answers.id);
    const match = PRESIGNED.exec(attachmentUrl(asAdmin) ?? '');
    expect(match?.[1]).toBe(binary.id);
    expect(match?.[2]).toBe(binary.meta?.versionId);
    expect(Number(match?.[3])).toBe(Math.floor(now.getTime() / 1000) + 3600);
    const stored = await backend.systemRepo.readResource<QuestionnaireResponse>('QuestionnaireResponse', answers.id);
    expect(attachmentUrl(stored)).toBe(`Binary/${binary.id}`);
  });

  it('a reader who may not read the Binary (a patient: no Binary read) keeps Binary/<id>', async () => {
    const binary = await aliceUpload();
    const answers = await answersWith(`Binary/${binary.id}`);
    expect(attachmentUrl(answers)).toBe(`Binary/${binary.id}`);
    const read = await backend.patients.alice.medplum.readResource('QuestionnaireResponse', answers.id);
    expect(attachmentUrl(read)).toBe(`Binary/${binary.id}`);
  });

  it('a presigned URL or a FHIR URL written back is stored as Binary/<id>', async () => {
    const binary = await aliceUpload();
    const presigned = attachmentUrl(
      await backend.admin.readResource('QuestionnaireResponse', (await answersWith(`Binary/${binary.id}`)).id),
    ) as string;
    for (const url of [presigned, `${backend.baseUrl}fhir/R4/Binary/${binary.id}`]) {
      const answers = await answersWith(url);
      const stored = await backend.systemRepo.readResource<QuestionnaireResponse>('QuestionnaireResponse', answers.id);
      expect(attachmentUrl(stored)).toBe(`Binary/${binary.id}`);
    }
    // Another host's URL names no Binary of this Medplum: stored as it was sent.
    const foreign = `https://elsewhere.example/storage/${binary.id}/1?Expires=1&Signature=x`;
    const answers = await answersWith(foreign);
    expect(
      attachmentUrl(await backend.systemRepo.readResource<QuestionnaireResponse>('QuestionnaireResponse', answers.id)),
    ).toBe(foreign);
  });

  it('the storage route serves the bytes for a valid signature only (storage/routes.ts: none 401, bad 401, expired 410), never as active content', async () => {
    const binary = await aliceUpload();
    const answers = await answersWith(`Binary/${binary.id}`);
    const presigned = attachmentUrl(await backend.admin.readResource('QuestionnaireResponse', answers.id)) as string;
    const served = await backend.fetch(presigned);
    expect(served.status).toBe(200);
    expect(await served.text()).toBe('%PDF-1.7 presigned');
    expect(served.headers.get('content-type')).toBe('application/pdf');
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
    expect(served.headers.get('content-security-policy')).toContain('sandbox');
    const unsigned = new URL(presigned);
    unsigned.searchParams.delete('Signature');
    expect((await backend.fetch(unsigned)).status).toBe(401);
    const tampered = new URL(presigned);
    tampered.searchParams.set('Expires', String(Number(tampered.searchParams.get('Expires')) + 3600));
    expect((await backend.fetch(tampered)).status).toBe(401);
    const later = now;
    now = new Date(now.getTime() + 3601 * 1000);
    try {
      expect((await backend.fetch(presigned)).status).toBe(410);
    } finally {
      now = later;
    }
  });

  it('binaryIdOf (what the bots and provisioning parse) names a Binary in each form Medplum writes or serves, and nothing else', async () => {
    const binary = await aliceUpload();
    const reference: DocumentReference = {
      resourceType: 'DocumentReference',
      status: 'current',
      content: [{ attachment: { url: `Binary/${binary.id}` } }],
    };
    const presigned = `${backend.baseUrl}storage/${binary.id}/${binary.meta?.versionId}?Expires=1&Signature=x`;
    expect(binaryIdOf(presigned, { baseUrl: backend.baseUrl })).toBe(binary.id);
    expect(binaryIdOf(reference.content[0].attachment.url, { baseUrl: backend.baseUrl })).toBe(binary.id);
    expect(binaryIdOf(`${backend.baseUrl}fhir/R4/Binary/${binary.id}`, { baseUrl: backend.baseUrl })).toBe(binary.id);
    for (const foreign of [
      `https://elsewhere.example/storage/${binary.id}/1`,
      `${backend.baseUrl}fhir/R4/Patient/${binary.id}`,
      `Binary/../Patient/x`,
      'Binary/',
    ]) {
      expect(binaryIdOf(foreign, { baseUrl: backend.baseUrl }), foreign).toBeUndefined();
    }
    const hosted = { baseUrl: 'https://api.medplum.com/', storageBaseUrl: 'https://storage.medplum.com/binary/' };
    expect(binaryIdOf(`https://storage.medplum.com/binary/${binary.id}/2?Signature=y`, hosted)).toBe(binary.id);
  });
});
