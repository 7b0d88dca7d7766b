import { createHash } from 'node:crypto';
import type { Binary, Bot, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachmentProblems, binaryIdOf, DOCUMENT_MAX_BYTES, DOCUMENT_TYPES } from '../../contracts/attachments';
import { attackerFor, clinicianActor, direct, fhirPath, patientActor } from '../support/attack';
import { createResponseValidator, startTestGateway, type TestGateway } from '../support/gateway';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const bytes = (...parts: (number[] | string)[]): Uint8Array<ArrayBuffer> =>
  new Uint8Array(parts.flatMap((p) => (typeof p === 'string' ? [...Buffer.from(p, 'latin1')] : p)));

/** The smallest files whose signatures each accepted type carries, with some content after it. */
const FILES: Record<(typeof DOCUMENT_TYPES)[number], Uint8Array<ArrayBuffer>> = {
  'application/pdf': bytes('%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n'),
  'image/png': bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], [0, 0, 0, 13], 'IHDR', [0, 0, 0, 1, 0, 0, 0, 1]),
  'image/jpeg': bytes([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10], 'JFIF', [0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xd9]),
  'image/heic': bytes([0, 0, 0, 24], 'ftypheic', [0, 0, 0, 0], 'mif1heic', [0, 0, 0, 8], 'mdat'),
};

const sha1 = (data: Uint8Array) => createHash('sha1').update(data).digest('base64');

/** Every stored version (audit trail aside): what a refused upload must leave as it was. */
const fingerprint = () =>
  gw.backend.db.reader
    .prepare("SELECT count(*) AS n, max(seq) AS s FROM history WHERE type NOT IN ('AuditEvent', 'Login')")
    .get();

