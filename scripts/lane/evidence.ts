import { createHash } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type { Attachment, Bot, DocumentReference, Media, QuestionnaireResponse, Resource } from '@medplum/fhirtypes';
import { binaryIdOf, defaultStorageBaseUrl } from '../../contracts/attachments';
import { SYSTEMS } from '../../contracts/systems';
import { createPatientCareClient } from '../../src/sdk';
import { answerBloodPressureIntake } from '../intake';
import {
  type Answer,
  type AttackContext,
  adminRead,
  answerOf,
  describe,
  entriesOf,
  gatewayDescribe,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  pause,
  REFUSED,
  row,
  sameSet,
} from './common';

/**
 * The evidence (bots/lib/evidence.ts): the complete-task bot copies her checked
 * uploads into her record, a Media for a photo and a DocumentReference for a PDF, each a `data:` URL, so that
 * her tenant's clinicians see them with no Binary grant (Medplum 5.0.10 reads any Binary by id whatever its
 * securityContext). On the journey patient's intake photo, and on a PDF a new Northwind patient sends with
 * her intake: the copy is hers and her tenant's clinicians' to read, nobody's to write but the bot's, and
 * no clinician or other patient reads the upload itself.
 */
export async function evidence(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const { progress } = ctx;
  const northwind = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const upload = progress.document; // Binary/<id>
  const patient = progress.patient;
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const viaGateway = async (person: Person, path: string) =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/fhir/${path}`, { headers: { authorization: `Bearer ${person.token}` } }),
    );
  const origins = { baseUrl: ctx.baseUrl, storageBaseUrl: defaultStorageBaseUrl(ctx.baseUrl) };
  const sha1 = (bytes: Uint8Array) => createHash('sha1').update(bytes).digest('base64');
  /** A `data:<type>;base64,<bytes>` URL's type and bytes (undefined for any other URL). */
  const dataOf = (url: string | undefined) => {
    const parsed = /^data:([^;,]+);base64,(.*)$/s.exec(url ?? '');
    return parsed ? { contentType: parsed[1], bytes: new Uint8Array(Buffer.from(parsed[2], 'base64')) } : undefined;
  };
  /** The upload's bytes as the admin downloads them (`GET Binary/<id>`, raw). */
  const uploaded = async (binary: string): Promise<Uint8Array | undefined> => {
    const response = await fetch(new URL(`fhir/R4/${binary}`, ctx.baseUrl), {
      headers: { authorization: `Bearer ${ctx.adminToken}`, accept: '*/*' },
    });
    return response.ok ? new Uint8Array(await response.arrayBuffer()) : undefined;
  };
  const evidenceMark = (binary: string) => `${SYSTEMS.evidence}|${binary}`;
  const marks = (r: Media | DocumentReference, binary: string) =>
    (r.identifier ?? []).some((i) => i.system === SYSTEMS.evidence && i.value === binary);
  /** The copies of `binary` in `subject`'s record, as the admin reads them (extended: `meta.author` shows). */
  const copiesOf = async <T extends Media | DocumentReference>(
    type: T['resourceType'],
    subject: string,
    binary: string,
  ): Promise<T[]> =>
    (entriesOf((await adminRead(ctx, `fhir/R4/${type}?subject=${subject}&_count=100`)).body) as T[]).filter((r) =>
      marks(r, binary),
    );
  const completeTask = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|complete-task`)}`)).body,
  )[0] as Bot | undefined;
  const completeTaskRef = completeTask?.id ? `Bot/${completeTask.id}` : undefined;
  const accountsOf = async (subject: string) =>
    (((await adminRead(ctx, `fhir/R4/${subject}`)).body as Resource | undefined)?.meta?.accounts ?? [])
      .map((a) => a.reference ?? '')
      .filter(Boolean);
  /**
   * A copy as the bot must have written it: the mark of her upload, her as subject, written by the
   * complete-task Bot, a `data:` URL of the upload's type whose bytes are the upload's (the admin's
   * download, and the sha1 her answers' attachment carries), in her tenant. Returns the row's verdict.
   */
  const judgeCopy = async (
    copy: Media | DocumentReference | undefined,
    content: Attachment | undefined,
    subject: string,
    binary: string,
    claimed: Attachment | undefined,
  ): Promise<{ good: boolean; said: string }> => {
    if (!copy) {
      return { good: false, said: `no ${evidenceMark(binary)} copy in ${subject}'s record` };
    }
    const data = dataOf(content?.url);
    const stored = await uploaded(binary);
    const tenant = await accountsOf(subject);
    const accounts = (copy.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const author = copy.meta?.author?.reference ?? '';
    const sameBytes = data !== undefined && stored !== undefined && Buffer.from(data.bytes).equals(Buffer.from(stored));
    const hash = data ? sha1(data.bytes) : undefined;
    const subjectRef = (copy as { subject?: { reference?: string } }).subject?.reference;
    const good =
      subjectRef === subject &&
      completeTaskRef !== undefined &&
      author === completeTaskRef &&
      data !== undefined &&
      data.contentType === claimed?.contentType &&
      sameBytes &&
      hash !== undefined &&
      hash === claimed?.hash &&
      content?.hash === claimed?.hash &&
      tenant.length > 0 &&
      sameSet(accounts, tenant);
    return {
      good,
      said: `${copy.resourceType}/${copy.id} (${copy.status}), identifier ${(copy.identifier ?? []).map((i) => `${i.system}|${i.value}`).join(', ')}, subject ${subjectRef}, written by ${author || 'nobody'}${author && author === completeTaskRef ? ' (the complete-task Bot)' : ` (the complete-task Bot is ${completeTaskRef ?? 'not found'})`}; content ${content?.contentType}, ${content?.size} bytes, url ${data ? `data:${data.contentType};base64,… (${data.bytes.byteLength} bytes)` : (content?.url?.slice(0, 60) ?? 'none')}; ${sameBytes ? "the bytes of the admin's download of" : `NOT the bytes of (${stored?.byteLength ?? 'no'} bytes)`} ${binary}; sha1 ${hash ?? 'none'}${hash === claimed?.hash ? ' = ' : ' != '}her attachment's hash ${claimed?.hash ?? 'none'}; meta.accounts ${accounts.join(', ') || 'none'}${sameSet(accounts, tenant) ? " (her tenant's)" : ` (her tenant: ${tenant.join(', ') || 'none'})`}`,
    };
  };
  /** One call whose status must be one of `expected`: held/ok, else FAILED; the row names the exact status. */
  const expectStatus = async (
    step: string,
    person: Person | undefined,
    target: string | undefined,
    missing: string,
    expected: number[],
    call: (person: Person, target: string) => Promise<Answer>,
    pass: 'held' | 'ok' = 'held',
  ): Promise<Answer | undefined> => {
    if (!person || !target) {
      row(step, 'not reached', !person ? 'could not sign in' : missing);
      return undefined;
    }
    try {
      const answer = await call(person, target);
      row(
        step,
        expected.includes(answer.status) ? pass : 'FAILED',
        `expected ${expected.join('/')}, got ${gatewayDescribe(answer)}`,
      );
      return answer;
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };

  // 1. The journey patient's intake photo, copied into her record as a Media.
  const answers = progress.questionnaireResponse
    ? ((await adminRead(ctx, `fhir/R4/${progress.questionnaireResponse}`)).body as QuestionnaireResponse | undefined)
    : undefined;
  const attachmentsOf = (response: QuestionnaireResponse | undefined): Attachment[] => {
    const walk = (items: QuestionnaireResponse['item']): Attachment[] =>
      (items ?? []).flatMap((i) => [
        ...(i.answer ?? []).flatMap((a) => (a.valueAttachment ? [a.valueAttachment] : [])),
        ...walk(i.item),
      ]);
    return walk(response?.item);
  };
  const photo = attachmentsOf(answers).find((a) => upload && `Binary/${binaryIdOf(a.url, origins)}` === upload);
  const copyStep =
    "evidence: the journey patient's intake photo is a Media of her record (identifier evidence|Binary/<her upload>), written by the complete-task Bot, a data: URL whose bytes are her upload's (sha1 = her attachment's hash), meta.accounts her tenant";
  let media: Media | undefined;
  if (!patient || !upload) {
    row(copyStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const copies = await copiesOf<Media>('Media', patient, upload);
      media = copies[0];
      const { good, said } = await judgeCopy(media, media?.content, patient, upload, photo);
      row(
        copyStep,
        good && copies.length === 1 ? 'ok' : 'FAILED',
        `${copies.length} cop${copies.length === 1 ? 'y' : 'ies'}; ${said}${photo ? '' : `; no attachment naming ${upload} in ${progress.questionnaireResponse}`}`,
      );
    } catch (err) {
      row(copyStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const mediaRef = media?.id ? `Media/${media.id}` : undefined;
  const noMedia = patient ? 'no evidence Media (the row above)' : 'the journey did not make it';

  // 2. Who reads the copy: her tenant's clinician (by id and by search), nobody else.
  const readStep =
    "evidence: control: the Northwind clinician reads the journey patient's evidence Media: 200, its data: URL as stored";
  let read: Answer | undefined;
  if (!northwind || !mediaRef) {
    row(readStep, 'not reached', !northwind ? 'could not sign in' : noMedia);
  } else {
    try {
      read = await direct(northwind, 'GET', mediaRef);
      const url = read.status === 200 ? (read.body as Media).content?.url : undefined;
      const data = dataOf(url);
      const same = url !== undefined && url === media?.content?.url;
      row(
        readStep,
        read.status === 200 && data !== undefined && same ? 'ok' : 'FAILED',
        `expected 200 with the stored data: URL; got ${describe(read)}${read.status === 200 ? `, url ${data ? `data:${data.contentType};base64,… (${data.bytes.byteLength} bytes)` : (url?.slice(0, 60) ?? 'none')}${same ? ', as stored' : ', NOT as stored'}` : ''}`,
      );
    } catch (err) {
      row(readStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const searchStep = (who: string) => `evidence: ${who} searches Media?subject=<the journey patient>`;
  if (northwind && mediaRef) {
    try {
      const found = await direct(northwind, 'GET', `Media?subject=${patient}`);
      const listed = entriesOf(found.body).some((r) => `Media/${r.id}` === mediaRef);
      row(
        `${searchStep('control: the Northwind clinician')}: the evidence Media is listed`,
        found.status === 200 && listed ? 'ok' : 'FAILED',
        `expected 200 listing ${mediaRef}; got ${describe(found)}${listed ? ', listed' : ', NOT listed'}`,
      );
    } catch (err) {
      row(`${searchStep('control: the Northwind clinician')}: the evidence Media is listed`, 'FAILED', message(err));
    }
  }
  await expectStatus(
    "evidence: attack: the Southridge clinician reads the journey patient's evidence Media",
    southridge,
    mediaRef,
    noMedia,
    [404],
    (p, t) => direct(p, 'GET', t),
  );
  if (southridge && mediaRef) {
    const step = `${searchStep('attack: the Southridge clinician')}: not listed`;
    try {
      const found = await direct(southridge, 'GET', `Media?subject=${patient}`);
      const all = await direct(southridge, 'GET', 'Media?_count=100');
      const leaked = [found, all].some((a) => entriesOf(a.body).some((r) => `Media/${r.id}` === mediaRef));
      const held = !leaked && [found, all].every((a) => a.status === 200 || REFUSED.includes(a.status));
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected 200 (or 403/404) without ${mediaRef}; got Media?subject=: ${describe(found)}, Media?_count=100: ${describe(all)}${leaked ? ', LISTED' : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const key of ['bob', 'carol', 'maya'] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    await expectStatus(
      `evidence: attack: ${who} reads the journey patient's evidence Media directly on Medplum`,
      person,
      mediaRef,
      noMedia,
      REFUSED,
      (p, t) => direct(p, 'GET', t),
    );
  }
  for (const key of ['bob', 'maya'] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    const step = `evidence: attack: ${who} reads the evidence Media through the gateway (GET /v1/fhir/Media/{id}): not 200`;
    if (!person || !mediaRef) {
      row(step, 'not reached', !person ? 'could not sign in' : noMedia);
      continue;
    }
    try {
      const answer = await viaGateway(person, mediaRef);
      row(step, answer.status !== 200 ? 'held' : 'FAILED', `expected not 200, got ${gatewayDescribe(answer)}`);
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 3. Who reads the upload itself: no clinician (no Binary grant at all), and no other patient (Binary create only).
  for (const [key, expected, why] of [
    ['northwind-clinician', [403], 'no Binary in the clinician policy'],
    ['southridge-clinician', [403], 'no Binary in the clinician policy'],
    ['bob', REFUSED, 'Binary create only in the patient policy'],
    ['carol', REFUSED, 'Binary create only in the patient policy'],
  ] as const) {
    const person = people.get(key);
    await expectStatus(
      `evidence: attack: ${person?.who ?? key} reads the journey patient's upload directly (GET Binary/<id>; ${why})`,
      person,
      upload,
      'the journey did not make it',
      [...expected],
      (p, t) => direct(p, 'GET', t),
    );
  }

  // 4. Attachment URLs are presigned for a reader who may read the Binary: her clinician may not, so her
  // intake's photo stays `Binary/<id>` to her (the admin, who may, gets a presigned URL).
  const presignStep =
    "evidence: control: the Northwind clinician reads the journey patient's intake QuestionnaireResponse: the photo's url is Binary/<id>, not presigned (she cannot read the Binary)";
  if (!northwind || !progress.questionnaireResponse || !upload) {
    row(presignStep, 'not reached', !northwind ? 'could not sign in' : 'the journey did not make it');
  } else {
    try {
      const hers = await direct(northwind, 'GET', progress.questionnaireResponse);
      const urls = attachmentsOf(hers.body as QuestionnaireResponse).map((a) => a.url ?? 'none');
      row(
        presignStep,
        hers.status === 200 && urls.length === 1 && urls[0] === upload ? 'ok' : 'FAILED',
        `expected 200 with one attachment, url ${upload}; got ${describe(hers)}, url(s) ${urls.join(', ') || 'none'}; the admin's read of it: ${photo?.url?.replace(/Signature=[^&]*/, 'Signature=…') ?? 'no attachment'}`,
      );
    } catch (err) {
      row(presignStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 5. Nobody but the bot writes a copy or changes one: the Northwind clinician may not make one up (Media is
  // read-only to her; NOT_EVIDENCE on DocumentReference), nor edit the bot's; a plain DocumentReference
  // (no evidence identifier) is hers to write, so the refusals are the mark's.
  const forgedUrl = `data:image/png;base64,${Buffer.from('not her photo').toString('base64')}`;
  const forgedMedia = (subject: string, binary: string): Media => ({
    resourceType: 'Media',
    identifier: [{ system: SYSTEMS.evidence, value: binary }],
    status: 'completed',
    subject: { reference: subject },
    content: { contentType: 'image/png', title: 'reading.png', url: forgedUrl },
  });
  // In her tenant, as the lane's other clinician writes are (Medplum derives it from the subject anyway).
  const tenantAccounts = patient ? await accountsOf(patient) : [];
  const forgedDocument = (subject: string, binary: string | undefined): DocumentReference => ({
    resourceType: 'DocumentReference',
    ...(tenantAccounts.length ? { meta: { accounts: tenantAccounts.map((reference) => ({ reference })) } } : {}),
    ...(binary ? { identifier: [{ system: SYSTEMS.evidence, value: binary }] } : {}),
    status: 'current',
    subject: { reference: subject },
    description: binary ? 'Uploaded by the patient with her answers' : 'A note of the clinician (lane control)',
    content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0xLjQK' } }],
  });
  const before = patient && upload ? await copiesOf<Media>('Media', patient, upload) : [];
  const documentsBefore =
    patient && upload ? await copiesOf<DocumentReference>('DocumentReference', patient, upload) : [];
  await expectStatus(
    "evidence: attack: the Northwind clinician creates a Media carrying the evidence identifier of the journey patient's upload (subject her)",
    northwind,
    patient && upload ? patient : undefined,
    'the journey did not make it',
    [403],
    (p, t) => direct(p, 'POST', 'Media', forgedMedia(t, upload as string)),
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician creates a DocumentReference carrying the evidence identifier of the journey patient's upload (subject her)",
    northwind,
    patient && upload ? patient : undefined,
    'the journey did not make it',
    [403],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, upload)),
  );
  await expectStatus(
    'evidence: control: the Northwind clinician creates a plain DocumentReference (no evidence identifier) about the journey patient',
    northwind,
    patient,
    'the journey did not make it',
    [201],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, undefined)),
    'ok',
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the journey patient's evidence Media (PUT, its data: URL another image's)",
    northwind,
    mediaRef,
    noMedia,
    [403],
    (p, t) => {
      const current = (read?.status === 200 ? read.body : media) as Media;
      return direct(p, 'PUT', t, { ...current, content: { ...current.content, url: forgedUrl } });
    },
  );

  // A PDF: a new Northwind patient sends one with her intake (the journey's photo is an image), so that there
  // is an evidence DocumentReference to attack.
  const pdfStep =
    "precondition: evidence: a new Northwind patient uploads a PDF (POST /v1/documents) and attaches it to her blood-pressure intake through the gateway: the complete-task Bot copies it into her record as a DocumentReference (identifier evidence|Binary/<upload>, a data:application/pdf URL whose bytes are the upload's, meta.accounts her tenant)";
  let pdfPatient: Person | undefined;
  let documentCopy: DocumentReference | undefined;
  try {
    const client = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    const user = await client.startNewUser({
      firstName: 'Petra',
      lastName: 'Pdf',
      email: `lane.evidence.${Date.now()}@example.com`,
      password: 'a long enough lane password',
      projectId: ctx.projectId,
      clientId: ctx.appIdOf('northwind'),
      recaptchaToken: '',
    });
    const registered = await client.startNewPatient({ login: user.login, projectId: ctx.projectId });
    await client.processCode(registered.code as string);
    const token = client.getAccessToken() as string;
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    pdfPatient = { who: 'the PDF patient', token, profile: home.patient };
    const profile = await api.patient.profile();
    await api.fhir.updatePatient({
      ...(profile as typeof profile & { id: string }),
      address: [{ line: ['3 Paper Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    if (!check) {
      throw new Error(`${home.patient}: the blood-pressure check is not in her catalog`);
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
    await api.agreements.accept(unmet);
    const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
    const pdf = new TextEncoder().encode('%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
    const sent = await api.documents.upload(pdf, { contentType: 'application/pdf', filename: 'labs.pdf' });
    await answerBloodPressureIntake(api, assessment, sent);
    // The bot writes the copy in the completion's own transaction; a few seconds' grace all the same.
    let copies: DocumentReference[] = [];
    for (const start = Date.now(); ; await pause(1000)) {
      copies = await copiesOf<DocumentReference>('DocumentReference', home.patient, sent.url as string);
      if (copies.length > 0 || Date.now() - start > 10_000) {
        break;
      }
    }
    documentCopy = copies[0];
    const { good, said } = await judgeCopy(
      documentCopy,
      documentCopy?.content?.[0]?.attachment,
      home.patient,
      sent.url as string,
      sent,
    );
    row(
      pdfStep,
      good && copies.length === 1 ? 'ok' : 'FAILED',
      `${home.patient}, her upload ${sent.url} (${sent.contentType}, ${sent.size} bytes); ${copies.length} cop${copies.length === 1 ? 'y' : 'ies'}; ${said}`,
    );
  } catch (err) {
    row(pdfStep, 'FAILED', message(err));
  }
  const documentRef = documentCopy?.id ? `DocumentReference/${documentCopy.id}` : undefined;
  const noDocument = 'no evidence DocumentReference (the precondition above)';
  await expectStatus(
    "evidence: control: the Northwind clinician reads the PDF patient's evidence DocumentReference",
    northwind,
    documentRef,
    noDocument,
    [200],
    (p, t) => direct(p, 'GET', t),
    'ok',
  );
  const forgedCopy = documentCopy
    ? {
        ...documentCopy,
        content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0=' } }],
      }
    : undefined;
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the PDF patient's evidence DocumentReference (PUT, its data: URL another PDF's)",
    northwind,
    documentRef,
    noDocument,
    [403],
    (p, t) => direct(p, 'PUT', t, forgedCopy),
  );
  await expectStatus(
    'evidence: attack: the PDF patient herself rewrites her evidence DocumentReference directly (PUT)',
    pdfPatient,
    documentRef,
    noDocument,
    REFUSED,
    (p, t) => direct(p, 'PUT', t, forgedCopy),
  );

  // What the refused writes left: the same copies, each at the bot's version.
  const leftStep =
    'evidence: the refused writes changed nothing (the copies, read back by the admin: the same ones, at the versions the bot wrote)';
  if (patient && upload) {
    try {
      const after = await copiesOf<Media>('Media', patient, upload);
      const documentsAfter = await copiesOf<DocumentReference>('DocumentReference', patient, upload);
      const pdfAfter =
        documentRef && documentCopy
          ? ((await adminRead(ctx, `fhir/R4/${documentRef}`)).body as DocumentReference | undefined)
          : undefined;
      const versions = (list: Resource[]) => list.map((r) => `${r.resourceType}/${r.id}@${r.meta?.versionId}`).sort();
      const same =
        JSON.stringify(versions(after)) === JSON.stringify(versions(before)) &&
        documentsAfter.length === documentsBefore.length &&
        (!documentCopy || pdfAfter?.meta?.versionId === documentCopy.meta?.versionId);
      row(
        leftStep,
        same ? 'ok' : 'FAILED',
        `the journey patient: Media ${versions(after).join(', ') || 'none'} (before: ${versions(before).join(', ') || 'none'}), ${documentsAfter.length} evidence DocumentReference(s) of her upload (before: ${documentsBefore.length}); ${documentRef ? `${documentRef}: version ${pdfAfter?.meta?.versionId}${pdfAfter?.meta?.versionId === documentCopy?.meta?.versionId ? ", the bot's" : ` (the bot's: ${documentCopy?.meta?.versionId})`}` : 'no PDF copy'}`,
      );
    } catch (err) {
      row(leftStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}
