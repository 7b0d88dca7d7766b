import type { Bundle, Observation, Patient, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const alice = () => gw.backend.patients.alice;

describe('session', () => {
  it('GET /v1/config is public and names the project', async () => {
    const res = await gw.call('GET', '/v1/config', { token: null });
    expect(res.status).toBe(200);
    expect((res.body as { projectId: string }).projectId).toBe(gw.backend.project.id);
  });

  it('GET /v1/patient/profile returns the signed-in Patient as application/fhir+json', async () => {
    const res = await gw.call('GET', '/v1/patient/profile');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/fhir+json');
    expect((res.body as Patient).id).toBe(alice().patient.id);
  });

  it('echoes a valid X-Request-Id and makes one up otherwise', async () => {
    const res = await gw.call('GET', '/v1/patient/profile', { headers: { 'x-request-id': 'req-12345678' } });
    expect(res.headers.get('x-request-id')).toBe('req-12345678');
    const bad = await gw.call('GET', '/v1/patient/profile', { headers: { 'x-request-id': 'no spaces allowed!' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('record plane reads', () => {
  it('searches with gateway links, default page size and _count cap', async () => {
    const res = await gw.call('GET', '/v1/fhir/Observation?_count=1');
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle<Observation>;
    expect(bundle.entry).toHaveLength(1);
    expect(bundle.entry?.[0].fullUrl).toMatch(/^http:\/\/gateway\.test\/v1\/fhir\/Observation\//);
    for (const link of bundle.link ?? []) {
      expect(link.url).toMatch(/^http:\/\/gateway\.test\/v1\/fhir\/Observation\?/);
    }
    expect(JSON.stringify(bundle)).not.toContain('embedded.medplum.local');
    expect((await gw.call('GET', '/v1/fhir/Observation?_count=101')).status).toBe(400);
  });

  it('reads own resources; another patient of the same or another tenant is 404', async () => {
    const own = await gw.call('GET', `/v1/fhir/Patient/${alice().patient.id}`);
    expect(own.status).toBe(200);
    for (const other of ['bob', 'carol']) {
      const res = await gw.call('GET', `/v1/fhir/Patient/${gw.backend.patients[other].patient.id}`);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain(gw.backend.patients[other].patient.name?.[0]?.family as string);
    }
  });

  it('$ operations are not available', async () => {
    const res = await gw.call('GET', `/v1/fhir/Patient/${alice().patient.id}/$everything`);
    expect(res.status).toBe(404);
    expect((res.body as { error: { details: { operation: string } } }).error.details.operation).toBe('$everything');
  });
});

describe('record plane writes', () => {
  const ownPatient = async () => (await gw.call('GET', '/v1/patient/profile')).body as Patient;

  it('PUT own Patient with an ISO country updates it', async () => {
    const patient = await ownPatient();
    const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, { body: { ...patient, gender: 'other' } });
    expect(res.status).toBe(200);
    expect((res.body as Patient).gender).toBe('other');
  });

  it('PUT Patient without a valid alpha-2 country is 422 invalid_country and changes nothing', async () => {
    const patient = await ownPatient();
    for (const address of [[], [{ city: 'X' }], [{ city: 'X', country: 'United States' }], [{ country: 'XX' }]]) {
      const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
        body: { ...patient, gender: 'female', address },
      });
      expect(res.status).toBe(422);
      expect((res.body as { error: { code: string } }).error.code).toBe('invalid_country');
    }
    expect((await ownPatient()).meta?.versionId).toBe(patient.meta?.versionId);
  });

  it('PUT Patient with a non-E.164 phone is 400 with the path', async () => {
    const patient = await ownPatient();
    const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
      body: { ...patient, telecom: [{ system: 'phone', value: '(415) 555-0101' }] },
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('telecom.0.value');
  });

  it("PUT another patient's Patient is 404", async () => {
    const bob = gw.backend.patients.bob.patient;
    const res = await gw.call('PUT', `/v1/fhir/Patient/${bob.id}`, { body: { ...bob, gender: 'other' } });
    expect(res.status).toBe(404);
    expect((await gw.backend.systemRepo.readResource<Patient>('Patient', bob.id)).gender).toBe('male');
  });

  it('a stale If-Match is 412 version_conflict', async () => {
    const patient = await ownPatient();
    const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
      body: { ...patient, gender: 'unknown' },
      headers: { 'if-match': 'W/"not-the-version"' },
    });
    expect(res.status).toBe(412);
  });

  it('creates and updates own QuestionnaireResponse; subject is forced to the patient', async () => {
    const created = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'in-progress',
        questionnaire: 'https://q.example/intake|1',
      },
    });
    expect(created.status).toBe(201);
    const qr = created.body as QuestionnaireResponse;
    expect(qr.subject?.reference).toBe(`Patient/${alice().patient.id}`);
    const updated = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${qr.id}`, {
      body: { ...qr, status: 'completed' },
    });
    expect(updated.status).toBe(200);
    expect((updated.body as QuestionnaireResponse).status).toBe('completed');
    const forOther = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: `Patient/${gw.backend.patients.bob.patient.id}` },
      },
    });
    expect(forOther.status).toBe(403);
  });

  it('every other write is 405 naming the owning endpoint, with Allow', async () => {
    const obs = await gw.call('POST', '/v1/fhir/Observation', { body: { resourceType: 'Observation' } });
    expect(obs.status).toBe(405);
    expect((obs.body as { error: { details: { use: string } } }).error.details.use).toBe(
      'POST /v1/tasks/{id}/complete',
    );
    expect(obs.headers.get('allow')).toBe('GET');
    const consent = await gw.call('DELETE', '/v1/fhir/Consent/abc');
    expect((consent.body as { error: { details: { use: string } } }).error.details.use).toContain(
      'POST /v1/agreements/acceptances',
    );
    const patientCreate = await gw.call('POST', '/v1/fhir/Patient', { body: { resourceType: 'Patient' } });
    expect(patientCreate.status).toBe(405);
    expect(patientCreate.headers.get('allow')).toBe('GET');
    const patientDelete = await gw.call('DELETE', `/v1/fhir/Patient/${alice().patient.id}`);
    expect(patientDelete.headers.get('allow')).toBe('GET, PUT');
  });
});
