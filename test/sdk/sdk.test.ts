import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPatientCareClient, PatientCareApiError } from '../../src/sdk';
import { createResponseValidator, startTestGateway, type TestGateway } from '../support/gateway';
import { operationsOf } from '../support/operations';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

/** The SDK over the real gateway; every answer still checked against the OpenAPI document. */
function client(token?: string) {
  const validate = createResponseValidator(gw.doc);
  const fetchThroughGateway = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const response = await gw.app.request(String(input), init);
    const text = await response.clone().text();
    const url = new URL(String(input));
    validate(init?.method ?? 'GET', url.pathname, {
      status: response.status,
      headers: response.headers,
      body: text ? JSON.parse(text) : undefined,
      text,
    });
    return response;
  }) as typeof fetch;
  return createPatientCareClient({ baseUrl: 'http://gateway.test', accessToken: token, fetch: fetchThroughGateway });
}

describe('SDK', () => {
  it('has a method for every operation that can succeed, named by its operationId', () => {
    const sdk = client() as unknown as Record<string, Record<string, unknown>>;
    for (const op of operationsOf(gw).filter((o) => !o.operationId.startsWith('fhir.refuse'))) {
      const [namespace, method] = op.operationId.split('.');
      expect(typeof sdk[namespace]?.[method], op.operationId).toBe('function');
    }
  });

  it('runs the registration-to-agreement path as a patient app would', async () => {
    const { carol } = gw.backend.patients;
    expect((await client().config.get()).projectId).toBe(gw.backend.project.id);
    const sdk = client(carol.token);
    const me = await sdk.patient.profile();
    expect(me.id).toBe(carol.patient.id);
    const { unmet } = await sdk.agreements.requirements();
    // The requirements' entries are accepted as they were answered.
    const accepted = await sdk.agreements.accept(unmet);
    expect(accepted.acceptances).toHaveLength(unmet.length);
    expect(await sdk.agreements.requirements()).toEqual({ satisfied: true, unmet: [] });
    const observations = await sdk.fhir.search('Observation', { _count: 5 });
    expect(observations.entry?.length).toBe(1);
    const updated = await sdk.fhir.updatePatient({ ...me, id: me.id as string, gender: 'female' });
    expect(updated.gender).toBe('female');
  });

  it('throws the error envelope as PatientCareApiError', async () => {
    const sdk = client(gw.backend.patients.carol.token);
    const error = await sdk.agreements
      .withdraw({ agreementUrl: 'https://patient-care.example/agreements/terms' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PatientCareApiError);
    expect(error).toMatchObject({ status: 422, code: 'acknowledgement_required' });
    await expect(client('bad').patient.profile()).rejects.toMatchObject({ status: 401, code: 'unauthenticated' });
  });
});
