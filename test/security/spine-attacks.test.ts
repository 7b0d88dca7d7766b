import type { CarePlan, Consent, MedicationRequest, RequestGroup, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { AMLODIPINE, answer, assigned, forgedWork, offered, openOffers, RXNORM } from '../support/spine';

/**
 * Attacks on the newest spine bots (bots/lib/offers.ts, bots/decide-order.ts, bots/compose-offer.ts and
 * their policies in src/provision/definition.ts), made directly on Medplum with the attacker's own token.
 * Each is refused, with the store unchanged where it matters.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;
const tokenOf = (c: Clinician) => c.medplum.getAccessToken() as string;
const decide = (patient: DemoActor, order: string, items: unknown) =>
  gw.call('POST', `/v1/orders/${order}/decisions`, { token: patient.token, body: { items } });
const hers = <T extends CarePlan | Consent | RequestGroup>(type: T['resourceType'], patient: DemoActor) =>
  repo().searchResources<T>({
    resourceType: type,
    filters: [
      { code: type === 'RequestGroup' ? 'subject' : 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` },
    ],
  });
const placedOrders = async (patient: DemoActor) =>
  (
    await repo().searchResources<MedicationRequest>({
      resourceType: 'MedicationRequest',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    })
  ).filter((m) => m.intent === 'order');

describe('refused', () => {
  it('a patient of the other tenant cannot answer an offer or place an order of a northwind patient (404 from both bots, directly on Medplum)', async () => {
    const spine = await offered(gw, clinician);
    const foreign = gw.backend.patients.carol;
    const before = storeSnapshot(gw.backend);
    const offer = await executeBot(gw.backend, foreign.token, 'complete-task', {
      value: { task: spine.offer.id, decision: 'accept' },
    });
    expect(JSON.stringify(offer.body)).toContain('not_found');
    const order = await executeBot(gw.backend, foreign.token, 'decide-order', {
      value: {
        order: spine.group.id,
        items: [{ item: `MedicationRequest/${spine.items[0].id}`, decision: 'accept', fulfilment: 'pickup' }],
      },
    });
    expect(JSON.stringify(order.body)).toContain('not_found');
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('neither a patient nor a clinician can run compose-offer directly (it is not readable to them), even naming a real completed selection', async () => {
    const spine = await offered(gw, clinician);
    const before = storeSnapshot(gw.backend);
    for (const token of [spine.patient.token, tokenOf(clinician)]) {
      const run = await executeBot(gw.backend, token, 'compose-offer', { value: { id: spine.selection.id } });
      expect(run.status).toBeGreaterThanOrEqual(400);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('a review-response task the clinician forges (the real selection’s options copied in) composes no offer: no Bot-authored version', async () => {
    const { patient, selection, condition } = await assigned(gw, clinician);
    const forged = (await forgedWork(gw, clinician, {
      resourceType: 'Task',
      status: 'ready',
      intent: 'order',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-response' }] },
      for: { reference: `Patient/${patient.patient.id}` },
      // The real selection's form and findings, about the same Condition: answerable as the real one.
      focus: selection.focus,
      reasonReference: { reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` },
      performerType: selection.performerType,
      input: selection.input,
      contained: selection.contained,
    })) as Task & { id: string };
    await clinician.select(forged.id, AMLODIPINE);
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, patient)).toEqual([]);
    expect(await hers('RequestGroup', patient)).toEqual([]);
    expect((await repo().readResource<Task>('Task', forged.id)).businessStatus?.text).toBe('not-issued');
  });

  it('an order-decisions task the clinician forges for an offer not accepted places nothing (no treatment Consent: 409)', async () => {
    const spine = await offered(gw, clinician);
    const her = { reference: `Patient/${spine.patient.patient.id}` };
    await forgedWork(gw, clinician, {
      resourceType: 'Task',
      status: 'ready',
      intent: 'order',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'order-decisions' }] },
      for: her,
      owner: her,
      focus: { reference: `RequestGroup/${spine.group.id}` },
    });
    const before = storeSnapshot(gw.backend);
    const refused = await decide(spine.patient, spine.group.id, [
      { item: `MedicationRequest/${spine.items[0].id}`, decision: 'accept', fulfilment: 'pickup' },
    ]);
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('a clinician cannot place the offered item or put a Consent on it herself, nor write a client meta.author that makes her edit look Bot-issued (packages/server/src/fhir/repo.ts getAuthor: only a super admin sets it)', async () => {
    const spine = await offered(gw, clinician);
    const token = tokenOf(clinician);
    const before = storeSnapshot(gw.backend);
    const placing = await direct(gw.backend, token, 'PUT', fhirPath(`MedicationRequest/${spine.items[0].id}`), {
      body: { ...spine.items[0], intent: 'order' },
    });
    expect(placing.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // A Bot author sent by the client is ignored (Medplum's repo.ts getAuthor: only a super admin's is kept).
    const selection = await clinician.medplum.readResource('Task', spine.selection.id);
    const edited = await clinician.medplum.updateResource<Task>({
      ...selection,
      meta: { ...selection.meta, author: { reference: 'Bot/forged' } },
      note: [{ text: 'edited' }],
    });
    expect(edited.meta?.author?.reference).toBe(clinician.profile.reference);
  });
});

/**
 * Found by this review and closed (src/provision/definition.ts WORK_AS_ISSUED, NOT_AN_OFFER_ITEM; the
 * bots' own checks in bots/compose-offer.ts, bots/lib/offers.ts, bots/decide-order.ts): each clinician
 * edit is refused by policy with the store unchanged, and the same change made anyway (by a project
 * admin, through the system repository) still gives nothing: the bots believe only what they issued.
 */
describe('closed: edits that would have skipped the spine', () => {
  it('clearing a composed selection’s businessStatus: kept as stored (readonly to her); cleared anyway, no second offer (an offer already carries its key)', async () => {
    const spine = await offered(gw, clinician);
    const done = await clinician.medplum.readResource('Task', spine.selection.id);
    const before = storeSnapshot(gw.backend);
    const kept = await clinician.medplum.updateResource<Task>({ ...done, businessStatus: undefined });
    expect(kept.businessStatus?.text).toBe('offer-composed');
    expect(storeSnapshot(gw.backend)).toEqual(before);
    await repo().updateResource<Task>({ ...done, businessStatus: undefined });
    await clinician.medplum.updateResource<Task>({
      ...(await clinician.medplum.readResource('Task', spine.selection.id)),
      note: [{ text: 'redelivered' }],
    });
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, spine.patient)).toHaveLength(1);
    expect(await hers<RequestGroup>('RequestGroup', spine.patient)).toHaveLength(1);
  });

  it('repurposing her ready order-decisions task as a treatment-offer: refused; repurposed anyway, accepting it makes no second Consent or CarePlan', async () => {
    const spine = await offered(gw, clinician);
    const accepted = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    expect(accepted.status).toBe(200);
    const orderTask = await clinician.medplum.readReference<Task>({
      reference: (accepted.body as { tasks: string[] }).tasks.at(-1) as string,
    });
    const repurposed = { ...orderTask, code: { coding: [{ system: SYSTEMS.taskKind, code: 'treatment-offer' }] } };
    const before = storeSnapshot(gw.backend);
    await expect(clinician.medplum.updateResource<Task>(repurposed)).rejects.toThrow();
    expect(storeSnapshot(gw.backend)).toEqual(before);
    const forced = await repo().updateResource<Task>(repurposed);
    const again = await answer(gw, spine.patient, forced, { decision: 'accept' });
    expect(again).toMatchObject({ status: 409, body: { error: { details: { state: 'superseded' } } } });
    expect(await hers<CarePlan>('CarePlan', spine.patient)).toHaveLength(1);
    expect(
      (await hers<Consent>('Consent', spine.patient)).filter((c) => c.scope?.coding?.[0]?.code === 'treatment'),
    ).toHaveLength(1);
  });

  it('editing the offered MedicationRequest to another drug: refused; edited anyway, the offer is superseded and nothing is placed', async () => {
    const spine = await offered(gw, clinician, AMLODIPINE);
    const item = await clinician.medplum.readResource('MedicationRequest', spine.items[0].id);
    const swapped = {
      ...item,
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '9997' }], text: 'spironolactone' },
    };
    const before = storeSnapshot(gw.backend);
    await expect(clinician.medplum.updateResource<MedicationRequest>(swapped)).rejects.toThrow();
    expect(storeSnapshot(gw.backend)).toEqual(before);
    await repo().updateResource<MedicationRequest>(swapped);
    const refused = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    expect(refused).toMatchObject({ status: 409, body: { error: { details: { state: 'superseded' } } } });
    expect(await placedOrders(spine.patient)).toEqual([]);
    expect(await hers<CarePlan>('CarePlan', spine.patient)).toEqual([]);
  });

  it('editing the item after she accepted: refused; edited anyway, decide-order places nothing but the version her Consent pins (409)', async () => {
    const spine = await offered(gw, clinician);
    const accepted = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    expect(accepted.status).toBe(200);
    const item = await clinician.medplum.readResource('MedicationRequest', spine.items[0].id);
    const redosed = { ...item, dosageInstruction: [{ text: '40 mg three times a day' }] };
    await expect(clinician.medplum.updateResource<MedicationRequest>(redosed)).rejects.toThrow();
    await repo().updateResource<MedicationRequest>(redosed);
    const before = storeSnapshot(gw.backend);
    const placed = await decide(spine.patient, spine.group.id, [
      { item: `MedicationRequest/${spine.items[0].id}`, decision: 'accept', fulfilment: 'pickup' },
    ]);
    expect(placed).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    expect(await placedOrders(spine.patient)).toEqual([]);
  });
});
