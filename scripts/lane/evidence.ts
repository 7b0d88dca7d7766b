import { createHash } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type {
  Attachment,
  Binary,
  Bot,
  DocumentReference,
  Media,
  Questionnaire,
  QuestionnaireResponse,
  Resource,
  Task,
} from '@medplum/fhirtypes';
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
  type Result,
  row,
  sameSet,
  startAssessmentThroughGateway,
} from './common';

/** What Medplum's `$graphql` answers: the fields the rows ask for, and its errors (a refused read is one). */
interface GraphqlAnswer {
  data?: {
    Binary?: { id?: string; contentType?: string } | null;
    MediaList?: { id?: string; content?: { url?: string } }[] | null;
    Task?: { id?: string; focus?: { resource?: { id?: string } | null } | null } | null;
  } | null;
  errors?: { message?: string; path?: (string | number)[] }[];
}

/** `size` bytes: `head`, a filler that differs from byte to byte (a shifted or cut download shows), then `tail`. */
const fileOf = (size: number, head: readonly number[], tail: readonly number[] = []): Uint8Array<ArrayBuffer> => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) {
    bytes[i] = (i * 131 + (i >>> 16)) & 0xff;
  }
  bytes.set(head, 0);
  bytes.set(tail, size - tail.length);
  return bytes;
};

const ascii = (text: string): number[] => [...text].map((ch) => ch.charCodeAt(0));

/** A PDF at the size a scanned letter reaches: its signature, then filler (DOCUMENT_MAX_BYTES is 10 MiB). */
const PDF_SIZE = 10_000_000;
/** A phone's photo: a JPEG's SOI and JFIF APP0 marker, filler, its EOI marker. */
const PHOTO_SIZE = 6_000_000;
const JFIF = [
  0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01,
];

/**
 * The evidence (bots/lib/evidence.ts): the complete-task bot records each of her checked uploads in her
 * record, a Media for a photo and a DocumentReference for a PDF, whose attachment is her upload itself,
 * `Binary/<id>`, at full size. Medplum 5.1.29 lets a Binary be read (read, vread, and the readReferences of
 * `_include` and GraphQL) only by whoever may read its securityContext, her Patient
 * (packages/server/src/fhir/repo.ts authorizeBinarySecurityContext), and presigns a `Binary/<id>` URL on
 * read for such a reader only (rewrite.ts); the clinician policy grants Binary read and vread, never search
 * or history. On the journey patient's intake photo, and on a 10 MB PDF and a 6 MB photo a new Northwind
 * patient sends with two intakes: the record is hers and her tenant's clinicians' to read, nobody's to write
 * but the bot's, her tenant's clinicians open her upload (presigned or by id) and nobody else reads it.
 */
