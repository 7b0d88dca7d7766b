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
  });

  it('leaves a caller its own bytes', async () => {
    const text = answers();
    const body = new TextEncoder().encode(text);
    expect((await post(body, { 'content-type': 'application/fhir+json' })).status).toBe(201);
    expect(new TextDecoder().decode(body)).toBe(text);
  });

  it('gives up a call whose signal aborts', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(
      medplum.fetch(new URL('fhir/R4/Patient', BASE_URL), {
        headers: { authorization: `Bearer ${medplum.demoTokens.alice}` },
        signal: controller.signal,
      }),
    ).rejects.toThrow('stop');
  });
});

describe('when the thread is gone', () => {
  it('a start that fails rejects with the reason', async () => {
    await expect(startMedplumThread({ dbPath: '/dev/null/medplum.sqlite', baseUrl: BASE_URL })).rejects.toThrow(
      '/dev/null',
    );
  });

  it('the gateway answers 503 upstream_unavailable, and the stop is reported as a clean one', async () => {
    const second = await startMedplumThread({ dbPath: ':memory:', baseUrl: BASE_URL });
    const app = createApp({
      medplum: { baseUrl: second.baseUrl, fetch: second.fetch },
      issuer: second.baseUrl,
      projectId: second.projectId,
      limits: DEFAULT_LIMITS,
    });
    const secondCall = createCaller(app, openApiDocument(app), () => second.demoTokens.alice);
    expect((await secondCall('GET', '/v1/patient/profile')).status).toBe(200);
    await second.close();
    expect(await second.stopped).toBeUndefined();
    const res = await secondCall('GET', '/v1/patient/profile');
    expect(res.status).toBe(503);
    expect((res.body as { error: { code: string } }).error.code).toBe('upstream_unavailable');
  });
});
