import type { CareTeam, MedicationRequest, ServiceRequest, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueOfTask } from '../../bots/lib/queues';
import { REQUESTS_PER_DAY } from '../../bots/request-review';
import { SYSTEMS } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';

/** POST /v1/requests (bots/request-review.ts): a patient's proposal for review, and its queue task. */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
const NORTHWIND_PROTOCOL = 'https://patient-care.example/northwind/protocols/hypertension-treatment|2';
const NORTHWIND_OPTION = 'https://patient-care.example/northwind/treatment-options/lisinopril-10|2';
const SOUTHRIDGE_OPTION = 'https://patient-care.example/southridge/treatment-options/lisinopril-10|2';

interface Answer {
  request: string;
  task: string;
}

const request = (patient: DemoActor, body: unknown) => gw.call('POST', '/v1/requests', { token: patient.token, body });

const store = () => storeSnapshot(gw.backend);

describe('POST /v1/requests', () => {
  it('proposes a medication (201) with a review task in her tenant’s queue; asking again answers the open one (200)', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const made = await request(patient, { medication: `${RXNORM}|197361`, note: 'My sister takes this' });
    expect(made.status).toBe(201);
    const answer = made.body as Answer;
    expect(answer.request).toMatch(/^MedicationRequest\//);
    const proposal = await gw.backend.systemRepo.readReference<MedicationRequest>({ reference: answer.request });
    expect(proposal).toMatchObject({
      status: 'active',
      intent: 'proposal',
      subject: { reference: `Patient/${patient.patient.id}` },
      requester: { reference: `Patient/${patient.patient.id}` },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '197361' }] },
      note: [{ text: 'My sister takes this' }],
    });
    expect(proposal.meta?.accounts).toEqual([patient.patient.managingOrganization]);
    const task = await gw.backend.systemRepo.readReference<Task>({ reference: answer.task });
    expect(task).toMatchObject({
      status: 'ready',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-request' }] },
      for: { reference: `Patient/${patient.patient.id}` },
      focus: { reference: answer.request },
    });
    const queue = (await gw.backend.systemRepo.readReference({ reference: queueOfTask(task) } as never)) as CareTeam;
    expect(queue.managingOrganization).toEqual([patient.patient.managingOrganization]);
    // She sees her own request in her record.
    const mine = await gw.call('GET', `/v1/fhir/${answer.request}`, { token: patient.token });
    expect(mine.status).toBe(200);

    const again = await request(patient, { medication: `${RXNORM}|197361` });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(answer);
  });

  it('proposes a treatment option or protocol of her catalog, pinned by its canonical', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const option = await request(patient, { treatmentOption: NORTHWIND_OPTION });
    expect(option.status).toBe(201);
    const medication = await gw.backend.systemRepo.readReference<MedicationRequest>({
      reference: (option.body as Answer).request,
    });
    expect(medication.instantiatesCanonical).toEqual([NORTHWIND_OPTION]);
    expect(medication.medicationCodeableConcept?.coding?.[0]).toMatchObject({ system: RXNORM, code: '314076' });

    const protocol = await request(patient, { protocol: NORTHWIND_PROTOCOL });
    expect(protocol.status).toBe(201);
    const service = await gw.backend.systemRepo.readReference<ServiceRequest>({
      reference: (protocol.body as Answer).request,
    });
    expect(service).toMatchObject({
      resourceType: 'ServiceRequest',
      intent: 'proposal',
      instantiatesCanonical: [NORTHWIND_PROTOCOL],
    });
  });

  it('refuses what her catalog does not offer her, and anything but exactly one item, writing nothing', async () => {
    const texan = await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' });
    const before = store();
    for (const [body, why] of [
      [{ protocol: NORTHWIND_PROTOCOL }, 'a protocol not offered in her state'],
      [{ treatmentOption: SOUTHRIDGE_OPTION }, 'another tenant’s option'],
      [{ protocol: 'https://patient-care.example/assessments/weight-intake|1' }, 'an assessment is not requested'],
      [{ treatmentOption: 'https://example.org/nothing|1' }, 'unknown'],
      [{ medication: `${RXNORM}|197361`, protocol: NORTHWIND_PROTOCOL }, 'two items'],
      [{}, 'no item'],
      [{ medication: 'http://snomed.info/sct|123' }, 'not RxNorm'],
    ] as const) {
      const refused = await request(texan, body);
      expect(refused.status, why).toBe(400);
      expect(refused.body).toMatchObject({ error: { code: 'invalid_request' } });
    }
    expect(store()).toEqual(before);
  });

  it('a note that is only whitespace or holds a control character is 400 naming it, nothing written (FHIR string); line breaks are fine', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const before = store();
    for (const note of ['   ', '\t\n', 'a\u0000b', 'bell\u0007', 'del\u007f']) {
      const refused = await request(patient, { medication: `${RXNORM}|197361`, note });
      expect(refused.status, JSON.stringify(note)).toBe(400);
      expect(refused.body).toMatchObject({
        error: { code: 'invalid_request', details: { issues: [{ path: 'note' }] } },
      });
    }
    expect(store()).toEqual(before);
    const fine = await request(patient, {
      medication: `${RXNORM}|197361`,
      note: 'Since Monday:\n\tdizzy in the morning',
    });
    expect(fine.status).toBe(201);
  });

  it('20 concurrent identical requests make one proposal and one review task', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => request(patient, { treatmentOption: SOUTHRIDGE_OPTION })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    const proposals = await gw.backend.systemRepo.searchResources<MedicationRequest>({
      resourceType: 'MedicationRequest',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(proposals).toHaveLength(1);
    const tasks = await gw.backend.systemRepo.searchResources<Task>({
      resourceType: 'Task',
      filters: [{ code: 'focus', operator: 'eq', value: `MedicationRequest/${proposals[0].id}` }],
    });
    expect(tasks).toHaveLength(1);
  });
});

describe('a daily cap (issue 25)', () => {
  it(`opens at most ${REQUESTS_PER_DAY} requests a day: the next is 429 rate_limited with Retry-After, nothing written; an open one is still answered`, async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const codes = Array.from({ length: REQUESTS_PER_DAY }, (_, i) => String(900_000 + i));
    for (const code of codes) {
      const made = await request(patient, { medication: `${RXNORM}|${code}` });
      expect(made.status, made.text).toBe(201);
    }
    const before = store();
    const refused = await request(patient, { medication: `${RXNORM}|999999` });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: { code: 'rate_limited', details: { limit: REQUESTS_PER_DAY } } });
    const wait = Number(refused.headers.get('retry-after'));
    expect(wait).toBeGreaterThan(23 * 3600);
    expect(wait).toBeLessThanOrEqual(24 * 3600);
    expect(store()).toEqual(before);
    // Asking again for one she has open is answered as it is; another patient is not limited by her.
    expect((await request(patient, { medication: `${RXNORM}|${codes[0]}` })).status).toBe(200);
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await request(other, { medication: `${RXNORM}|999999` })).status).toBe(201);
  });
});
