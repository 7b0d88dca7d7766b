import type { Bundle, Observation, Patient, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

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
  it('searches with gateway fullUrls and never names the backend; _count over 100 is 400', async () => {
    const res = await gw.call('GET', '/v1/fhir/Observation?_count=1');
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle<Observation>;
    expect(bundle.entry).toHaveLength(1);
    const observation = bundle.entry?.[0].resource as Observation;
    expect(bundle.entry?.[0].fullUrl).toBe(`http://gateway.test/v1/fhir/Observation/${observation.id}`);
    expect(JSON.stringify(bundle)).not.toContain('embedded.medplum.local');
    const tooMany = await gw.call('GET', '/v1/fhir/Observation?_count=101');
    expect(tooMany.status).toBe(400);
    expect((tooMany.body as { error: { code: string } }).error.code).toBe('invalid_request');
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

  it('_summary=count answers the count alone (issue 28: a default page size used to undo it)', async () => {
    const counted = await gw.call('GET', '/v1/fhir/Patient?_summary=count', { token: gw.backend.patients.alice.token });
    expect(counted.status).toBe(200);
    expect(counted.body).toMatchObject({ resourceType: 'Bundle', total: 1 });
    expect((counted.body as { entry?: unknown[] }).entry ?? []).toEqual([]);
  });

  it('answers with a property R4 does not have are 400 naming it, nothing written (the document says no other property)', async () => {
    const refused = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      token: gw.backend.patients.alice.token,
      body: { resourceType: 'QuestionnaireResponse', status: 'in-progress', mood: 'fine' },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('mood');
  });

  it('$ operations are not available', async () => {
    const res = await gw.call('GET', `/v1/fhir/Patient/${alice().patient.id}/$everything`);
    expect(res.status).toBe(404);
    expect((res.body as { error: { details: { operation: string } } }).error.details.operation).toBe('$everything');
  });
});

describe('record plane paging', () => {
  const GATEWAY = 'http://gateway.test/v1/fhir/Observation';
  type Page = { ids: string[]; links: Record<string, string> };

  /** A patient of their own with exactly `n` Observations, so every page size and link is known. */
  async function patientWithObservations(n: number): Promise<{ patient: DemoActor; ids: string[] }> {
    const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const created = await gw.backend.systemRepo.createResource<Observation>({
        resourceType: 'Observation',
        meta: { project: gw.backend.project.id },
        status: 'final',
        code: { text: `reading ${i}` },
        subject: { reference: `Patient/${patient.patient.id}` },
      });
      ids.push(created.id as string);
    }
    return { patient, ids };
  }

  async function page(patient: DemoActor, url: string): Promise<Page> {
    const { pathname, search } = new URL(url);
    const res = await gw.call('GET', `${pathname}${search}`, { token: patient.token });
    expect(res.status, url).toBe(200);
    const bundle = res.body as Bundle<Observation>;
    return {
      ids: (bundle.entry ?? []).map((e) => e.resource?.id as string),
      links: Object.fromEntries((bundle.link ?? []).map((l) => [l.relation, l.url])),
    };
  }

  it("pages by the client's _count, with exact links to this API, to the last entry", async () => {
    const { patient, ids } = await patientWithObservations(5);
    const first = await page(patient, `${GATEWAY}?_count=2`);
    expect(first.ids).toHaveLength(2);
    expect(first.links).toEqual({
      self: `${GATEWAY}?_count=2`,
      first: `${GATEWAY}?_count=2`,
      next: `${GATEWAY}?_count=2&_offset=2`,
    });
    const second = await page(patient, first.links.next);
    expect(second.ids).toHaveLength(2);
    expect(second.links).toEqual({
      self: `${GATEWAY}?_count=2&_offset=2`,
      first: `${GATEWAY}?_count=2`,
      previous: `${GATEWAY}?_count=2`,
      next: `${GATEWAY}?_count=2&_offset=4`,
    });
    const last = await page(patient, second.links.next);
    expect(last.ids).toHaveLength(1);
    expect(last.links).toEqual({
      self: `${GATEWAY}?_count=2&_offset=4`,
      first: `${GATEWAY}?_count=2`,
      previous: `${GATEWAY}?_count=2&_offset=2`,
    });
    // Every Observation exactly once across the pages, and nothing else.
    expect([...first.ids, ...second.ids, ...last.ids].sort()).toEqual([...ids].sort());
  });

  it('keeps the search parameters in every link', async () => {
    const { patient, ids } = await patientWithObservations(3);
    const first = await page(patient, `${GATEWAY}?status=final&_count=1`);
    expect(first.ids).toHaveLength(1);
    expect(first.links.next).toBe(`${GATEWAY}?_count=1&_offset=1&status=final`);
    const second = await page(patient, first.links.next);
    expect(second.ids).toHaveLength(1);
    expect(second.ids).not.toEqual(first.ids);
    expect(ids).toEqual(expect.arrayContaining([...first.ids, ...second.ids]));
  });

  it('without _count, a page holds 20 (the documented default) and links on with _count=20', async () => {
    const { patient, ids } = await patientWithObservations(21);
    const first = await page(patient, GATEWAY);
    expect(first.ids).toHaveLength(20);
    expect(first.links).toEqual({
      self: `${GATEWAY}?_count=20`,
      first: `${GATEWAY}?_count=20`,
      next: `${GATEWAY}?_count=20&_offset=20`,
    });
    const last = await page(patient, first.links.next);
    expect([...first.ids, ...last.ids].sort()).toEqual([...ids].sort());
    expect(last.links.next).toBeUndefined();
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

  it('PUT Patient with a birth date outside the years the API takes (1900 to 2199) is 400 naming birthDate, and changes nothing', async () => {
    const patient = await ownPatient();
    for (const birthDate of ['1899-12-31', '0100-01-01', '2200-01-01', '1984-13-02']) {
      const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, { body: { ...patient, birthDate } });
      expect(res.status, birthDate).toBe(400);
      expect(JSON.stringify(res.body), birthDate).toContain('birthDate');
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
    // The body's id is optional (the document says so): the path names the resource.
    const { id: _omitted, ...withoutId } = qr;
    const answered = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${qr.id}`, {
      body: { ...withoutId, item: [{ linkId: 'mood', answer: [{ valueString: 'fine' }] }] },
    });
    expect(answered.status, answered.text).toBe(200);
    expect(answered.body as QuestionnaireResponse).toMatchObject({ id: qr.id, status: 'in-progress' });
    const elsewhere = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${qr.id}`, {
      body: { ...withoutId, id: 'another-id', status: 'completed' },
    });
    expect(elsewhere.status).toBe(400);
    const updated = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${qr.id}`, {
      body: { ...(answered.body as QuestionnaireResponse), status: 'completed' },
    });
    expect(updated.status).toBe(200);
    expect((updated.body as QuestionnaireResponse).status).toBe('completed');
    // Submitted answers are frozen (the patient policy's writeConstraint): a task may point at them.
    const amended = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${qr.id}`, {
      body: { ...(updated.body as QuestionnaireResponse), status: 'amended' },
    });
    expect(amended.status).toBe(403);
    const forOther = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: `Patient/${gw.backend.patients.bob.patient.id}` },
      },
    });
    expect(forOther.status).toBe(403);
  });

  /**
   * Who owns each write (spec: "A write on the record plane to a resource that a workflow owns is refused
   * with 405. The error names the endpoint to use instead."), written out here from the spec's endpoint
   * list rather than read from the contract, so a wrong entry in the contract's table fails.
   */
  const OWNERS: Record<string, string> = {
    Observation: 'POST /v1/tasks/{id}/complete',
    Task: 'POST /v1/tasks/{id}/complete',
    Consent: 'POST /v1/agreements/acceptances (withdraw: POST /v1/agreements/withdrawals)',
    CarePlan: 'POST /v1/enrollments',
    EpisodeOfCare: 'POST /v1/assessments',
    Appointment: 'POST /v1/appointments/{id}/reschedule (cancel: POST /v1/appointments/{id}/cancel)',
    Encounter: 'POST /v1/appointments/{id}/encounter',
    RequestGroup: 'POST /v1/orders/{id}/decisions',
    MedicationRequest: 'POST /v1/orders/{id}/decisions',
    ServiceRequest: 'POST /v1/orders/{id}/decisions',
    DocumentReference: 'POST /v1/documents',
    Binary: 'POST /v1/documents',
    Media: 'POST /v1/documents',
    Patient: 'PUT /v1/fhir/Patient/{id} (own demographics; registration: POST /v1/patient/home)',
    QuestionnaireResponse: 'POST /v1/fhir/QuestionnaireResponse or PUT /v1/fhir/QuestionnaireResponse/{id}',
    // No patient endpoint at all.
    Practitioner: 'none: written by clinicians or the platform only',
    Condition: 'none: written by clinicians or the platform only',
    Organization: 'none: written by clinicians or the platform only',
  };
  /** The record-plane methods a patient has (spec: "Record-plane write permissions"): the Allow header. */
  const ALLOW: Record<string, { collection: string; instance: string }> = {
    Patient: { collection: 'GET, HEAD', instance: 'GET, HEAD, PUT' },
    QuestionnaireResponse: { collection: 'GET, HEAD, POST', instance: 'GET, HEAD, PUT' },
  };

  it('every other write is 405 naming the owning endpoint, with Allow: every type, every method', async () => {
    const checked: string[] = [];
    for (const [type, use] of Object.entries(OWNERS)) {
      const allow = ALLOW[type] ?? { collection: 'GET, HEAD', instance: 'GET, HEAD' };
      const writes = [
        { method: 'POST', path: `/v1/fhir/${type}`, allow: allow.collection },
        { method: 'PUT', path: `/v1/fhir/${type}/abc`, allow: allow.instance },
        { method: 'PATCH', path: `/v1/fhir/${type}/abc`, allow: allow.instance },
        { method: 'DELETE', path: `/v1/fhir/${type}/abc`, allow: allow.instance },
      ].filter((w) => !w.allow.split(', ').includes(w.method));
      for (const { method, path, allow: expectedAllow } of writes) {
        const label = `${method} ${path}`;
        const body =
          method === 'DELETE' ? undefined : { resourceType: type, id: method === 'POST' ? undefined : 'abc' };
        const res = await gw.call(method, path, { body });
        expect(res.status, label).toBe(405);
        expect(res.body, label).toEqual({
          error: {
            code: 'method_not_allowed',
            message: expect.any(String),
            details: { use, allow: expectedAllow.split(', '), requestId: res.headers.get('x-request-id') },
          },
        });
        expect(res.headers.get('allow'), label).toBe(expectedAllow);
        checked.push(label);
      }
    }
    // Patient: POST, PATCH, DELETE; QuestionnaireResponse: PATCH, DELETE; every other type: all four.
    expect(checked).toHaveLength((Object.keys(OWNERS).length - 2) * 4 + 3 + 2);
  });
});
