import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPatientCareClient, PatientCareApiError } from '../../src/sdk';
import { createResponseValidator, startTestGateway, type TestGateway } from '../support/gateway';
import { operationsOf } from '../support/operations';
import { freshPatient } from '../support/patients';

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
    // The reads of the concrete record-plane paths: her own Patient and answers.
    expect((await sdk.fhir.readPatient(me.id as string)).gender).toBe('female');
    const draft = await sdk.fhir.createQuestionnaireResponse({
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
    });
    expect((await sdk.fhir.readQuestionnaireResponse(draft.id as string)).status).toBe('in-progress');
    const answers = await sdk.fhir.searchQuestionnaireResponses({ _id: draft.id as string });
    expect(answers.entry?.map((e) => e.resource?.id)).toEqual([draft.id]);
  });

  it('runs an intake as the README shows it: catalog, start, upload, answers, readings', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const sdk = client(patient.token);
    const { protocols } = await sdk.protocols.list();
    const offering = protocols.find((p) => p.type === 'assessment' && p.assessment.includes('weight-intake'));
    if (offering?.type !== 'assessment') {
      throw new Error('the demo catalog lists the weight intake');
    }
    const { unmet } = await sdk.agreements.requirements({ healthcareService: offering.healthcareService });
    await sdk.agreements.accept(unmet);
    const { tasks } = await sdk.assessments.start({ healthcareService: offering.healthcareService });
    const pdf = new TextEncoder().encode('%PDF-1.7\n%demo\n');
    for (const task of tasks) {
      if (task.kind === 'questionnaire') {
        const file = await sdk.documents.upload(pdf, { contentType: 'application/pdf', filename: 'labs.pdf' });
        const answers = await sdk.fhir.createQuestionnaireResponse({
          resourceType: 'QuestionnaireResponse',
          status: 'completed',
          questionnaire: task.questionnaire,
          item: [
            { linkId: 'previous-programs', answer: [{ valueBoolean: false }] },
            { linkId: 'lab-results', answer: [{ valueAttachment: file }] },
          ],
        });
        const done = await sdk.tasks.complete(task.task, {
          questionnaireResponse: `QuestionnaireResponse/${answers.id}`,
        });
        expect(done.status).toBe('completed');
      } else {
        const done = await sdk.tasks.complete(task.task, {
          measurements: (task.measurements ?? []).map((m) => ({ code: m.code, value: 80, unit: m.units[0] })),
        });
        expect(done.observations).toHaveLength(1);
      }
    }
    const resumed = await sdk.assessments.start({ healthcareService: offering.healthcareService });
    expect(resumed.tasks.map((t) => t.status)).toEqual(['completed', 'completed']);
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
