import type { Consent, MedicationRequest, RequestGroup, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, ORDER_DECISIONS_ENDPOINT } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot, withdrawAnAgreement } from '../support/journey';
import { freshPatient } from '../support/patients';
import { answer, type Offered, offered } from '../support/spine';

/**
 * `POST /v1/orders/{id}/decisions` (issue 15 item 5, JOURNEY G): the patient places the order of the
 * treatment she accepted, choosing how each item reaches her.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;
const decide = (patient: DemoActor, order: string, items: unknown) =>
  gw.call('POST', `/v1/orders/${order}/decisions`, { token: patient.token, body: { items } });

/** An offer she accepted: the order is its RequestGroup, her order-decisions task is open. */
async function accepted(): Promise<Offered & { orderTask: string }> {
  const spine = await offered(gw, clinician);
  const done = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
  expect(done.status, done.text).toBe(200);
  return { ...spine, orderTask: (done.body as { tasks: string[] }).tasks.at(-1) as string };
}

describe('placing an accepted order', () => {
  it('accepted items become orders in place with the method recorded; the order and her task complete; a replay answers the same', async () => {
    const { patient, group, items, orderTask } = await accepted();
    const item = `MedicationRequest/${items[0].id}`;
    const placed = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'delivery' }]);
    expect(placed.status, placed.text).toBe(200);
    expect(placed.body).toEqual({
      order: `RequestGroup/${group.id}`,
      status: 'completed',
      items: [{ item, decision: 'accept', intent: 'order', status: 'active', fulfilment: 'delivery' }],
    });
    // The same resource moved proposal -> order; the prescriber is still the clinician who selected it.
    const medication = await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id);
    expect(medication).toMatchObject({
      intent: 'order',
      status: 'active',
      requester: { reference: clinician.profile.reference },
    });
    expect(medication.extension?.find((e) => e.url === EXTENSIONS.fulfilmentMethod)?.valueCode).toBe('delivery');
    expect(await repo().readResource<RequestGroup>('RequestGroup', group.id)).toMatchObject({
      intent: 'order',
      status: 'completed',
    });
    expect((await repo().readReference<Task>({ reference: orderTask })).status).toBe('completed');
    // What she consented to stays pinned: the proposal's version is in her Consent and in history.
    const [consent] = (
      await repo().searchResources<Consent>({
        resourceType: 'Consent',
        filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
      })
    ).filter((c) => c.scope?.coding?.[0]?.code === 'treatment');
    const pinned = consent.provision?.data?.[1]?.reference.reference as string;
    const [, , , version] = pinned.split('/');
    expect((await repo().readVersion<MedicationRequest>('MedicationRequest', items[0].id, version)).intent).toBe(
      'proposal',
    );

    const replay = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'delivery' }]);
    expect(replay).toMatchObject({ status: 200, body: placed.body });
    const before = storeSnapshot(gw.backend);
    const other = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }]);
    expect(other).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('a method her country does not allow for the item is 422 invalid_fulfilment with the allowed methods, nothing placed', async () => {
    const { patient, group, items } = await accepted();
    const item = `MedicationRequest/${items[0].id}`;
    const before = storeSnapshot(gw.backend);
    const refused = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'in-clinic' }]);
    expect(refused.status, refused.text).toBe(422);
    expect(refused.body).toMatchObject({
      error: {
        code: 'invalid_fulfilment',
        details: {
          allowed: { [item]: ['delivery', 'pickup'] },
          issues: [{ item, fulfilment: 'in-clinic', allowed: ['delivery', 'pickup'] }],
        },
      },
    });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // The same methods were readable before she decided (issue 28): her order-decisions task, in her task list.
    const listed = (await gw.call('GET', '/v1/tasks', { token: patient.token })).body as {
      tasks: { kind: string; offer?: string; items?: { item: string; allowed: string[] }[]; complete: string }[];
    };
    const orderTask = listed.tasks.find((t) => t.kind === 'order-decisions');
    expect(orderTask).toMatchObject({
      offer: `RequestGroup/${group.id}`,
      items: [{ item, allowed: ['delivery', 'pickup'] }],
      complete: `POST /v1/orders/${group.id}/decisions {items}`,
    });
    expect((await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }])).status).toBe(200);
  });

  it('every item exactly once, and a required one cannot be declined: 400, nothing placed', async () => {
    const { patient, group, items } = await accepted();
    const item = `MedicationRequest/${items[0].id}`;
    const before = storeSnapshot(gw.backend);
    for (const bad of [
      [{ item, decision: 'decline' }],
      [
        { item, decision: 'accept', fulfilment: 'pickup' },
        { item, decision: 'accept', fulfilment: 'pickup' },
      ],
      [
        { item, decision: 'accept', fulfilment: 'pickup' },
        { item: 'MedicationRequest/not-in-this-order', decision: 'accept', fulfilment: 'pickup' },
      ],
      [{ item, decision: 'accept' }],
      [{ item, decision: 'accept', fulfilment: 'drone' }],
    ]) {
      const refused = await decide(patient, group.id, bad);
      expect(refused.status, JSON.stringify(bad)).toBe(400);
      expect((refused.body as { error: { code: string } }).error.code).toBe('invalid_request');
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('ten concurrent identical decisions place the order once; all answer the same', async () => {
    const { patient, group, items } = await accepted();
    const item = `MedicationRequest/${items[0].id}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }])),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    const history = await repo().readHistory<MedicationRequest>('MedicationRequest', items[0].id);
    expect(history.entry?.filter((e) => e.resource?.intent === 'order')).toHaveLength(1);
  });
});

describe('what cannot be placed', () => {
  it('an offer not yet accepted, or declined: 409 naming the offer task; another patient: 404', async () => {
    const { patient, offer, group, items } = await offered(gw, clinician);
    const item = `MedicationRequest/${items[0].id}`;
    const early = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }]);
    expect(early).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { use: `POST /v1/tasks/${offer.id}/complete` } } },
    });
    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await decide(stranger, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }])).status).toBe(404);
    expect((await answer(gw, patient, offer, { decision: 'decline' })).status).toBe(200);
    expect((await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }])).status).toBe(409);
    expect(await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id)).toMatchObject({
      intent: 'proposal',
      status: 'cancelled',
    });
  });

  it('places only what her Consent pins: the order or an item changed since she accepted is 409, nothing placed (issue 25)', async () => {
    for (const change of ['order', 'item'] as const) {
      const { patient, group, items } = await accepted();
      const item = `MedicationRequest/${items[0].id}`;
      // A new version after her acceptance, as an operator's console edit would make it.
      if (change === 'order') {
        const current = await repo().readResource<RequestGroup>('RequestGroup', group.id);
        await repo().updateResource<RequestGroup>({ ...current, note: [...(current.note ?? []), { text: 'edited' }] });
      } else {
        const current = await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id);
        await repo().updateResource<MedicationRequest>({ ...current, note: [{ text: 'edited' }] });
      }
      const before = storeSnapshot(gw.backend);
      const refused = await decide(patient, group.id, [{ item, decision: 'accept', fulfilment: 'pickup' }]);
      expect(refused.status, `${change}: ${refused.text}`).toBe(409);
      expect(storeSnapshot(gw.backend)).toEqual(before);
      expect((await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id)).intent).toBe('proposal');
    }
  });

  it('is gated by her agreements: 409 consent_required, nothing placed', async () => {
    const { patient, group, items } = await accepted();
    await withdrawAnAgreement(gw, patient);
    const before = storeSnapshot(gw.backend);
    const refused = await decide(patient, group.id, [
      { item: `MedicationRequest/${items[0].id}`, decision: 'accept', fulfilment: 'pickup' },
    ]);
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'consent_required' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('the task table and the document agree on the endpoint', () => {
    expect(ORDER_DECISIONS_ENDPOINT).toBe('POST /v1/orders/{id}/decisions');
    expect(Object.keys((gw.doc as { paths: Record<string, unknown> }).paths)).toContain('/v1/orders/{id}/decisions');
  });
});