export async function evidence(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const { progress } = ctx;
  const northwind = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const upload = progress.document; // Binary/<id>
  const uploadId = upload?.slice('Binary/'.length);
  const patient = progress.patient;
  const noJourney = 'the journey did not make it';
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const gateway = async (person: Person, path: string) =>
    answerOf(await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `Bearer ${person.token}` } }));
  const viaGateway = (person: Person, path: string) => gateway(person, `/v1/fhir/${path}`);
  const origins = { baseUrl: ctx.baseUrl, storageBaseUrl: defaultStorageBaseUrl(ctx.baseUrl) };
  const sha1 = (bytes: Uint8Array) => createHash('sha1').update(bytes).digest('base64');
  const buffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const sameBytes = (a: Uint8Array | undefined, b: Uint8Array | undefined) =>
    a !== undefined && b !== undefined && buffer(a).equals(buffer(b));
  /** A GET on Medplum for a Binary's own bytes (`accept: *\/*`: its content, not its JSON), with `token`. */
  const rawGet = async (token: string, path: string): Promise<Answer & { raw: Uint8Array }> => {
    const response = await fetch(new URL(`fhir/R4/${path}`, ctx.baseUrl), {
      headers: { authorization: `Bearer ${token}`, accept: '*/*' },
    });
    const raw = new Uint8Array(await response.arrayBuffer());
    const contentType = response.headers.get('content-type') ?? '';
    const text = contentType.includes('json') ? new TextDecoder().decode(raw) : '';
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: response.status, text, body, contentType, bytes: raw.byteLength, raw };
  };
  /** An upload's bytes as the admin downloads them (`GET Binary/<id>`, raw), once each. */
  const downloads = new Map<string, Promise<Uint8Array | undefined>>();
  const uploaded = (binary: string): Promise<Uint8Array | undefined> => {
    let download = downloads.get(binary);
    if (!download) {
      download = rawGet(ctx.adminToken, binary).then((got) => (got.status === 200 ? got.raw : undefined));
      downloads.set(binary, download);
    }
    return download;
  };
  /** A URL Medplum presigned: its storage base, an expiry and a signature (fetched with no token). */
  const isPresigned = (url: string | undefined): url is string =>
    typeof url === 'string' &&
    url.startsWith(origins.storageBaseUrl) &&
    /[?&]Expires=\d+/.test(url) &&
    /[?&]Signature=[^&]+/.test(url);
  const pointsAt = (url: string | undefined, binary: string | undefined) =>
    binary !== undefined && binaryIdOf(url, origins) !== undefined && `Binary/${binaryIdOf(url, origins)}` === binary;
  /** A URL in a row: a signature elided, a `data:` URL cut short; which Binary it names. */
  const urlSays = (url: string | undefined, binary: string | undefined) => {
    if (url === undefined) {
      return 'no url';
    }
    const shown = url.startsWith('data:')
      ? `${url.slice(0, 40)}… (a data: URL)`
      : url.replace(/Signature=[^&]*/, 'Signature=…');
    const id = binaryIdOf(url, origins);
    return `${shown} (${isPresigned(url) ? 'presigned, ' : ''}${id ? `Binary/${id}` : 'no Binary of this Medplum'}${pointsAt(url, binary) ? ': her upload' : ''})`;
  };
  /** The bytes behind a presigned URL, fetched as her clinician's browser does: no token. */
  const bytesAt = async (url: string | undefined) => {
    if (!isPresigned(url)) {
      return undefined;
    }
    const response = await fetch(url);
    return { status: response.status, bytes: new Uint8Array(await response.arrayBuffer()) };
  };
  const fetchedSays = (at: { status: number; bytes: Uint8Array } | undefined, expected: Uint8Array | undefined) =>
    at
      ? `${at.status}, ${at.bytes.byteLength} bytes, ${sameBytes(at.bytes, expected) ? 'the same bytes' : 'NOT the same bytes'}`
      : 'nothing fetched (no presigned URL)';
  /** Whether an answer carries `binary` as a resource (a search's entries, an `_include`'s). */
  const binaryIn = (answer: Answer, binary: string | undefined) =>
    entriesOf(answer.body).some((r) => r.resourceType === 'Binary' && `Binary/${r.id}` === binary);
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
   * A record of an upload as the bot must have written it: the mark of her upload, her as subject, written
   * by the complete-task Bot, its url her upload (`Binary/<id>` as stored; the admin's read presigns it),
   * her upload's type and title, its size the byte length of the admin's download and its hash her
   * attachment's (the sha1 of those bytes; and, when given, the bytes she `sent`), in her tenant, and no
   * `data:` anywhere in it. Returns the row's verdict.
   */
  const judgeCopy = async (
    copy: Media | DocumentReference | undefined,
    content: Attachment | undefined,
    subject: string,
    binary: string,
    claimed: Attachment | undefined,
    sent?: Uint8Array,
  ): Promise<{ good: boolean; said: string }> => {
    if (!copy) {
      return { good: false, said: `no ${evidenceMark(binary)} record in ${subject}'s record` };
    }
    const stored = await uploaded(binary);
    const tenant = await accountsOf(subject);
    const accounts = (copy.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const author = copy.meta?.author?.reference ?? '';
    const hash = stored ? sha1(stored) : undefined;
    const title = claimed?.title ?? 'Upload';
    const inline = JSON.stringify(copy).includes('data:');
    const subjectRef = (copy as { subject?: { reference?: string } }).subject?.reference;
    const asSent = sent === undefined || sameBytes(stored, sent);
    const good =
      subjectRef === subject &&
      completeTaskRef !== undefined &&
      author === completeTaskRef &&
      pointsAt(content?.url, binary) &&
      content?.contentType === claimed?.contentType &&
      content?.title === title &&
      stored !== undefined &&
      content?.size === stored.byteLength &&
      asSent &&
      hash !== undefined &&
      hash === claimed?.hash &&
      content?.hash === claimed?.hash &&
      typeof content?.creation === 'string' &&
      !inline &&
      tenant.length > 0 &&
      sameSet(accounts, tenant);
    return {
      good,
      said: `${copy.resourceType}/${copy.id} (${copy.status}), identifier ${(copy.identifier ?? []).map((i) => `${i.system}|${i.value}`).join(', ')}, subject ${subjectRef}, written by ${author || 'nobody'}${author && author === completeTaskRef ? ' (the complete-task Bot)' : ` (the complete-task Bot is ${completeTaskRef ?? 'not found'})`}; content ${content?.contentType} (hers: ${claimed?.contentType}), title '${content?.title}' (expected '${title}'), size ${content?.size}, created ${content?.creation ?? 'never'}, url ${urlSays(content?.url, binary)}; the admin's download of ${binary}: ${stored ? `${stored.byteLength} bytes` : 'none'}${sent === undefined ? '' : asSent ? `, the ${sent.byteLength} bytes she sent` : `, NOT the ${sent.byteLength} bytes she sent`}, sha1 ${hash ?? 'none'}${hash === claimed?.hash ? ' = ' : ' != '}her attachment's hash ${claimed?.hash ?? 'none'}, content.hash ${content?.hash ?? 'none'}; ${inline ? 'a data: URL IN IT' : 'no data: anywhere in it'}; meta.accounts ${accounts.join(', ') || 'none'}${sameSet(accounts, tenant) ? " (her tenant's)" : ` (her tenant: ${tenant.join(', ') || 'none'})`}`,
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
  /** A row its `judge` decides (result and what came back): `not reached` when something is `missing`. */
  const judged = async (step: string, missing: string | undefined, judge: () => Promise<[Result, string]>) => {
    if (missing) {
      row(step, 'not reached', missing);
      return;
    }
    try {
      const [result, detail] = await judge();
      row(step, result, detail);
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  const whyMissing = (person: Person | undefined, target: string | undefined, missing: string) =>
    !person ? 'could not sign in' : !target ? missing : undefined;

  // 1. The journey patient's intake photo, recorded in her record as a Media pointing at her upload.
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
  const photo = attachmentsOf(answers).find((a) => pointsAt(a.url, upload));
  const copyStep =
    "evidence: the journey patient's intake photo is a Media of her record (identifier evidence|Binary/<her upload>), written by the complete-task Bot, its url her upload (Binary/<id>; the admin's read presigns it), her upload's type and title, size the byte length of the admin's download, hash her attachment's (the sha1 of those bytes), meta.accounts her tenant, and no data: anywhere in it";
  let media: Media | undefined;
  if (!patient || !upload) {
    row(copyStep, 'not reached', noJourney);
  } else {
    try {
      const copies = await copiesOf<Media>('Media', patient, upload);
      media = copies[0];
      const { good, said } = await judgeCopy(media, media?.content, patient, upload, photo);
      row(
        copyStep,
        good && copies.length === 1 ? 'ok' : 'FAILED',
        `${copies.length} record${copies.length === 1 ? '' : 's'}; ${said}${photo ? '' : `; no attachment naming ${upload} in ${progress.questionnaireResponse}`}`,
      );
    } catch (err) {
      row(copyStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const mediaRef = media?.id ? `Media/${media.id}` : undefined;
  const noMedia = patient ? 'no evidence Media (the row above)' : noJourney;

  // 2. Who reads the record: her tenant's clinician (by id, its url presigned for her, and by search), nobody else.
  const readStep =
    "evidence: control: the Northwind clinician reads the journey patient's evidence Media: 200, its url presigned for her, to her upload, and the bytes at that URL (fetched with no token) are the admin's download of her upload";
  let read: Answer | undefined;
  await judged(readStep, whyMissing(northwind, mediaRef, noMedia), async () => {
    const answer = await direct(northwind as Person, 'GET', mediaRef as string);
    read = answer;
    const url = answer.status === 200 ? (answer.body as Media).content?.url : undefined;
    const [at, stored] = await Promise.all([bytesAt(url), uploaded(upload as string)]);
    const good =
      answer.status === 200 &&
      isPresigned(url) &&
      pointsAt(url, upload) &&
      at?.status === 200 &&
      sameBytes(at.bytes, stored);
    return [
      good ? 'ok' : 'FAILED',
      `expected 200, a presigned url to ${upload}, at it the admin's download (${stored?.byteLength ?? 'no'} bytes); got ${describe(answer)}${answer.status === 200 ? `, url ${urlSays(url, upload)}; at it: ${fetchedSays(at, stored)}` : ''}`,
    ];
  });
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

  // 3. The upload itself, directly on Medplum: her tenant's clinician reads it by id and by version (the
  // clinician policy's Binary read and vread; Medplum reads its securityContext, her Patient, as the
  // reader); nobody else does, and nobody lists its history, searches it, or pulls it in by reference.
  const byIdStep =
    "evidence: control: the Northwind clinician reads the journey patient's upload directly (GET Binary/<id>, accept */*): 200, the bytes of the admin's download";
  await judged(byIdStep, whyMissing(northwind, upload, noJourney), async () => {
    const [got, stored] = await Promise.all([
      rawGet((northwind as Person).token, upload as string),
      uploaded(upload as string),
    ]);
    const same = got.status === 200 && sameBytes(got.raw, stored);
    return [
      same ? 'ok' : 'FAILED',
      `expected 200 with the ${stored?.byteLength ?? 'no'} bytes of the admin's download; got ${describe(got)}${got.status === 200 ? (same ? ', the same bytes' : ', NOT the same bytes') : ''}`,
    ];
  });
  for (const [key, why] of [
    ['southridge-clinician', 'her Patient, its securityContext, is not his to read: 404'],
    ['bob', 'no Binary read in the patient policy'],
    ['carol', 'no Binary read in the patient policy'],
    ['maya', 'no Binary read in the patient policy: she reads hers through GET /v1/documents/{id}'],
  ] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    await expectStatus(
      `evidence: attack: ${who} reads the journey patient's upload directly (GET Binary/<id>; ${why})`,
      person,
      upload,
      noJourney,
      REFUSED,
      (p, t) => direct(p, 'GET', t),
    );
  }
  const version = upload
    ? ((await adminRead(ctx, `fhir/R4/${upload}`)).body as Binary | undefined)?.meta?.versionId
    : undefined;
  const versionRef = upload && version ? `${upload}/_history/${version}` : undefined;
  const noVersion = upload ? `the admin's read of ${upload} shows no versionId` : noJourney;
  const vreadStep =
    "evidence: control: the Northwind clinician reads the journey patient's upload by version (GET Binary/<id>/_history/<versionId>, accept */*): 200, the bytes of the admin's download";
  await judged(vreadStep, whyMissing(northwind, versionRef, noVersion), async () => {
    const [got, stored] = await Promise.all([
      rawGet((northwind as Person).token, versionRef as string),
      uploaded(upload as string),
    ]);
    const same = got.status === 200 && sameBytes(got.raw, stored);
    return [
      same ? 'ok' : 'FAILED',
      `expected 200 with the ${stored?.byteLength ?? 'no'} bytes of the admin's download; got ${describe(got)}${got.status === 200 ? (same ? ', the same bytes' : ', NOT the same bytes') : ''}`,
    ];
  });
  for (const key of ['southridge-clinician', 'bob'] as const) {
    const person = people.get(key);
    await expectStatus(
      `evidence: attack: ${person?.who ?? key} reads the journey patient's upload by version (GET Binary/<id>/_history/<versionId>)`,
      person,
      versionRef,
      noVersion,
      REFUSED,
      (p, t) => direct(p, 'GET', t),
    );
  }
  // History: each version's URL presigned, and a deleted Binary's versions listed unchecked (repo.ts
  // readHistory), so no history of Binary for anyone; her clinician's refusal is her policy's (403).
  for (const [key, expected] of [
    ['northwind-clinician', [403]],
    ['southridge-clinician', REFUSED],
    ['bob', REFUSED],
    ['carol', REFUSED],
    ['maya', REFUSED],
  ] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    await expectStatus(
      `evidence: attack: ${who} lists the journey patient's upload's history (GET Binary/<id>/_history; no Binary history in any policy)`,
      person,
      upload,
      noJourney,
      [...expected],
      (p, t) => direct(p, 'GET', `${t}/_history`),
    );
  }
  // Search: Medplum searches no Binary (search.ts validateSearchResourceType: 400), whoever asks.
  for (const key of ['northwind-clinician', 'southridge-clinician', 'bob', 'carol', 'maya'] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    const step = `evidence: attack: ${who} searches Binary?_id=<the journey patient's upload>: refused (400: Medplum searches no Binary; or 403/404), no Binary`;
    await judged(step, whyMissing(person, upload, noJourney), async () => {
      const found = await direct(person as Person, 'GET', `Binary?_id=${uploadId}`);
      const leaked = binaryIn(found, upload);
      return [
        !leaked && [400, ...REFUSED].includes(found.status) ? 'held' : 'FAILED',
        `expected 400/403/404 without ${upload}; got ${describe(found)}${leaked ? `, ${upload} IN IT` : ''}`,
      ];
    });
  }
  // Pulled in by reference: `_include` reads each target through readReferences (fhir-router
  // search-include.ts), as GraphQL resolves references. No reference of her record names her upload (its
  // attachments are urls, not references), but a Task's `focus` may name any resource (Task:focus targets
  // Binary, as Task:based-on, Observation:focus, Communication:part-of...): each clinician makes one of her
  // own, cancelled and about nobody (filed in her tenant by her policy's compartment), naming the upload.
  const wildcardStep =
    "evidence: attack: the Southridge clinician asks for everything referenced from or referencing the journey patient's Media (Media?subject=<her>&_include=*, &_include=Media:*, &_revinclude=*): no Binary (400 each: Medplum takes no '*' in an include)";
  await judged(wildcardStep, whyMissing(southridge, upload, noJourney), async () => {
    const asked = [];
    for (const query of ['_include=*', '_include=Media:*', '_revinclude=*']) {
      asked.push({ query, answer: await direct(southridge as Person, 'GET', `Media?subject=${patient}&${query}`) });
    }
    const leaked = asked.filter(({ answer }) => binaryIn(answer, upload));
    const held = leaked.length === 0 && asked.every(({ answer }) => [200, 400, ...REFUSED].includes(answer.status));
    return [
      held ? 'held' : 'FAILED',
      `expected 400 (or 200/403/404) without ${upload}; got ${asked.map(({ query, answer }) => `${query}: ${describe(answer)}${binaryIn(answer, upload) ? `, ${upload} IN IT` : ''}`).join('; ')}`,
    ];
  });
  const probeTask = (person: Person, binary: string): Task => ({
    resourceType: 'Task',
    status: 'cancelled',
    intent: 'order',
    code: { text: "A patient's upload, named by reference (lane probe: _include=Task:focus)" },
    owner: { reference: person.profile },
    focus: { reference: binary },
  });
  const probes = new Map<string, string>();
  for (const [key, control] of [
    ['northwind-clinician', true],
    ['southridge-clinician', false],
  ] as const) {
    const person = people.get(key);
    const who = person?.who ?? key;
    const step = control
      ? `evidence: control: ${who} makes a Task of her own (cancelled, about nobody) whose focus is the journey patient's upload, then searches Task?_id=<it>&_include=Task:focus: 201, then 200 with the Task and the upload (Binary/<id>, included)`
      : `evidence: attack: ${who} makes the same Task in his tenant, then searches it with _include=Task:focus: the Task and no Binary (Medplum's readReferences checks the securityContext, her Patient, which he cannot read)`;
    await judged(step, whyMissing(person, upload, noJourney), async () => {
      const made = await direct(person as Person, 'POST', 'Task', probeTask(person as Person, upload as string));
      const task = made.status === 201 ? (made.body as Task) : undefined;
      if (!task?.id) {
        // A Task he may not write names nothing he could include.
        return [
          control ? 'FAILED' : 'held',
          `expected 201 for the Task; got ${describe(made)}${control ? '' : ' (refused: nothing to include)'}`,
        ];
      }
      probes.set(key, `Task/${task.id}`);
      const found = await direct(person as Person, 'GET', `Task?_id=${task.id}&_include=Task:focus`);
      const listed = entriesOf(found.body).some((r) => r.resourceType === 'Task' && r.id === task.id);
      const included = binaryIn(found, upload);
      const good = control
        ? found.status === 200 && listed && included
        : !included && [200, 400, ...REFUSED].includes(found.status);
      return [
        good ? (control ? 'ok' : 'held') : 'FAILED',
        `expected 201, then 200 with the Task ${control ? 'and' : 'and NOT'} ${upload}; got ${describe(made)} (Task/${task.id}), then ${describe(found)}: ${
          entriesOf(found.body)
            .map((r) => `${r.resourceType}/${r.id}`)
            .join(', ') || 'nothing'
        }${control ? '' : included ? ` (${upload} INCLUDED)` : ''}`,
      ];
    });
  }
  // GraphQL: a Binary read by id, the Media's url presigned (or not) as on a read, and the probe's focus
  // resolved (readReferences). Refusals come back as 200 with `errors` and nulls.
  const graphqlQuery = (probe: string | undefined) =>
    `{ Binary(id: "${uploadId}") { id contentType } MediaList(subject: "${patient}") { id content { url } }${
      probe
        ? ` Task(id: "${probe.slice('Task/'.length)}") { id focus { resource { ... on Binary { id contentType } } } }`
        : ''
    } }`;
  const graphqlSays = (answer: Answer) => {
    const { data, errors } = (answer.body ?? {}) as GraphqlAnswer;
    const list = data?.MediaList;
    return `${answer.status}; Binary ${JSON.stringify(data?.Binary ?? null)}; MediaList ${
      list
        ? `${list.length}: ${list.map((m) => `Media/${m.id} url ${urlSays(m.content?.url, upload)}`).join(', ') || 'none'}`
        : 'null'
    }${data && 'Task' in data ? `; Task focus resource ${JSON.stringify(data.Task?.focus?.resource ?? null)}` : ''}; errors: ${
      (errors ?? []).map((e) => `${(e.path ?? []).join('.')}: ${e.message}`).join('; ') || 'none'
    }`;
  };
  const graphqlControl =
    "evidence: control: the Northwind clinician asks GraphQL (POST $graphql) for the journey patient's upload (Binary(id)), her Media (MediaList(subject)) and her probe Task's focus: 200, the Binary, the evidence Media with its url presigned to the upload, the focus resolved to the upload";
  await judged(graphqlControl, whyMissing(northwind, upload, noJourney), async () => {
    const probe = probes.get('northwind-clinician');
    const answer = await direct(northwind as Person, 'POST', '$graphql', { query: graphqlQuery(probe) });
    const data = (answer.body as GraphqlAnswer | undefined)?.data;
    const shown = (data?.MediaList ?? []).find((m) => `Media/${m.id}` === mediaRef);
    const good =
      answer.status === 200 &&
      data?.Binary?.id === uploadId &&
      shown !== undefined &&
      isPresigned(shown.content?.url) &&
      pointsAt(shown.content?.url, upload) &&
      (probe === undefined || data?.Task?.focus?.resource?.id === uploadId);
    return [
      good ? 'ok' : 'FAILED',
      `expected 200 with Binary ${uploadId}, ${mediaRef ?? 'her evidence Media'} presigned to it${probe ? `, the focus of her probe ${probe}` : ' (no probe Task: the row above)'}; got ${graphqlSays(answer)}`,
    ];
  });
  for (const key of ['southridge-clinician', 'bob'] as const) {
    const person = people.get(key);
    const probe = probes.get(key);
    const step = `evidence: attack: ${person?.who ?? key} asks GraphQL for the journey patient's upload (Binary(id)) and her Media (MediaList(subject))${key === 'southridge-clinician' ? ", and his probe Task's focus" : ''}: no data of the upload (null, an error)`;
    await judged(step, whyMissing(person, upload, noJourney), async () => {
      const answer = await direct(person as Person, 'POST', '$graphql', { query: graphqlQuery(probe) });
      // Nothing asked for names the upload but the upload itself: its id anywhere in the answer is a leak.
      const leaked = uploadId !== undefined && answer.text.includes(uploadId);
      return [
        !leaked && [200, 400, ...REFUSED].includes(answer.status) ? 'held' : 'FAILED',
        `expected no Binary and no url of the upload (200 with null and an error, or a refusal); got ${graphqlSays(answer)}${leaked ? `; ${uploadId} IN IT` : ''}`,
      ];
    });
  }

  // 4. Through the gateway: the record plane reads no Binary for another patient, and her document is hers.
  const documentPath = uploadId ? `/v1/documents/${uploadId}` : undefined;
  for (const key of ['bob', 'carol'] as const) {
    const person = people.get(key);
    const who = person?.who ?? key;
    const step = `evidence: attack: ${who} reads the journey patient's upload through the gateway (GET /v1/fhir/Binary/{id}): not 200`;
    await judged(step, whyMissing(person, upload, noJourney), async () => {
      const answer = await viaGateway(person as Person, upload as string);
      return [answer.status !== 200 ? 'held' : 'FAILED', `expected not 200, got ${gatewayDescribe(answer)}`];
    });
    await expectStatus(
      `evidence: attack: ${who} reads the journey patient's upload as a document through the gateway (GET /v1/documents/{id})`,
      person,
      documentPath,
      noJourney,
      [404],
      (p, t) => gateway(p, t),
    );
  }
  const ownStep =
    "evidence: control: the journey patient reads her own upload through the gateway (GET /v1/documents/{id}, the read-document bot): 200, the bytes of the admin's download";
  const maya = people.get('maya');
  await judged(ownStep, whyMissing(maya, documentPath, noJourney), async () => {
    const response = await ctx.gatewayFetch(`${PUBLIC_URL}${documentPath}`, {
      headers: { authorization: `Bearer ${(maya as Person).token}` },
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const stored = await uploaded(upload as string);
    const same = response.status === 200 && sameBytes(bytes, stored);
    return [
      same ? 'ok' : 'FAILED',
      `expected 200 with the ${stored?.byteLength ?? 'no'} bytes of the admin's download; got ${response.status}, ${response.headers.get('content-type') ?? 'no type'}, ${bytes.byteLength} bytes${response.status === 200 ? (same ? ', the same bytes' : ', NOT the same bytes') : ''}`,
    ];
  });

  // 5. Attachment URLs are presigned for a reader who may read the Binary: her clinician may now, so her
  // intake's photo is presigned for her (with no Binary read, it stayed `Binary/<id>`).
  const presignStep =
    "evidence: control: the Northwind clinician reads the journey patient's intake QuestionnaireResponse: the photo's url is presigned for her, to her upload (before her Binary read, it stayed Binary/<id>), and the bytes at it are the admin's download";
  await judged(
    presignStep,
    !northwind ? 'could not sign in' : !progress.questionnaireResponse || !upload ? noJourney : undefined,
    async () => {
      const hers = await direct(northwind as Person, 'GET', progress.questionnaireResponse as string);
      const urls = attachmentsOf(hers.body as QuestionnaireResponse).map((a) => a.url);
      const [at, stored] = await Promise.all([bytesAt(urls[0]), uploaded(upload as string)]);
      const good =
        hers.status === 200 &&
        urls.length === 1 &&
        isPresigned(urls[0]) &&
        pointsAt(urls[0], upload) &&
        at?.status === 200 &&
        sameBytes(at.bytes, stored);
      return [
        good ? 'ok' : 'FAILED',
        `expected 200 with one attachment, presigned to ${upload}; got ${describe(hers)}, url(s) ${urls.map((u) => urlSays(u, upload)).join(', ') || 'none'}; at it: ${fetchedSays(at, stored)}`,
      ];
    },
  );

  // 6. Nobody but the bot writes a record of an upload or changes one: the Northwind clinician may not make
  // one up (Media is read-only to her; NOT_EVIDENCE on DocumentReference), nor edit the bot's; a plain
  // DocumentReference (no evidence identifier) is hers to write, so the refusals are the mark's.
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
    noJourney,
    [403],
    (p, t) => direct(p, 'POST', 'Media', forgedMedia(t, upload as string)),
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician creates a DocumentReference carrying the evidence identifier of the journey patient's upload (subject her)",
    northwind,
    patient && upload ? patient : undefined,
    noJourney,
    [403],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, upload)),
  );
  await expectStatus(
    "events: attack: the Northwind clinician creates a DocumentReference carrying an agreement identifier (a fake agreements.changed in her feed: 'sign again at https://attacker.example')",
    northwind,
    patient,
    noJourney,
    [403],
    (p, t) =>
      direct(p, 'POST', 'DocumentReference', {
        ...forgedDocument(t, undefined),
        identifier: [{ system: SYSTEMS.agreement, value: 'https://attacker.example/terms' }],
        description: 'Sign again at https://attacker.example',
      }),
  );
  // The Provider app's Details & Billing tab (5.1.29 BillingTab): the encounter's claim, its response and
  // charges searched, and a self-pay Coverage made for a patient who has none; her tenant's only.
  const selfPay = (t: string) => ({
    resourceType: 'Coverage',
    status: 'active',
    type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/coverage-selfpay', code: 'pay' }] },
    beneficiary: { reference: t },
    payor: [{ reference: t }],
  });
  for (const search of ['Claim?status=active,draft', 'ClaimResponse?_count=1', 'ChargeItem?_count=1']) {
    await expectStatus(
      `billing: control: the Northwind clinician searches ${search.split('?')[0]} (the Provider app's Details & Billing tab)`,
      northwind,
      patient,
      noJourney,
      [200],
      (p) => direct(p, 'GET', search),
      'ok',
    );
  }
  await expectStatus(
    "billing: control: the Northwind clinician records the journey patient's self-pay Coverage (as the Details & Billing tab does)",
    northwind,
    patient,
    noJourney,
    [201],
    (p, t) => direct(p, 'POST', 'Coverage', selfPay(t)),
    'ok',
  );
  await expectStatus(
    "billing: attack: the Southridge clinician records a self-pay Coverage for the journey patient (Northwind's)",
    southridge,
    patient,
    noJourney,
    [403],
    (p, t) => direct(p, 'POST', 'Coverage', selfPay(t)),
  );
  await expectStatus(
    'evidence: control: the Northwind clinician creates a plain DocumentReference (no evidence identifier) about the journey patient',
    northwind,
    patient,
    noJourney,
    [201],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, undefined)),
    'ok',
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the journey patient's evidence Media (PUT, its url a data: URL of another image)",
    northwind,
    mediaRef,
    noMedia,
    [403],
    (p, t) => {
      const current = (read?.status === 200 ? read.body : media) as Media;
      return direct(p, 'PUT', t, { ...current, content: { ...current.content, url: forgedUrl } });
    },
  );

  // 7. At full size: a new Northwind patient sends a phone photo of 6,000,000 bytes with her blood-pressure
  // intake (`reading-photo`, one attachment) and a PDF of 10,000,000 bytes with the weight-management
  // intake (`lab-results`), each through the gateway: a Media and a DocumentReference, each pointing at its
  // upload, that her tenant's clinician downloads whole. One patient: Medplum registers 5 a minute.
  const pdfBytes = fileOf(PDF_SIZE, ascii('%PDF-1.4\n'));
  const photoBytes = fileOf(PHOTO_SIZE, JFIF, [0xff, 0xd9]);
  const pdfStep = `precondition: evidence: a new Northwind patient uploads a JPEG photo of ${PHOTO_SIZE.toLocaleString('en-US')} bytes and a PDF of ${PDF_SIZE.toLocaleString('en-US')} bytes (POST /v1/documents), sends the photo with her blood-pressure intake (reading-photo) and the PDF with the weight-management intake (lab-results), each through the gateway: both questionnaire tasks completed`;
  let pdfPatient: Person | undefined;
  let sentPdf: Attachment | undefined;
  let sentPhoto: Attachment | undefined;
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
    sentPhoto = await api.documents.upload(photoBytes, { contentType: 'image/jpeg', filename: 'phone.jpg' });
    sentPdf = await api.documents.upload(pdfBytes, { contentType: 'application/pdf', filename: 'labs.pdf' });
    const check = await startAssessmentThroughGateway(api, 'assessments/blood-pressure-check');
    const intake = await answerBloodPressureIntake(api, check, sentPhoto);
    // The weight-management intake's questionnaire alone (its measurement stays to do): her lab results.
    const weight = await startAssessmentThroughGateway(api, 'assessments/weight-intake');
    const form = weight.tasks.find((t) => t.kind === 'questionnaire');
    if (!form) {
      throw new Error(`${home.patient}: the weight-management intake issued no questionnaire task`);
    }
    const [url, formVersion] = (form.questionnaire ?? '').split('|');
    const questionnaire = (await api.fhir.search<Questionnaire>('Questionnaire', { url, version: formVersion }))
      .entry?.[0]?.resource;
    const text = (linkId: string) => {
      const said = questionnaire?.item?.find((i) => i.linkId === linkId)?.text;
      return said ? { text: said } : {};
    };
    const labs = await api.fhir.createQuestionnaireResponse({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      questionnaire: form.questionnaire,
      item: [
        { linkId: 'previous-programs', ...text('previous-programs'), answer: [{ valueBoolean: false }] },
        { linkId: 'lab-results', ...text('lab-results'), answer: [{ valueAttachment: sentPdf }] },
      ],
    } as QuestionnaireResponse);
    await api.tasks.complete(form.task, { questionnaireResponse: `QuestionnaireResponse/${labs.id}` });
    row(
      pdfStep,
      'ok',
      `${home.patient}; her photo ${sentPhoto.url} (${sentPhoto.contentType}, ${sentPhoto.size} bytes) in ${intake}, her PDF ${sentPdf.url} (${sentPdf.contentType}, ${sentPdf.size} bytes) in QuestionnaireResponse/${labs.id}`,
    );
  } catch (err) {
    row(pdfStep, 'FAILED', message(err));
  }
  const fullSize = [
    {
      kind: 'photo',
      type: 'Media' as const,
      sent: sentPhoto,
      bytes: photoBytes,
      contentOf: (r: Media | DocumentReference) => (r as Media).content,
    },
    {
      kind: 'PDF',
      type: 'DocumentReference' as const,
      sent: sentPdf,
      bytes: pdfBytes,
      contentOf: (r: Media | DocumentReference) => (r as DocumentReference).content?.[0]?.attachment,
    },
  ];
  // The bot writes the records in the completion's own transaction; a few seconds' grace all the same.
  const records = new Map<string, (Media | DocumentReference)[]>();
  if (pdfPatient) {
    for (const start = Date.now(); ; await pause(1000)) {
      for (const { type, sent } of fullSize) {
        if (sent?.url && !records.get(type)?.length) {
          records.set(type, await copiesOf(type, pdfPatient.profile, sent.url));
        }
      }
      if (fullSize.every(({ type, sent }) => !sent?.url || records.get(type)?.length) || Date.now() - start > 15_000) {
        break;
      }
    }
  }
  const documentCopy = records.get('DocumentReference')?.[0] as DocumentReference | undefined;
  for (const { kind, type, sent, bytes, contentOf } of fullSize) {
    const step = `evidence: the PDF patient's ${bytes.byteLength.toLocaleString('en-US')}-byte ${kind} is a ${type} of her record (identifier evidence|Binary/<its upload>), written by the complete-task Bot, its url that upload, size ${bytes.byteLength.toLocaleString('en-US')} (the admin's download, the bytes she sent), hash her attachment's, meta.accounts her tenant, and no data: anywhere in it`;
    await judged(step, !pdfPatient || !sent?.url ? 'no upload (the precondition above)' : undefined, async () => {
      const copies = records.get(type) ?? [];
      const copy = copies[0];
      const { good, said } = await judgeCopy(
        copy,
        copy ? contentOf(copy) : undefined,
        (pdfPatient as Person).profile,
        sent?.url as string,
        sent,
        bytes,
      );
      return [
        good && copies.length === 1 ? 'ok' : 'FAILED',
        `${copies.length} record${copies.length === 1 ? '' : 's'}; ${said}`,
      ];
    });
    const recordRef = records.get(type)?.[0]?.id ? `${type}/${records.get(type)?.[0]?.id}` : undefined;
    const downloadStep = `evidence: control: the Northwind clinician reads the PDF patient's evidence ${type} and downloads its url whole: 200, the url presigned for her to the upload, at it (fetched with no token) the ${bytes.byteLength.toLocaleString('en-US')} bytes she sent`;
    await judged(downloadStep, whyMissing(northwind, recordRef, `no evidence ${type} (the row above)`), async () => {
      const answer = await direct(northwind as Person, 'GET', recordRef as string);
      const url = answer.status === 200 ? contentOf(answer.body as Media | DocumentReference)?.url : undefined;
      const at = await bytesAt(url);
      const good =
        answer.status === 200 &&
        pointsAt(url, sent?.url) &&
        at?.status === 200 &&
        at.bytes.byteLength === bytes.byteLength &&
        sameBytes(at.bytes, bytes);
      return [
        good ? 'ok' : 'FAILED',
        `expected 200, a presigned url to ${sent?.url}, at it ${bytes.byteLength} bytes, hers; got ${describe(answer)}${answer.status === 200 ? `, url ${urlSays(url, sent?.url)}; at it: ${fetchedSays(at, bytes)}` : ''}`,
      ];
    });
  }
  const documentRef = documentCopy?.id ? `DocumentReference/${documentCopy.id}` : undefined;
  const noDocument = 'no evidence DocumentReference (the rows above)';
  const forgedCopy = documentCopy
    ? {
        ...documentCopy,
        content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0=' } }],
      }
    : undefined;
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the PDF patient's evidence DocumentReference (PUT, its url a data: URL of another PDF)",
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

  // What the refused writes left: the same records, each at the bot's version.
  const leftStep =
    'evidence: the refused writes changed nothing (the records, read back by the admin: the same ones, at the versions the bot wrote)';
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
        `the journey patient: Media ${versions(after).join(', ') || 'none'} (before: ${versions(before).join(', ') || 'none'}), ${documentsAfter.length} evidence DocumentReference(s) of her upload (before: ${documentsBefore.length}); ${documentRef ? `${documentRef}: version ${pdfAfter?.meta?.versionId}${pdfAfter?.meta?.versionId === documentCopy?.meta?.versionId ? ", the bot's" : ` (the bot's: ${documentCopy?.meta?.versionId})`}` : 'no PDF record'}`,
      );
    } catch (err) {
      row(leftStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}
