import type { CarePlan, Consent, MedicationRequest, RequestGroup, Resource, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import {
  AMLODIPINE,
  answer,
  assigned,
  forgedWork,
  LISINOPRIL,
  type Offered,
  offered,
  openOffers,
  RXNORM,
  spironolactoneOrder,
} from '../support/spine';

/**
 * Issue 15 item 8: the gates of the clinical spine cannot be skipped, by anyone (DESIGN section 7). No
 * CarePlan without condition + eligibility + selection + the patient's acceptance; no order without
 * placement. Each attempt is made directly on Medplum with the attacker's own token (the gateway is not
 * the boundary) and, where the gateway has a route, through it; each is refused with the store unchanged.
 */
let gw: TestGateway;
let clinician: Clinician;
let foreign: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  foreign = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

const tokenOf = (c: Clinician) => c.medplum.getAccessToken() as string;
const create = (token: string, resource: Resource) =>
  direct(gw.backend, token, 'POST', fhirPath(resource.resourceType), { body: resource });
const update = (token: string, resource: Resource & { id?: string }) =>
  direct(gw.backend, token, 'PUT', fhirPath(`${resource.resourceType}/${resource.id}`), { body: resource });

/** What a forger would write: the links of the chain, about the patient of `spine`. */
function forgeries(spine: Offered, author: string): Resource[] {
  const her = { reference: `Patient/${spine.patient.patient.id}` };
  return [
    {
      resourceType: 'CarePlan',
      status: 'active',
      intent: 'plan',
      subject: her,
      instantiatesCanonical: spine.group.instantiatesCanonical,
    } as CarePlan,
    {
      resourceType: 'RequestGroup',
      status: 'active',
      intent: 'order',
      subject: her,
      author: { reference: author },
    } as RequestGroup,
    {
      resourceType: 'MedicationRequest',
      status: 'active',
      intent: 'order',
      subject: her,
      requester: { reference: author },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '197361' }] },
    } as MedicationRequest,
    {
      resourceType: 'Consent',
      status: 'active',
      scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'treatment' }] },
      category: [{ coding: [{ system: 'http://loinc.org', code: '59284-0' }] }],
      patient: her,
      policyRule: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'OPTIN' }] },
      provision: { data: [{ meaning: 'instance', reference: { reference: `RequestGroup/${spine.group.id}` } }] },
    } as Consent,
  ];
}

/** Changes that would skip a step: the offer accepted, the items placed, the order completed. */
function skips(spine: Offered): Resource[] {
  return [
    { ...spine.offer, status: 'completed' } as Task,
    { ...spine.items[0], intent: 'order' } as MedicationRequest,
    { ...spine.group, intent: 'order', status: 'completed' } as RequestGroup,
  ];
}

