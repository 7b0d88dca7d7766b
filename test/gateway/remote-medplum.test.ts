import type { Patient, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestBackend } from '../support/backend';
import { type HttpGateway, startHttpGateway } from '../support/http-gateway';

/**
 * The Node entry's way to a remote Medplum, end to end: the embedded Medplum served over HTTP on a
 * port, the gateway reaching it with the pooled undici fetch (reads, writes with bodies and
 * If-Match, a bot's $execute), every answer checked against the OpenAPI document.
 */
let http: HttpGateway;
let backend: TestBackend;
let call: HttpGateway['call'];

beforeAll(async () => {
  http = await startHttpGateway();
  ({ backend, call } = http);
});

afterAll(() => http?.close());

describe('the gateway on a Medplum over HTTP (pooled undici fetch)', () => {
  it('reads the patient profile as Medplum stored it', async () => {
    const alice = backend.patients.alice.patient;
    const res = await call('GET', '/v1/patient/profile');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/fhir+json');
    const stored = await backend.systemRepo.readResource<Patient>('Patient', alice.id);
    expect(res.body).toMatchObject({
      resourceType: 'Patient',
      id: alice.id,
      meta: { versionId: stored.meta?.versionId },
    });
  });

  it("searches the patient's own record and never another patient's", async () => {
    const res = await call('GET', '/v1/fhir/Patient');
    expect(res.status).toBe(200);
    const ids = (res.body as { entry?: { resource: { id: string } }[] }).entry?.map((e) => e.resource.id);
    expect(ids).toEqual([backend.patients.alice.patient.id]);
    const other = await call('GET', `/v1/fhir/Patient/${backend.patients.bob.patient.id}`);
    expect(other.status).toBe(404);
  });

  it('sends bodies and If-Match: an update lands once, a stale version is 412', async () => {
    const current = (await call('GET', '/v1/patient/profile')).body as Patient;
    const changed = { ...current, telecom: [{ system: 'phone', value: '+14155550123' }] };
    const version = current.meta?.versionId as string;
    const updated = await call('PUT', `/v1/fhir/Patient/${current.id}`, {
      body: changed,
      headers: { 'if-match': `W/"${version}"` },
    });
    expect(updated.status).toBe(200);
    const stored = await backend.systemRepo.readResource<Patient>('Patient', current.id as string);
    expect(stored.telecom?.[0]?.value).toBe('+14155550123');
    const stale = await call('PUT', `/v1/fhir/Patient/${current.id}`, {
      body: changed,
      headers: { 'if-match': `W/"${version}"` },
    });
    expect(stale.status).toBe(412);
  });

  it('creates a QuestionnaireResponse (201) owned by the patient', async () => {
    const alice = backend.patients.alice.patient;
    const body: QuestionnaireResponse = {
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
      subject: { reference: `Patient/${alice.id}` },
    };
    const res = await call('POST', '/v1/fhir/QuestionnaireResponse', { body });
    expect(res.status).toBe(201);
    const id = (res.body as QuestionnaireResponse).id as string;
    const stored = await backend.systemRepo.readResource<QuestionnaireResponse>('QuestionnaireResponse', id);
    expect(stored.subject?.reference).toBe(`Patient/${alice.id}`);
  });

  it('runs workflow bots through $execute (POST with a body): accepting what is unmet satisfies the requirements', async () => {
    const before = (await call('GET', '/v1/agreements/requirements')).body as {
      satisfied: boolean;
      unmet: { url: string; version: string }[];
    };
    expect(before.satisfied).toBe(false);
    const accepted = await call('POST', '/v1/agreements/acceptances', {
      body: { agreements: before.unmet.map((u) => `${u.url}|${u.version}`) },
      headers: { 'content-type': 'application/json' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    const after = (await call('GET', '/v1/agreements/requirements')).body as { satisfied: boolean };
    expect(after.satisfied).toBe(true);
  });
});
