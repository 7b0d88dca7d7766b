import type { Bundle, Observation, Patient, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { type MedplumThread, startMedplumThread } from '../../src/embedded/thread';
import { openApiDocument } from '../../src/routes/docs';
import { createCaller, type TestGateway } from '../support/gateway';

/** `npm start`'s shape: the gateway here, the embedded Medplum (demo data) on a thread of its own. */
const BASE_URL = 'http://embedded.medplum.local/';

let medplum: MedplumThread;
let call: TestGateway['call'];
beforeAll(async () => {
  medplum = await startMedplumThread({ dbPath: ':memory:', baseUrl: BASE_URL });
  const app = createApp({
    medplum: { baseUrl: medplum.baseUrl, fetch: medplum.fetch },
    issuer: medplum.baseUrl,
    projectId: medplum.projectId,
    limits: DEFAULT_LIMITS,
  });
  call = createCaller(app, openApiDocument(app), () => medplum.demoTokens.alice);
});
afterAll(() => medplum?.close());

const profileOf = (token: string) =>
  (JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as { profile: string }).profile;

describe('the gateway on the Medplum thread', () => {
  it('reads the demo patient and their record, and nothing of another tenant', async () => {
    const profile = await call('GET', '/v1/patient/profile');
    expect(profile.status).toBe(200);
    expect(`Patient/${(profile.body as Patient).id}`).toBe(profileOf(medplum.demoTokens.alice));
    expect((profile.body as Patient).name?.[0]?.given).toEqual(['Alice']);

    const search = await call('GET', '/v1/fhir/Observation');
    expect(search.status).toBe(200);
    const bundle = search.body as Bundle<Observation>;
    expect(bundle.entry?.length).toBeGreaterThan(0);
    expect(bundle.entry?.every((e) => e.resource?.subject?.reference === profileOf(medplum.demoTokens.alice))).toBe(
      true,
    );

    const carol = profileOf(medplum.demoTokens.carol);
    expect((await call('GET', `/v1/fhir/${carol}`)).status).toBe(404);
    expect((await call('GET', `/v1/fhir/${carol}`, { token: medplum.demoTokens.carol })).status).toBe(200);
  });

  it('carries a write across, and its stored result back', async () => {
    const patient = (await call('GET', '/v1/patient/profile')).body as Patient;
    const updated = await call('PUT', `/v1/fhir/Patient/${patient.id}`, { body: { ...patient, gender: 'other' } });
    expect(updated.status).toBe(200);
    expect((await call('GET', '/v1/patient/profile')).body).toMatchObject({ gender: 'other' });

    const stale = await call('PUT', `/v1/fhir/Patient/${patient.id}`, {
      body: { ...patient, gender: 'unknown' },
      headers: { 'if-match': `W/"${patient.meta?.versionId}"` },
    });
    expect(stale.status).toBe(412);
    expect((await call('GET', '/v1/patient/profile')).body).toMatchObject({ gender: 'other' });
  });
});

describe("the thread's fetch", () => {
  const post = (body: BodyInit, headers: Record<string, string> = {}) =>
    medplum.fetch(new URL('fhir/R4/QuestionnaireResponse', BASE_URL), {
      method: 'POST',
      headers: { authorization: `Bearer ${medplum.demoTokens.alice}`, ...headers },
      body,
    });
  const answers = () =>
    JSON.stringify({
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
      questionnaire: 'https://q.example/thread|1',
      subject: { reference: profileOf(medplum.demoTokens.alice) },
    });

  it('sends a body as fetch sends it: typed bytes as they are, a Blob with its own type', async () => {
    const body = answers();
    const asText = await post(body, { 'content-type': 'application/fhir+json' });
    expect(asText.status).toBe(201);
    expect(((await asText.json()) as QuestionnaireResponse).questionnaire).toBe('https://q.example/thread|1');
    const asBytes = await post(new TextEncoder().encode(body), { 'content-type': 'application/fhir+json' });
    expect(asBytes.status).toBe(201);
    const asBlob = await post(new Blob([body], { type: 'application/fhir+json' }));
    expect(asBlob.status).toBe(201);
    // The Blob's own type decides how Medplum reads it: as a form, this is no resource.
    const asForm = await post(new Blob([body], { type: 'application/x-www-form-urlencoded' }));
    expect(asForm.status).toBe(400);
  });

  it('leaves a caller its own bytes', async () => {
    const text = answers();
    const body = new TextEncoder().encode(text);
    expect((await post(body, { 'content-type': 'application/fhir+json' })).status).toBe(201);
    expect(new TextDecoder().decode(body)).toBe(text);
  });

  it('gives up a call whose signal aborts, before or after it is sent, and goes on answering', async () => {
    const read = (path: string, signal?: AbortSignal) =>
      medplum.fetch(new URL(`fhir/R4/${path}`, BASE_URL), {
        headers: { authorization: `Bearer ${medplum.demoTokens.alice}` },
        signal,
      });
    const before = new AbortController();
    before.abort(new Error('stopped before'));
    await expect(read('Observation', before.signal)).rejects.toThrow('stopped before');

    // Aborted once the call is on its way, never after its reply: the thread's fetch listens for the
    // abort as it posts the call, and a microtask queued then runs right after the post, before any
    // reply can be taken in (a reply is a message event, which waits until the microtasks have run).
    const after = new AbortController();
    const listen = after.signal.addEventListener.bind(after.signal);
    after.signal.addEventListener = ((...args: Parameters<AbortSignal['addEventListener']>) => {
      listen(...args);
      if (args[0] === 'abort') {
        queueMicrotask(() => after.abort(new Error('stopped after')));
      }
    }) as AbortSignal['addEventListener'];
    const late = read('Observation', after.signal);
    await expect(late).rejects.toThrow('stopped after');
    // The aborted call's reply, when it comes, is dropped; the next call gets its own.
    const own = profileOf(medplum.demoTokens.alice);
    const next = await read(own);
    expect(next.status).toBe(200);
    expect(((await next.json()) as Patient).id).toBe(own.split('/')[1]);
  });
});

describe('when the thread is gone', () => {
  it('a start that fails rejects with the reason', async () => {
    await expect(startMedplumThread({ dbPath: '/dev/null/medplum.sqlite', baseUrl: BASE_URL })).rejects.toThrow(
      '/dev/null',
    );
  });

  it('calls in flight and after fail as unreachable: the gateway answers 503, with or without its key set', async () => {
    const second = await startMedplumThread({ dbPath: ':memory:', baseUrl: BASE_URL });
    const gatewayOn = (thread: MedplumThread) => {
      const app = createApp({
        medplum: { baseUrl: thread.baseUrl, fetch: thread.fetch },
        issuer: thread.baseUrl,
        projectId: thread.projectId,
        limits: DEFAULT_LIMITS,
      });
      return createCaller(app, openApiDocument(app), () => thread.demoTokens.alice);
    };
    try {
      const warm = gatewayOn(second);
      expect((await warm('GET', '/v1/patient/profile')).status).toBe(200);

      const inFlight = second.fetch(new URL('fhir/R4/Observation', BASE_URL), {
        headers: { authorization: `Bearer ${second.demoTokens.alice}` },
      });
      const closing = second.close();
      await expect(inFlight).rejects.toThrow(TypeError);
      await closing;
      expect(await second.stopped).toBeUndefined();

      // A gateway that already holds Medplum's key set, and one that must fetch it first.
      for (const call of [warm, gatewayOn(second)]) {
        const res = await call('GET', '/v1/patient/profile');
        expect(res.status).toBe(503);
        expect((res.body as { error: { code: string } }).error.code).toBe('upstream_unavailable');
      }
    } finally {
      await second.close();
    }
  });
});
