import { getReferenceString, type WithId } from '@medplum/core';
import type {
  CarePlan,
  Condition,
  Consent,
  GuidanceResponse,
  MedicationRequest,
  Provenance,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import {
  AMLODIPINE,
  assignedCondition,
  LISINOPRIL,
  offerOf,
  openOffers,
  PROTOCOL,
  reviewedIntake,
} from '../support/spine';

/**
 * Issue 15, the whole spine for one patient, each step as its actor takes it: the patient through the
 * gateway, the clinician through the clinician helper (plain FHIR writes Medplum's app can make), the
 * platform's steps by the bots that Subscriptions wake.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;

describe('the clinical spine', () => {
  it('intake -> review -> eligibility (advisory, with provenance) -> selection -> offer -> accept -> active CarePlan of exactly the pinned versions -> order decisions -> the order placed', async () => {
    // 1. Intake done (the patient, through the gateway): the review is in the clinician's queue.
    const { patient, review } = await reviewedIntake(gw, clinician);
    const her = `Patient/${patient.patient.id}`;
    expect(await repo().searchResources<CarePlan>({ resourceType: 'CarePlan', filters: [] })).not.toContainEqual(
      expect.objectContaining({ subject: { reference: her } }),
    );

    // 2. Review: she claims it and assigns the condition.
    await clinician.assignCondition(review.id, 'I10');
    await gw.backend.subscriptions.idle();
    // Recorded from her answers: her diagnosis (asserter), the answers as its evidence.
    const condition = (await assignedCondition(gw, review)) as WithId<Condition>;
    expect(condition).toMatchObject({
      code: { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'I10' }] },
      asserter: { reference: getReferenceString(clinician.profile) },
      evidence: [{ detail: [{ reference: expect.stringMatching(/^QuestionnaireResponse\//) }] }],
    });

    // 3. Eligibility: advisory results in her queue, with the engine and what it read as provenance.
    const [selection] = (await clinician.queue()).filter(
      (t) => t.for?.reference === her && t.code?.coding?.[0]?.code === 'select-treatment',
    );
    expect(selection).toBeDefined();
    const options = (selection.input ?? []).filter((i) => i.valueCanonical).map((i) => i.valueCanonical);
    expect(options).toEqual([LISINOPRIL, AMLODIPINE]);
    expect(selection.output).toBeUndefined();
    const guidance = selection.contained?.find((r) => r.resourceType === 'GuidanceResponse') as GuidanceResponse;
    expect(guidance.performer?.reference).toMatch(/^Device\//);
    const [provenance] = await repo().searchResources<Provenance>({
      resourceType: 'Provenance',
      filters: [{ code: 'target', operator: 'eq', value: `Task/${selection.id}` }],
    });
    expect(provenance.entity?.every((e) => e.what.reference?.includes('/_history/'))).toBe(true);
    expect(selection.note?.[0]?.text).toMatch(/advisory/);

    // 4. Selection: she picks amlodipine (not the guideline's label); the consent bundle is offered.
    await clinician.select(selection.id, AMLODIPINE);
    await gw.backend.subscriptions.idle();
    const [offer] = await openOffers(gw, patient);
    const { group, items } = await offerOf(gw, offer);
    expect(group.instantiatesCanonical).toEqual([PROTOCOL, AMLODIPINE]);

    // 5. The patient sees her offer task and accepts it.
    const shown = await gw.call('GET', `/v1/fhir/Task/${offer.id}`, { token: patient.token });
    expect(shown.status).toBe(200);
    const accepted = await gw.call('POST', `/v1/tasks/${offer.id}/complete`, {
      token: patient.token,
      body: { decision: 'accept' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    const { carePlan, consent, tasks } = accepted.body as { carePlan: string; consent: string; tasks: string[] };
    const plan = await repo().readReference<CarePlan>({ reference: carePlan });
    expect(plan).toMatchObject({
      status: 'active',
      instantiatesCanonical: [PROTOCOL, AMLODIPINE],
      addresses: [{ reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` }],
    });
    const treatment = await repo().readReference<Consent>({ reference: consent });
    expect(treatment.extension?.some((e) => e.url === EXTENSIONS.clickwrapProof)).toBe(true);

    // 6. Order decisions: her order-decisions task names the order; she has it delivered.
    const orderTask = await repo().readReference<Task>({ reference: tasks.at(-1) as string });
    const view = await gw.call('GET', `/v1/fhir/Task/${orderTask.id}`, { token: patient.token });
    expect((view.body as Task).focus?.reference).toBe(`RequestGroup/${group.id}`);
    const placed = await gw.call('POST', `/v1/orders/${group.id}/decisions`, {
      token: patient.token,
      body: { items: [{ item: `MedicationRequest/${items[0].id}`, decision: 'accept', fulfilment: 'delivery' }] },
    });
    expect(placed.status, placed.text).toBe(200);

    // 7. Placed: the order and its item are orders now; the plan still pins what she accepted.
    expect(await repo().readResource<RequestGroup>('RequestGroup', group.id)).toMatchObject({
      intent: 'order',
      status: 'completed',
    });
    expect(await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id)).toMatchObject({
      intent: 'order',
      status: 'active',
    });
    expect((await repo().readReference<CarePlan>({ reference: carePlan })).instantiatesCanonical).toEqual([
      PROTOCOL,
      AMLODIPINE,
    ]);
  });
});