async function upload(
  data: BodyInit,
  contentType: string | undefined,
  options: { token?: string; query?: string; key?: string } = {},
) {
  const headers = new Headers({ authorization: `Bearer ${options.token ?? gw.backend.patients.alice.token}` });
  if (options.key) {
    headers.set('idempotency-key', options.key);
  }
  if (contentType) {
    headers.set('content-type', contentType);
  }
  const response = await gw.app.request(`http://gateway.test/v1/documents${options.query ?? ''}`, {
    method: 'POST',
    headers,
    body: data,
    ...(data instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  const text = await response.text();
  const result = {
    status: response.status,
    body: JSON.parse(text) as Answer,
    headers: response.headers,
    text,
  };
  // Raw bodies do not fit `gw.call`; the answer is checked against the document all the same.
  createResponseValidator(gw.doc)('POST', '/v1/documents', result);
  return result;
}

/** `GET /v1/documents/{id}` of an attachment's `Binary/<id>`, checked against the document. */
async function readDocument(url: string, token = gw.backend.patients.alice.token) {
  const id = url.replace(/^Binary\//, '');
  const response = await gw.app.request(`http://gateway.test/v1/documents/${id}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const result = { status: response.status, headers: response.headers, bytes, text: bytes.toString('latin1') };
  const json = response.headers.get('content-type')?.startsWith('application/json');
  createResponseValidator(gw.doc)('GET', '/v1/documents/{id}', {
    ...result,
    body: json ? (JSON.parse(result.text) as unknown) : result.text,
  });
  return result;
}

/** The attachment, or the error envelope (loosely typed: the document validator checks the shape). */
// biome-ignore lint/suspicious/noExplicitAny: a test reads both shapes of the answer
type Answer = Record<string, any>;

const storedBinary = (url: string) => gw.backend.systemRepo.readResource<Binary>('Binary', url.split('/')[1]);

describe('POST /v1/documents', () => {
  it.each(DOCUMENT_TYPES)('stores %s as a Binary of the patient, answered with a usable attachment', async (type) => {
    const file = FILES[type];
    const res = await upload(file, type, { query: '?filename=labs%20scan' });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ contentType: type, size: file.byteLength, hash: sha1(file), title: 'labs scan' });
    expect(res.body.url).toMatch(/^Binary\/[0-9a-f-]{36}$/);
    const binary = await storedBinary(res.body.url);
    expect(binary).toMatchObject({
      contentType: type,
      securityContext: { reference: `Patient/${gw.backend.patients.alice.patient.id}` },
    });
    expect(Buffer.from(binary.data ?? '', 'base64')).toEqual(Buffer.from(file));
    expect(res.body.creation).toBe(binary.meta?.lastUpdated);
    // What the completion bot will check finds nothing wrong with it.
    const stored = { contentType: binary.contentType, securityContext: binary.securityContext?.reference };
    expect(
      attachmentProblems(
        res.body,
        { ...stored, bytes: file, sha1: sha1(file) },
        `Patient/${gw.backend.patients.alice.patient.id}`,
      ),
    ).toEqual([]);
  });

  it('answers an attachment a QuestionnaireResponse takes as it is, and the patient reads her file back', async () => {
    const res = await upload(FILES['application/pdf'], 'application/pdf; charset=binary');
    expect(res.status).toBe(201);
    const answers = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'in-progress',
        questionnaire: 'https://patient-care.example/questionnaires/intake|1',
        item: [{ linkId: 'labs', answer: [{ valueAttachment: res.body }] }],
      },
    });
    expect(answers.status, answers.text).toBe(201);
    expect((answers.body as QuestionnaireResponse).item?.[0]?.answer?.[0]?.valueAttachment).toEqual(res.body);
    const read = await readDocument(res.body.url);
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toBe('application/pdf');
    expect(read.bytes).toEqual(Buffer.from(FILES['application/pdf']));
    // Served so that no browser runs it, and kept by no shared cache.
    expect(read.headers.get('content-disposition')).toMatch(/^attachment/);
    expect(read.headers.get('x-content-type-options')).toBe('nosniff');
    expect(read.headers.get('content-security-policy')).toContain('sandbox');
    expect(read.headers.get('cache-control')).toContain('no-store');
  });

  it('refuses a disguised file (PNG bytes sent as a PDF), naming what was declared and detected; nothing written', async () => {
    const before = fingerprint();
    const res = await upload(FILES['image/png'], 'application/pdf');
    expect(res.status).toBe(415);
    expect(res.body.error).toMatchObject({
      code: 'unsupported_media_type',
      details: { declared: 'application/pdf', detected: 'image/png', accepted: [...DOCUMENT_TYPES] },
    });
    const unknown = await upload(bytes('GIF89a', [1, 0, 1, 0]), 'image/png');
    expect(unknown.status).toBe(415);
    expect(unknown.body.error.details).toMatchObject({ declared: 'image/png', detected: null });
    expect(fingerprint()).toEqual(before);
  });

  it.each(['image/gif', 'application/json', 'text/plain', 'application/octet-stream', undefined])(
    'refuses a type outside the allow-list (%s): 415, nothing written',
    async (type) => {
      const before = fingerprint();
      const res = await upload(FILES['application/pdf'], type);
      expect(res.status).toBe(415);
      expect(res.body.error.details).toMatchObject({ declared: type ?? null, accepted: [...DOCUMENT_TYPES] });
      expect(fingerprint()).toEqual(before);
    },
  );

  it('an Idempotency-Key covers the query string and the Content-Type: the same bytes as another file name or media type are 422, nothing stored; the same request with its parameters reordered or its type spelt otherwise replays', async () => {
    const key = `upload-${Date.now()}`;
    const first = await upload(FILES['image/png'], 'image/png', { query: '?filename=first.png', key });
    expect(first.status).toBe(201);
    const before = fingerprint();
    for (const [type, query] of [
      ['image/png', '?filename=second.png'],
      ['image/png', ''],
      ['application/pdf', '?filename=first.png'],
    ] as const) {
      const reused = await upload(FILES['image/png'], type, { query, key });
      expect(reused.status, `${type} ${query}`).toBe(422);
      expect(reused.body.error.code).toBe('idempotency_key_reused');
    }
    expect(fingerprint()).toEqual(before);
    const again = await upload(FILES['image/png'], 'IMAGE/PNG', { query: '?filename=first.png', key });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(fingerprint()).toEqual(before);
  });

  it('refuses an empty body: 400, nothing written', async () => {
    const before = fingerprint();
    const res = await upload(new Uint8Array(0), 'application/pdf');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(fingerprint()).toEqual(before);
  });

  it('takes a file of exactly the limit, and refuses one byte more, declared or streamed: 413 with details.limit', async () => {
    const largest = new Uint8Array(DOCUMENT_MAX_BYTES);
    largest.set(FILES['application/pdf']);
    const ok = await upload(largest, 'application/pdf');
    expect(ok.status).toBe(201);
    expect(ok.body.size).toBe(DOCUMENT_MAX_BYTES);

    const before = fingerprint();
    const over = new Uint8Array(DOCUMENT_MAX_BYTES + 1);
    over.set(FILES['application/pdf']);
    const declared = await upload(over, 'application/pdf');
    expect(declared.status).toBe(413);
    expect(declared.body.error).toMatchObject({ code: 'payload_too_large', details: { limit: DOCUMENT_MAX_BYTES } });
    // No Content-Length: counted as it streams, cut where it passes the limit.
    let sent = 0;
    const chunk = new Uint8Array(1024 * 1024);
    chunk.set(FILES['application/pdf']);
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > DOCUMENT_MAX_BYTES * 2) {
          controller.close();
          return;
        }
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const streamed = await upload(stream, 'application/pdf');
    expect(streamed.status).toBe(413);
    expect(streamed.body.error.details.limit).toBe(DOCUMENT_MAX_BYTES);
    expect(sent).toBeLessThanOrEqual(DOCUMENT_MAX_BYTES + 2 * chunk.byteLength);
    expect(fingerprint()).toEqual(before);
  });

  it('refuses a bad filename (a path) before reading: 400', async () => {
    const res = await upload(FILES['image/png'], 'image/png', { query: '?filename=..%2Fetc%2Fpasswd' });
    expect(res.status).toBe(400);
  });
});

describe("a patient's document: hers alone, and never a Binary read by id", () => {
  let url: string;
  beforeAll(async () => {
    const res = await upload(FILES['image/jpeg'], 'image/jpeg', { token: gw.backend.patients.bob.token });
    url = res.body.url;
  });

  it('she reads it back through GET /v1/documents/{id}; another patient gets 404, as if absent', async () => {
    const own = await readDocument(url, gw.backend.patients.bob.token);
    expect(own.status).toBe(200);
    expect(own.text).toContain('JFIF');
    for (const key of ['alice', 'carol']) {
      const res = await readDocument(url, gw.backend.patients[key].token);
      expect(res.status, key).toBe(404);
      expect(res.text).not.toContain('JFIF');
    }
  });

  it("no other stored file comes back through it: a bot's code, a Binary of no one, an unknown id (404)", async () => {
    const [bot] = await gw.backend.systemRepo.searchResources<Bot>({ resourceType: 'Bot' });
    const code = binaryIdOf(bot.executableCode?.url, { baseUrl: gw.backend.baseUrl }) as string;
    const orphan = await gw.backend.systemRepo.createResource<Binary>({
      resourceType: 'Binary',
      contentType: 'application/pdf',
      data: Buffer.from(FILES['application/pdf']).toString('base64'),
      meta: { project: gw.backend.project.id },
    });
    for (const id of [code, orphan.id, '0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e']) {
      const res = await readDocument(`Binary/${id}`, gw.backend.patients.bob.token);
      expect(res.status, id).toBe(404);
      expect(res.text).not.toContain('%PDF');
      expect(res.text).not.toContain('exports');
    }
  });

  it('GET /v1/fhir/Binary/{id} is 404 naming the endpoint to use, for her too', async () => {
    for (const key of ['bob', 'alice']) {
      const res = await gw.call('GET', `/v1/fhir/${url}`, { token: gw.backend.patients[key].token });
      expect(res.status, key).toBe(404);
      expect(res.body).toMatchObject({ error: { code: 'not_found', details: { use: 'GET /v1/documents/{id}' } } });
    }
  });

  it("directly on Medplum only her tenant's clinicians read her upload by id; other patients, the other tenant's clinician and she herself do not (Medplum >= 5.1.18 checks its securityContext: packages/server/src/fhir/repo.ts authorizeBinarySecurityContext)", async () => {
    for (const role of [
      'patient of the same tenant',
      'patient of the other tenant',
      'clinician of the other tenant',
    ] as const) {
      const attacker = attackerFor(gw.backend, 'bob', role);
      for (const accept of ['application/fhir+json', '*/*']) {
        const res = await direct(gw.backend, attacker.token, 'GET', fhirPath(url), { headers: { accept } });
        expect([403, 404], `${role} ${accept}: ${res.status}`).toContain(res.status);
        expect(res.text).not.toContain('JFIF');
      }
    }
    // The owner herself: no Binary read (she reads it through GET /v1/documents/{id}).
    const bob = patientActor(gw.backend, 'bob');
    const own = await direct(gw.backend, bob.token, 'GET', fhirPath(url), { headers: { accept: '*/*' } });
    expect(own.status).toBe(403);
    expect(own.text).not.toContain('JFIF');
    // Her tenant's clinician: the bytes.
    const carer = clinicianActor(gw.backend, 'northwind');
    const read = await direct(gw.backend, carer.token, 'GET', fhirPath(url), { headers: { accept: '*/*' } });
    expect(read.status, carer.label).toBe(200);
    expect(read.text).toContain('JFIF');
  });

  it('a patient cannot store active content directly on Medplum: HTML, SVG and scripts are refused, nothing written', async () => {
    const bob = patientActor(gw.backend, 'bob');
    for (const [type, body] of [
      ['text/html', '<script>alert(1)</script>'],
      ['image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'],
      ['application/javascript', 'alert(1)'],
    ]) {
      const before = fingerprint();
      const res = await direct(gw.backend, bob.token, 'POST', fhirPath('Binary'), {
        headers: { 'content-type': type, 'x-security-context': bob.profile },
        rawBody: body,
      });
      expect(res.status, type).toBe(403);
      expect(fingerprint()).toEqual(before);
    }
  });
});
