import type { DocumentReference, Media, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { startAssessment, storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';
import { scaled } from '../support/slowness';

/**
 * The evidence a patient sends, shown to her tenant's clinicians and nobody else (bots/lib/evidence.ts):
 * each checked upload recorded in her record (a Media for a photo, a DocumentReference for a PDF) pointing
 * at her upload itself, `Binary/<id>`, at full size: her tenant's clinicians read that Binary (presigned in
 * the record, or by id), since Medplum >= 5.1.18 lets a Binary be read only by whoever may read its
 * securityContext, her Patient (packages/server/src/fhir/repo.ts authorizeBinarySecurityContext); access
 * policies cannot restrict Binary otherwise (packages/core/src/access.ts). No `data:` copies.
 */
let gw: TestGateway;
let northwind: Clinician;
let southridge: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  northwind = await demoClinician(gw.backend, 'northwind');
  southridge = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

const JPEG = new Uint8Array([
  0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xd9,
]);
const PDF = new TextEncoder().encode('%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');

async function upload(patient: DemoActor, bytes: Uint8Array, contentType: string, filename: string) {
  const response = await gw.app.request(`http://gateway.test/v1/documents?filename=${filename}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${patient.token}`, 'content-type': contentType },
    body: bytes as Uint8Array<ArrayBuffer>,
  });
  expect(response.status).toBe(201);
  return (await response.json()) as { url: string; contentType: string; size: number; hash: string; title?: string };
}

/** A fresh Northwind patient completes the blood-pressure check with these files as her reading's photo. */
async function intakeWith(files: { bytes: Uint8Array; contentType: string; filename: string }[]) {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const uploads = [];
  for (const file of files) {
    uploads.push(await upload(patient, file.bytes, file.contentType, file.filename));
  }
  const { tasks } = await startAssessment(gw, patient, 'northwind/assessments/blood-pressure-check');
  const questionnaireTask = tasks.find((t) => t.kind === 'questionnaire');
  const answers = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
    token: patient.token,
    body: {
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      questionnaire: questionnaireTask?.questionnaire,
      item: [
        { linkId: 'diagnosed', answer: [{ valueBoolean: true }] },
        { linkId: 'medication', answer: [{ valueBoolean: false }] },
        { linkId: 'reading-photo', answer: uploads.map((u) => ({ valueAttachment: u })) },
      ],
    },
  });
  expect(answers.status, answers.text).toBe(201);
  const response = answers.body as QuestionnaireResponse;
  const done = await gw.call('POST', `/v1/${questionnaireTask?.task.replace('Task/', 'tasks/')}/complete`, {
    token: patient.token,
    body: { questionnaireResponse: `QuestionnaireResponse/${response.id}` },
  });
  expect(done.status, done.text).toBe(200);
  // Her answers as the completion pinned them: made readable (issue 48).
  const pinned = (done.body as { questionnaireResponse: string }).questionnaireResponse;
  return { patient, uploads, response, pinned };
}

const evidenceOf = <T extends Media | DocumentReference>(type: T['resourceType'], patient: DemoActor) =>
  gw.backend.systemRepo.searchResources<T>({
    resourceType: type,
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });

const tokenOf = (clinician: Clinician) => clinician.medplum.getAccessToken() as string;

/** The bytes behind a presigned URL (Medplum's storage route), as her clinician's browser would fetch them. */
async function bytesAt(url: string | undefined): Promise<Uint8Array> {
  expect(url).toMatch(/^http.*\/storage\/[^?]+\?Expires=\d+&Signature=/);
  const response = await gw.backend.fetch(new Request(url as string));
  expect(response.status).toBe(200);
  return new Uint8Array(await response.arrayBuffer());
}

