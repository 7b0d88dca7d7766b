import type { Condition, Consent, DetectedIssue, Provenance, RequestGroup, Task } from '@medplum/fhirtypes';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Clinician } from '../../src/clinician';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { reconciler, withSubscriptionsOff } from '../support/deliveries';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import {
  AMLODIPINE,
  answer,
  offered,
  openOffers,
  reviewedIntake,
  selectionsOf as selectionsOfReview,
} from '../support/spine';

/**
 * Issue 15, faults: a storage failure injected at the write of each spine bot leaves no partial state
 * (each bot writes in one transaction, which the store rolls back), and the reconciler (bots/reconcile.ts)
 * re-drives a subscription delivery that was lost, to completion. The fault is the store's own: a SQLite
 * trigger on the history table aborts the statement that writes one resource type, as a full disk would.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

/** The reconciler's next run (every 10 minutes). */
let nextRun: (() => Promise<void>) | undefined;
const reconcile = () => {
  nextRun ??= reconciler(gw.backend);
  return nextRun();
};
afterEach(() => heal());

const repo = () => gw.backend.systemRepo;

/** Every write of `type` fails in the store from now on. */
function breakWrites(type: string): void {
  gw.backend.db.writer.exec(
    `CREATE TEMP TRIGGER injected_fault BEFORE INSERT ON history WHEN NEW.type = '${type}' ` +
      "BEGIN SELECT RAISE(ABORT, 'injected storage fault'); END",
  );
}
function heal(): void {
  gw.backend.db.writer.exec('DROP TRIGGER IF EXISTS injected_fault');
}

const about = <T extends Task | Provenance | DetectedIssue | RequestGroup | Consent | Condition>(
  type: T['resourceType'],
  patient: DemoActor,
  param = 'patient',
) =>
  repo().searchResources<T>({
    resourceType: type,
    filters: [{ code: param, operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });

const selectionsOf = (review: Task) => selectionsOfReview(gw, review);

describe('a failure at the write of each bot leaves nothing half-made', () => {
  it('eligibility: no findings, no provenance, no selection to act on; the reconciler completes it', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    breakWrites('Provenance');
    await clinician.assignCondition(review.id, 'I10');
    await gw.backend.subscriptions.idle();
    // Only its claim (a draft, in no queue) is there: nothing a clinician or patient can act on.
    expect((await selectionsOf(review)).map((t) => t.status)).toEqual(['draft']);
    expect(await about<DetectedIssue>('DetectedIssue', patient)).toEqual([]);
    expect(await about<Provenance>('Provenance', patient, 'target')).toEqual([]);
    heal();
    await reconcile();
    expect((await selectionsOf(review)).map((t) => t.status)).toEqual(['ready']);
    expect(await about<Provenance>('Provenance', patient, 'target')).toHaveLength(1);
    // The Condition she assigned was recorded once, the re-driven run finding it again (its key).
    expect(await about<Condition>('Condition', patient)).toHaveLength(1);
  });

  it('compose-offer: no RequestGroup, item or offer task; the reconciler composes the offer once', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    await clinician.assignCondition(review.id, 'I10');
    await gw.backend.subscriptions.idle();
    const [selection] = await selectionsOf(review);
    breakWrites('Provenance');
    const before = storeSnapshot(gw.backend);
    await clinician.select(selection.id as string, AMLODIPINE);
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, patient)).toEqual([]);
    expect(await about<RequestGroup>('RequestGroup', patient, 'subject')).toEqual([]);
    // What changed is the clinician's own writes (claim, her answers, complete), nothing of the bot's.
    const after = storeSnapshot(gw.backend);
    expect(after.counts).toEqual(
      before.counts.map((c) => (c.type === 'QuestionnaireResponse' ? { ...c, n: Number(c.n) + 1 } : c)),
    );
    heal();
    await reconcile();
    await reconcile();
    expect(await openOffers(gw, patient)).toHaveLength(1);
    expect(await about<RequestGroup>('RequestGroup', patient, 'subject')).toHaveLength(1);
  });

  it('accepting an offer: an error, and no Consent, CarePlan or task; the offer can still be accepted', async () => {
    const { patient, offer } = await offered(gw, clinician);
    breakWrites('CarePlan');
    const before = storeSnapshot(gw.backend);
    const failed = await answer(gw, patient, offer, { decision: 'accept' });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(failed.text).not.toContain('injected');
    expect(storeSnapshot(gw.backend)).toEqual(before);
    heal();
    expect((await answer(gw, patient, offer, { decision: 'accept' })).status).toBe(200);
  });

  it('placing an order: an error, and the order, its items and her task unchanged', async () => {
    const { patient, offer, group, items } = await offered(gw, clinician);
    expect((await answer(gw, patient, offer, { decision: 'accept' })).status).toBe(200);
    breakWrites('MedicationRequest');
    const before = storeSnapshot(gw.backend);
    const body = { items: [{ item: `MedicationRequest/${items[0].id}`, decision: 'accept', fulfilment: 'pickup' }] };
    const failed = await gw.call('POST', `/v1/orders/${group.id}/decisions`, { token: patient.token, body });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(storeSnapshot(gw.backend)).toEqual(before);
    heal();
    expect((await gw.call('POST', `/v1/orders/${group.id}/decisions`, { token: patient.token, body })).status).toBe(
      200,
    );
  });
});

describe('lost deliveries', () => {
  it('a review and a selection whose deliveries were lost are re-driven by the reconciler to an offer, once', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    await withSubscriptionsOff(gw.backend, ['review-intake-completed', 'review-intake-answers-completed'], () =>
      clinician.assignCondition(review.id, 'I10'),
    );
    expect(await selectionsOf(review)).toEqual([]);
    await reconcile();
    const [selection] = await selectionsOf(review);
    expect(selection?.status).toBe('ready');

    await withSubscriptionsOff(gw.backend, ['select-treatment-completed', 'selection-answers-completed'], () =>
      clinician.select(selection.id as string, AMLODIPINE),
    );
    expect(await openOffers(gw, patient)).toEqual([]);
    await reconcile();
    await reconcile();
    expect(await openOffers(gw, patient)).toHaveLength(1);
    expect(await selectionsOf(review)).toHaveLength(1);
  });
});

describe('a clinical revision whose delivery was lost', () => {
  it('leaves no offer that can be neither accepted nor declined: acceptance is 409 superseded, nothing written; she can still decline (200: revoked, back to review)', async () => {
    const { patient, offer, condition, group } = await offered(gw, clinician);
    const current = await clinician.medplum.readResource('Condition', condition.id);
    await withSubscriptionsOff(gw.backend, ['condition-revised'], () =>
      clinician.medplum.updateResource<Condition>({
        ...current,
        code: { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'R03.0' }] },
      }),
    );
    expect((await gw.backend.systemRepo.readResource<Task>('Task', offer.id)).status).toBe('ready');
    const before = storeSnapshot(gw.backend);
    expect(await answer(gw, patient, offer, { decision: 'accept' })).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { state: 'superseded' } } },
    });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    const declined = await answer(gw, patient, offer, { decision: 'decline', reason: 'my diagnosis changed' });
    expect(declined.status, declined.text).toBe(200);
    expect((await gw.backend.systemRepo.readResource<RequestGroup>('RequestGroup', group.id)).status).toBe('revoked');
  });
});