describe('the patient cannot skip a gate', () => {
  it('directly on Medplum: no CarePlan, RequestGroup, order, treatment Consent or Condition of her own making, and no step of her offer changed by hand', async () => {
    const spine = await offered(gw, clinician);
    const { patient } = spine;
    const before = storeSnapshot(gw.backend);
    const condition = {
      resourceType: 'Condition',
      subject: { reference: `Patient/${patient.patient.id}` },
      code: { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'I10' }] },
    } as Resource;
    for (const resource of [...forgeries(spine, `Patient/${patient.patient.id}`), condition]) {
      const refused = await create(patient.token, resource);
      expect(refused.status, `create ${resource.resourceType}`).toBe(403);
    }
    for (const resource of skips(spine)) {
      const refused = await update(patient.token, resource);
      expect(refused.status, `update ${resource.resourceType}`).toBe(403);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('through the gateway: the record plane has no write for any of it (405), and the workflow bots refuse another patient’s offer or order (404)', async () => {
    const spine = await offered(gw, clinician);
    const { patient } = spine;
    const before = storeSnapshot(gw.backend);
    for (const resource of forgeries(spine, `Patient/${patient.patient.id}`)) {
      const refused = await gw.call('POST', `/v1/fhir/${resource.resourceType}`, {
        token: patient.token,
        body: resource,
      });
      expect(refused.status, `POST /v1/fhir/${resource.resourceType}`).toBe(405);
    }
    for (const resource of skips(spine) as (Resource & { id: string })[]) {
      const refused = await gw.call('PUT', `/v1/fhir/${resource.resourceType}/${resource.id}`, {
        token: patient.token,
        body: resource,
      });
      expect(refused.status, `PUT /v1/fhir/${resource.resourceType}`).toBe(405);
    }
    // Another patient (same tenant, demo) answering her offer or placing her order, through the bots directly.
    const other = gw.backend.patients.bob ?? Object.values(gw.backend.patients)[1];
    const item = `MedicationRequest/${spine.items[0].id}`;
    const offerAnswer = await executeBot(gw.backend, other.token, 'complete-task', {
      value: { task: spine.offer.id, decision: 'accept' },
    });
    expect(JSON.stringify(offerAnswer.body)).toContain('not_found');
    const order = await executeBot(gw.backend, other.token, 'decide-order', {
      value: { order: spine.group.id, items: [{ item, decision: 'accept', fulfilment: 'pickup' }] },
    });
    expect(JSON.stringify(order.body)).toContain('not_found');
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });
});

describe('a clinician cannot skip a gate', () => {
  it('policy refuses her CarePlan, RequestGroup, orders and treatment Consents, placing an offered item, completing the order, and answering the patient’s offer', async () => {
    const spine = await offered(gw, clinician);
    const token = tokenOf(clinician);
    const before = storeSnapshot(gw.backend);
    for (const resource of forgeries(spine, clinician.profile.reference as string)) {
      const refused = await create(token, resource);
      expect(refused.status, `create ${resource.resourceType}`).toBe(403);
    }
    for (const resource of skips(spine)) {
      const refused = await update(token, resource);
      expect(refused.status, `update ${resource.resourceType}`).toBe(403);
    }
    // The workflow bots are the patient's: a clinician's call is refused whatever she sends.
    for (const [bot, input] of [
      ['complete-task', { task: spine.offer.id, decision: 'accept' }],
      [
        'decide-order',
        {
          order: spine.group.id,
          items: [{ item: `MedicationRequest/${spine.items[0].id}`, decision: 'accept', fulfilment: 'pickup' }],
        },
      ],
    ] as const) {
      const refused = await executeBot(gw.backend, token, bot, { value: input });
      expect(refused.status, bot).toBeGreaterThanOrEqual(400);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('a selection task she makes herself, or an eligible flag she edits onto one, composes no offer', async () => {
    // Her own select-treatment task, claimed and completed: the platform never issued it.
    const { patient, selection, condition } = await assigned(gw, clinician);
    const queue = selection.performerType;
    const forged = (await forgedWork(gw, clinician, {
      resourceType: 'Task',
      status: 'ready',
      intent: 'order',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'select-treatment' }] },
      for: { reference: `Patient/${patient.patient.id}` },
      // The real selection's form and findings, about the same Condition: answerable as the real one.
      focus: selection.focus,
      reasonReference: { reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` },
      performerType: queue,
      input: selection.input,
      contained: selection.contained,
    })) as Task & { id: string };
    await clinician.select(forged.id, AMLODIPINE);
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, patient)).toEqual([]);

    // A real selection where lisinopril is ineligible for her (she takes spironolactone): the clinician
    // edits the task to call it eligible (an edit policy allows on work she may change) and selects it
    // without recording an override. The platform reads the version it issued: no offer.
    const spiro = await assigned(gw, clinician, 'I10', (p) => spironolactoneOrder(gw, p));
    const current = await clinician.medplum.readResource('Task', spiro.selection.id);
    const ineligible = current.input?.find((i) => i.valueCanonical === LISINOPRIL);
    expect(ineligible?.extension?.find((e) => e.url === EXTENSIONS.eligible)?.valueBoolean).toBe(false);
    const flipped = {
      ...current,
      input: (current.input ?? []).map((i) =>
        i.valueCanonical === LISINOPRIL ? { ...i, extension: [{ url: EXTENSIONS.eligible, valueBoolean: true }] } : i,
      ),
    };
    // Policy keeps a task's inputs as issued (WORK_AS_ISSUED); an edit made anyway (a project admin's)
    // is not what the bot reads: it reads the version the platform issued.
    await expect(clinician.medplum.updateResource<Task>(flipped)).rejects.toThrow();
    await gw.backend.systemRepo.updateResource<Task>(flipped);
    await clinician.select(spiro.selection.id, LISINOPRIL);
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, spiro.patient)).toEqual([]);
    expect((await gw.backend.systemRepo.readResource<Task>('Task', spiro.selection.id)).businessStatus?.text).toBe(
      'override-required',
    );
  });
});

describe('a clinician of another tenant', () => {
  it('sees nothing of the journey and touches nothing of it', async () => {
    const spine = await offered(gw, clinician);
    const accepted = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    const { carePlan, consent } = accepted.body as { carePlan: string; consent: string };
    const token = tokenOf(foreign);
    const before = storeSnapshot(gw.backend);
    for (const reference of [carePlan, consent, `RequestGroup/${spine.group.id}`, `Task/${spine.offer.id}`]) {
      const read = await direct(gw.backend, token, 'GET', fhirPath(reference));
      expect([403, 404], reference).toContain(read.status);
    }
    for (const type of ['CarePlan', 'Consent', 'RequestGroup', 'Task', 'MedicationRequest', 'Condition']) {
      const found = await direct(
        gw.backend,
        token,
        'GET',
        fhirPath(`${type}?${type === 'Consent' ? 'patient' : 'subject'}=Patient/${spine.patient.patient.id}`),
      );
      expect((found.body as { entry?: unknown[] }).entry ?? [], type).toEqual([]);
    }
    expect(
      (await update(token, { ...spine.items[0], intent: 'order' } as MedicationRequest)).status,
    ).toBeGreaterThanOrEqual(400);
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });
});

describe('duplicates', () => {
  it('a selection delivered again (a later edit of the completed task) composes nothing twice', async () => {
    const spine = await offered(gw, clinician);
    const done = await clinician.medplum.readResource('Task', spine.selection.id);
    await clinician.medplum.updateResource<Task>({ ...done, note: [{ text: 'Discussed with the patient' }] });
    await Promise.all([gw.backend.subscriptions.idle()]);
    const groups = await gw.backend.systemRepo.searchResources<RequestGroup>({
      resourceType: 'RequestGroup',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${spine.patient.patient.id}` }],
    });
    expect(groups).toHaveLength(1);
    expect(await openOffers(gw, spine.patient)).toHaveLength(1);
  });
});