describe('her uploads, as her clinicians see them', () => {
  it('a photo becomes a Media of her record pointing at her upload itself (Binary/<id>), marked with the upload and part of her answers; no data: copy', async () => {
    const { patient, uploads, response, pinned } = await intakeWith([
      { bytes: JPEG, contentType: 'image/jpeg', filename: 'reading.jpg' },
    ]);
    const [media] = await evidenceOf<Media>('Media', patient);
    expect(uploads[0].url).toMatch(/^Binary\/[0-9a-f-]+$/);
    expect(pinned).toMatch(new RegExp(`^QuestionnaireResponse/${response.id}/_history/`));
    // Her answers as clinicians read them: each question's text, the photo as the upload it is.
    const readable = await gw.backend.systemRepo.readVersion<QuestionnaireResponse>(
      'QuestionnaireResponse',
      pinned.split('/')[1],
      pinned.split('/')[3],
    );
    expect(readable.item?.map((i) => i.text)).toEqual([
      'Has a clinician ever told you that you have high blood pressure?',
      'Do you take medicine for your blood pressure?',
      expect.stringMatching(/photo/i),
    ]);
    expect(readable.item?.[2].answer?.[0].valueAttachment).toMatchObject({
      contentType: 'image/jpeg',
      url: uploads[0].url,
      size: JPEG.byteLength,
      title: uploads[0].title ?? 'Upload',
      hash: uploads[0].hash,
    });
    expect(media).toMatchObject({
      status: 'completed',
      subject: { reference: `Patient/${patient.patient.id}` },
      identifier: [{ system: SYSTEMS.evidence, value: uploads[0].url }],
      partOf: [{ reference: pinned }],
      content: { contentType: 'image/jpeg', url: uploads[0].url, size: JPEG.byteLength, hash: uploads[0].hash },
    });
    expect(JSON.stringify(media)).not.toContain('data:');
    expect(media.meta?.author?.reference).toMatch(/^Bot\//);
    expect(media.meta?.accounts).toEqual([patient.patient.managingOrganization]);
  });

  it('her tenant’s clinician opens it (presigned in the Media, and the Binary by id); the other tenant’s clinician, another patient and she herself directly do not', async () => {
    const { patient, uploads } = await intakeWith([
      { bytes: JPEG, contentType: 'image/jpeg', filename: 'reading.jpg' },
    ]);
    const [media] = await evidenceOf<Media>('Media', patient);
    const path = fhirPath(`Media/${media.id}`);
    const mine = await direct(gw.backend, tokenOf(northwind), 'GET', path);
    expect(mine.status).toBe(200);
    expect(await bytesAt((mine.body as Media).content.url)).toEqual(JPEG);
    const searched = await direct(
      gw.backend,
      tokenOf(northwind),
      'GET',
      fhirPath(`Media?subject=Patient/${patient.patient.id}`),
    );
    expect(JSON.stringify(searched.body)).toContain(media.id);
    const binary = fhirPath(uploads[0].url);
    const byId = await gw.backend.fetch(
      new Request(new URL(binary, gw.backend.baseUrl), { headers: { authorization: `Bearer ${tokenOf(northwind)}` } }),
    );
    expect(byId.status).toBe(200);
    expect(new Uint8Array(await byId.arrayBuffer())).toEqual(JPEG);
    // The other tenant's clinician: neither the Media nor the Binary, nor a presigned URL anywhere.
    expect((await direct(gw.backend, tokenOf(southridge), 'GET', path)).status).toBe(404);
    const southridgeSearch = await direct(gw.backend, tokenOf(southridge), 'GET', fhirPath('Media'));
    expect(JSON.stringify(southridgeSearch.body)).not.toContain(media.id);
    expect((await direct(gw.backend, tokenOf(southridge), 'GET', binary)).status).toBe(404);
    for (const reader of [gw.backend.patients.bob.token, patient.token]) {
      expect([403, 404]).toContain((await direct(gw.backend, reader, 'GET', path)).status);
      expect([403, 404]).toContain((await direct(gw.backend, reader, 'GET', binary)).status);
    }
    // Through the gateway: the record plane serves no Media; another patient's document is not found.
    const bob = gw.backend.patients.bob.token;
    expect([403, 404]).toContain((await gw.call('GET', `/v1/fhir/Media/${media.id}`, { token: bob })).status);
    expect((await gw.call('GET', `/v1/documents/${uploads[0].url.split('/')[1]}`, { token: bob })).status).toBe(404);
  });

  it('a PDF becomes a DocumentReference pointing at her upload; nobody but the completing bot writes or changes one', async () => {
    const { patient, uploads } = await intakeWith([
      { bytes: PDF, contentType: 'application/pdf', filename: 'labs.pdf' },
    ]);
    const [document] = (await evidenceOf<DocumentReference>('DocumentReference', patient)).filter((d) =>
      d.identifier?.some((i) => i.system === SYSTEMS.evidence),
    );
    expect(document.content[0].attachment).toMatchObject({
      contentType: 'application/pdf',
      url: uploads[0].url,
      size: PDF.byteLength,
    });
    expect(document.identifier).toEqual([{ system: SYSTEMS.evidence, value: uploads[0].url }]);
    const before = storeSnapshot(gw.backend);
    const path = fhirPath(`DocumentReference/${document.id}`);
    const forged = {
      ...document,
      content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0=' } }],
    };
    expect((await direct(gw.backend, tokenOf(northwind), 'PUT', path, { body: forged })).status).toBe(403);
    const made = await direct(gw.backend, tokenOf(northwind), 'POST', fhirPath('DocumentReference'), {
      body: { ...forged, id: undefined, meta: undefined },
    });
    expect(made.status).toBe(403);
    expect([403, 404]).toContain((await direct(gw.backend, patient.token, 'PUT', path, { body: forged })).status);
    const media = await direct(gw.backend, tokenOf(northwind), 'POST', fhirPath('Media'), {
      body: {
        resourceType: 'Media',
        status: 'completed',
        subject: { reference: `Patient/${patient.patient.id}` },
        content: {},
      },
    });
    expect(media.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it(
    'a phone photo of 6 MB and a PDF of 10 MB reach her clinician whole',
    async () => {
      const photo = new Uint8Array(6 * 1000 * 1000);
      photo.set(JPEG.subarray(0, 4));
      photo[photo.length - 1] = 0xd9;
      const pdf = new Uint8Array(10 * 1000 * 1000);
      pdf.set(PDF.subarray(0, 9));
      // The intake's photo question takes one file: one patient sends the photo, another the PDF.
      const { patient } = await intakeWith([{ bytes: photo, contentType: 'image/jpeg', filename: 'phone.jpg' }]);
      const { patient: other } = await intakeWith([
        { bytes: pdf, contentType: 'application/pdf', filename: 'labs.pdf' },
      ]);
      const [media] = await evidenceOf<Media>('Media', patient);
      const [document] = (await evidenceOf<DocumentReference>('DocumentReference', other)).filter((d) =>
        d.identifier?.some((i) => i.system === SYSTEMS.evidence),
      );
      expect(media.content.size).toBe(photo.byteLength);
      expect(document.content[0].attachment.size).toBe(pdf.byteLength);
      const read = async (path: string) => (await direct(gw.backend, tokenOf(northwind), 'GET', fhirPath(path))).body;
      const shownPhoto = await bytesAt(((await read(`Media/${media.id}`)) as Media).content.url);
      expect(shownPhoto.byteLength).toBe(photo.byteLength);
      expect(Buffer.from(shownPhoto).equals(Buffer.from(photo))).toBe(true);
      const shownPdf = await bytesAt(
        ((await read(`DocumentReference/${document.id}`)) as DocumentReference).content[0].attachment.url,
      );
      expect(Buffer.from(shownPdf).equals(Buffer.from(pdf))).toBe(true);
    },
    scaled(120_000),
  );
});
