import type { DocumentReference, Media, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVIDENCE_INLINE_BYTES } from '../../bots/lib/evidence';
import { SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { startAssessment, storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';

/**
 * The evidence a patient sends, shown to her tenant's clinicians and nobody else (bots/lib/evidence.ts):
 * her checked uploads copied into her record (a Media for a photo, a DocumentReference for a PDF) as
 * `data:` URLs, so that Medplum's apps render them with no Binary grant to clinicians (Medplum 5.0.10
 * reads any Binary by id whatever its securityContext: packages/server/src/fhir/binary.ts, and access
 * policies cannot restrict Binary: packages/core/src/access.ts).
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
  return { patient, uploads, response };
}

const evidenceOf = <T extends Media | DocumentReference>(type: T['resourceType'], patient: DemoActor) =>
  gw.backend.systemRepo.searchResources<T>({
    resourceType: type,
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });

const tokenOf = (clinician: Clinician) => clinician.medplum.getAccessToken() as string;

describe('her uploads, as her clinicians see them', () => {
  it('a photo becomes a Media of her record holding its bytes (a data: URL), marked with the upload it copies and part of her answers', async () => {
    const { patient, uploads, response } = await intakeWith([
      { bytes: JPEG, contentType: 'image/jpeg', filename: 'reading.jpg' },
    ]);
    const [media] = await evidenceOf<Media>('Media', patient);
    expect(media).toMatchObject({
      status: 'completed',
      subject: { reference: `Patient/${patient.patient.id}` },
      identifier: [{ system: SYSTEMS.evidence, value: uploads[0].url }],
      partOf: [{ reference: `QuestionnaireResponse/${response.id}/_history/${response.meta?.versionId}` }],
      content: { contentType: 'image/jpeg', size: JPEG.byteLength, hash: uploads[0].hash },
    });
    expect(media.content.url).toBe(`data:image/jpeg;base64,${Buffer.from(JPEG).toString('base64')}`);
    expect(media.meta?.author?.reference).toMatch(/^Bot\//);
    expect(media.meta?.accounts).toEqual([patient.patient.managingOrganization]);
  });

  it('her tenant’s clinician reads it as stored; the other tenant’s clinician, another patient and she herself directly do not; no clinician reads the Binary', async () => {
    const { patient, uploads } = await intakeWith([
      { bytes: JPEG, contentType: 'image/jpeg', filename: 'reading.jpg' },
    ]);
    const [media] = await evidenceOf<Media>('Media', patient);
    const path = fhirPath(`Media/${media.id}`);
    const mine = await direct(gw.backend, tokenOf(northwind), 'GET', path);
    expect(mine.status).toBe(200);
    expect((mine.body as Media).content.url).toBe(media.content.url);
    const searched = await direct(
      gw.backend,
      tokenOf(northwind),
      'GET',
      fhirPath(`Media?subject=Patient/${patient.patient.id}`),
    );
    expect(JSON.stringify(searched.body)).toContain(media.id);
    expect((await direct(gw.backend, tokenOf(southridge), 'GET', path)).status).toBe(404);
    const southridgeSearch = await direct(gw.backend, tokenOf(southridge), 'GET', fhirPath('Media'));
    expect(JSON.stringify(southridgeSearch.body)).not.toContain(media.id);
    for (const reader of [gw.backend.patients.bob.token, patient.token]) {
      expect([403, 404]).toContain((await direct(gw.backend, reader, 'GET', path)).status);
    }
    // Through the gateway: the record plane serves no Media.
    const viaGateway = await gw.call('GET', `/v1/fhir/Media/${media.id}`, { token: gw.backend.patients.bob.token });
    expect([403, 404]).toContain(viaGateway.status);
    // Clinicians are given no Binary at all (a read grant would open every tenant's uploads by id).
    const binary = fhirPath(uploads[0].url);
    for (const clinician of [northwind, southridge]) {
      expect((await direct(gw.backend, tokenOf(clinician), 'GET', binary)).status).toBe(403);
    }
  });

  it('a PDF becomes a DocumentReference; nobody but the completing bot writes or changes one', async () => {
    const { patient, uploads } = await intakeWith([
      { bytes: PDF, contentType: 'application/pdf', filename: 'labs.pdf' },
    ]);
    const [document] = (await evidenceOf<DocumentReference>('DocumentReference', patient)).filter((d) =>
      d.identifier?.some((i) => i.system === SYSTEMS.evidence),
    );
    expect(document.content[0].attachment).toMatchObject({
      contentType: 'application/pdf',
      url: `data:application/pdf;base64,${Buffer.from(PDF).toString('base64')}`,
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

  it('a file past the inline budget is recorded without its bytes, and says so', async () => {
    // A JPEG just over the budget (its signature first: the upload checks the bytes).
    const big = new Uint8Array(EVIDENCE_INLINE_BYTES + 1);
    big.set(JPEG.subarray(0, 4));
    const { patient, uploads } = await intakeWith([{ bytes: big, contentType: 'image/jpeg', filename: 'big.jpg' }]);
    const [media] = await evidenceOf<Media>('Media', patient);
    expect(media.content).toMatchObject({ contentType: 'image/jpeg', size: big.byteLength });
    expect(media.content.url).toBeUndefined();
    expect(media.note?.[0]?.text).toBe(
      `Too large to show here (${big.byteLength} bytes); the patient's upload is ${uploads[0].url}.`,
    );
  });

  it('one at the budget is shown', async () => {
    const edge = new Uint8Array(EVIDENCE_INLINE_BYTES);
    edge.set(JPEG.subarray(0, 4));
    const { patient } = await intakeWith([{ bytes: edge, contentType: 'image/jpeg', filename: 'edge.jpg' }]);
    const [media] = await evidenceOf<Media>('Media', patient);
    expect(media.content.url?.startsWith('data:image/jpeg;base64,/9j/')).toBe(true);
    expect(media.note).toBeUndefined();
  });
});
