import type { WithId } from '@medplum/core';
import type {
  ActivityDefinition,
  CarePlan,
  Condition,
  Consent,
  MedicationRequest,
  PlanDefinition,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot, withdrawAnAgreement } from '../support/journey';
import { freshPatient } from '../support/patients';
import {
  AMLODIPINE,
  answer,
  LISINOPRIL,
  offered,
  offerOf,
  openOffers,
  PROTOCOL,
  RXNORM,
  workAbout,
} from '../support/spine';

/**
 * The patient's answer to a treatment offer (issue 15 item 4, JOURNEY D.4): `POST /v1/tasks/{id}/complete`
 * on the treatment-offer task. Only acceptance activates care; decline and counter return to review.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;
const versionOf = (r: { resourceType: string; id?: string; meta?: { versionId?: string } }) =>
  `${r.resourceType}/${r.id}/_history/${r.meta?.versionId}`;

const herResources = <T extends CarePlan | Consent>(resourceType: T['resourceType'], patient: DemoActor) =>
  repo().searchResources<T>({
    resourceType,
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });
const treatmentConsents = async (patient: DemoActor) =>
  (await herResources<Consent>('Consent', patient)).filter((c) => c.scope?.coding?.[0]?.code === 'treatment');

describe('accepting an offer', () => {
  it('activates care in one step: the treatment Consent pinned to the offered versions with its proof, the active CarePlan instantiating exactly the pinned set, its first tasks and the order decisions', async () => {
    const { patient, condition, offer, group, items } = await offered(gw, clinician);
    const accepted = await gw.call('POST', `/v1/tasks/${offer.id}/complete`, {
      token: patient.token,
      body: { decision: 'accept' },
      headers: { 'content-type': 'application/json', 'user-agent': 'offer-test/1.0' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    const body = accepted.body as { consent: string; carePlan: string; tasks: string[]; decision: string };
    expect(body).toMatchObject({ task: `Task/${offer.id}`, status: 'completed', decision: 'accept' });

    const consent = await repo().readReference<Consent>({ reference: body.consent });
    expect(consent).toMatchObject({
      status: 'active',
      scope: { coding: [{ code: 'treatment' }] },
      patient: { reference: `Patient/${patient.patient.id}` },
    });
    // Exactly what was offered, at the versions she saw.
    expect(consent.provision?.data?.map((d) => d.reference.reference)).toEqual([
      versionOf(group),
      ...items.map(versionOf),
    ]);
    const proof = consent.extension?.find((e) => e.url === EXTENSIONS.clickwrapProof);
    const part = (name: string) => proof?.extension?.find((e) => e.url === name);
    expect(part('who')?.valueReference?.reference).toBe(`Patient/${patient.patient.id}`);
    // The session she answered in: her token's login, not any string.
    const session = JSON.parse(Buffer.from(patient.token.split('.')[1], 'base64url').toString()) as {
      login_id: string;
    };
    expect(part('login')?.valueString).toBe(session.login_id);
    expect(part('userAgent')?.valueString).toBe('offer-test/1.0');

    const plan = await repo().readReference<CarePlan>({ reference: body.carePlan });
    expect(plan).toMatchObject({
      status: 'active',
      intent: 'plan',
      subject: { reference: `Patient/${patient.patient.id}` },
      instantiatesCanonical: [PROTOCOL, AMLODIPINE],
      addresses: [{ reference: versionOf(condition) }],
      author: { reference: clinician.profile.reference },
    });
    expect(plan.supportingInfo?.map((r) => r.reference)).toEqual([versionOf(group), body.consent]);

    // Its first tasks: the protocol's weekly reading, its follow-up visit to book, then the order decisions.
    const issued = await Promise.all(body.tasks.map((reference) => repo().readReference<Task>({ reference })));
    expect(issued.map((t) => t.code?.coding?.[0]?.code)).toEqual(['measurement', 'schedule-visit', 'order-decisions']);
    for (const task of issued) {
      expect(task).toMatchObject({ status: 'ready', basedOn: [{ reference: body.carePlan }] });
      expect(task.owner?.reference).toBe(`Patient/${patient.patient.id}`);
    }
    expect(issued.at(-1)?.focus?.reference).toBe(`RequestGroup/${group.id}`);
    // Placing the orders is a separate step: the offer is still a proposal.
    expect(await repo().readResource<RequestGroup>('RequestGroup', group.id)).toMatchObject({
      intent: 'proposal',
      status: 'active',
    });

    // She sees all of it in her record; a replay answers the same; another answer now is a conflict.
    for (const reference of [body.carePlan, body.consent]) {
      expect((await gw.call('GET', `/v1/fhir/${reference}`, { token: patient.token })).status).toBe(200);
    }
    const replay = await answer(gw, patient, offer, { decision: 'accept' });
    expect(replay).toMatchObject({ status: 200, body: accepted.body });
    const before = storeSnapshot(gw.backend);
    const late = await answer(gw, patient, offer, { decision: 'decline' });
    expect(late).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    expect(await herResources('CarePlan', patient)).toHaveLength(1);
  });

  it('is gated by her agreements: with one withdrawn, 409 consent_required and nothing written', async () => {
    const { patient, offer } = await offered(gw, clinician);
    await withdrawAnAgreement(gw, patient);
    const before = storeSnapshot(gw.backend);
    const refused = await answer(gw, patient, offer, { decision: 'accept' });
    expect(refused).toMatchObject({ status: 409, body: { error: { code: 'consent_required' } } });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Declining starts nothing, so it is not gated.
    expect((await answer(gw, patient, offer, { decision: 'decline' })).status).toBe(200);
  });

  it('twenty concurrent accepts make one CarePlan, one Consent, one set of tasks; every caller gets the same answer', async () => {
    const { patient, offer } = await offered(gw, clinician);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => answer(gw, patient, offer, { decision: 'accept' })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect(await herResources('CarePlan', patient)).toHaveLength(1);
    expect(await treatmentConsents(patient)).toHaveLength(1);
    expect(await workAbout(gw, patient, 'order-decisions')).toHaveLength(1);
  });
});

describe('declining or countering an offer', () => {
  it('decline: the offer is revoked, its items cancelled, the care team gets a review; nothing active is created', async () => {
    const { patient, offer, group, items } = await offered(gw, clinician);
    const declined = await answer(gw, patient, offer, { decision: 'decline', reason: 'I would rather wait' });
    expect(declined.status, declined.text).toBe(200);
    expect(declined.body).toEqual({ task: `Task/${offer.id}`, status: 'completed', decision: 'decline' });
    expect((await repo().readResource<RequestGroup>('RequestGroup', group.id)).status).toBe('revoked');
    expect((await repo().readResource<MedicationRequest>('MedicationRequest', items[0].id)).status).toBe('cancelled');
    expect(await herResources('CarePlan', patient)).toEqual([]);
    expect(await treatmentConsents(patient)).toEqual([]);
    const [review] = await workAbout(gw, patient, 'review-response');
    expect(review).toMatchObject({ status: 'ready', priority: 'routine' });
    expect(review.owner).toBeUndefined();
    expect(review.performerType?.[0]?.coding?.map((c) => c.code)).toContainEqual(expect.stringMatching(/^CareTeam\//));
    const inputs = Object.fromEntries((review.input ?? []).map((i) => [i.type.text, i]));
    expect(inputs.decision?.valueCode).toBe('decline');
    expect(inputs.reason?.valueString).toBe('I would rather wait');
    expect(inputs['declined-offer']?.valueReference?.reference).toBe(versionOf(group));
    // The review is in the clinician's queue, and accepting what she declined is refused.
    expect((await clinician.queue()).map((t) => t.id)).toContain(review.id);
    expect((await answer(gw, patient, offer, { decision: 'accept' })).status).toBe(409);
  });

  it('counter: her medication proposal goes to review with the offer revoked; the clinician’s new selection composes a new offer she can accept', async () => {
    const { patient, offer, group } = await offered(gw, clinician);
    const countered = await answer(gw, patient, offer, {
      decision: 'counter',
      proposal: { medication: `${RXNORM}|314076` },
      reason: 'My sister takes lisinopril',
    });
    expect(countered.status, countered.text).toBe(200);
    const { proposal } = countered.body as { proposal: string };
    const mine = await repo().readReference<MedicationRequest>({ reference: proposal });
    expect(mine).toMatchObject({
      status: 'active',
      intent: 'proposal',
      requester: { reference: `Patient/${patient.patient.id}` },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '314076' }] },
    });
    expect((await repo().readResource<RequestGroup>('RequestGroup', group.id)).status).toBe('revoked');
    expect(await herResources('CarePlan', patient)).toEqual([]);

    // Review: the clinician selects again from the same options (lisinopril, eligible for her).
    const [review] = await workAbout(gw, patient, 'review-response');
    expect(review.input?.find((i) => i.type.text === 'counter-proposal')?.valueReference?.reference).toBe(proposal);
    await clinician.select(review.id, LISINOPRIL);
    await gw.backend.subscriptions.idle();
    const [next] = await openOffers(gw, patient);
    expect(next.id).not.toBe(offer.id);
    const { group: nextGroup } = await offerOf(gw, next);
    expect(nextGroup.instantiatesCanonical).toEqual([PROTOCOL, LISINOPRIL]);
    const accepted = await answer(gw, patient, next, { decision: 'accept' });
    expect(accepted.status, accepted.text).toBe(200);
    const plan = await repo().readReference<CarePlan>({ reference: (accepted.body as { carePlan: string }).carePlan });
    expect(plan.instantiatesCanonical).toEqual([PROTOCOL, LISINOPRIL]);
  });
});

describe('what cannot be accepted', () => {
  it('a note added to the diagnosis after the offer leaves it answerable: nothing withdrawn, no new selection, and she can accept', async () => {
    const { patient, offer, condition } = await offered(gw, clinician);
    const current = await clinician.medplum.readResource('Condition', condition.id);
    await clinician.medplum.updateResource<Condition>({ ...current, note: [{ text: 'Stage 2' }] });
    await gw.backend.subscriptions.idle();
    expect((await repo().readResource<Task>('Task', offer.id)).status).toBe('ready');
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
    const accepted = await answer(gw, patient, offer, { decision: 'accept' });
    expect(accepted.status, accepted.text).toBe(200);
  });

  it('a clinical revision of the diagnosis (its code) withdraws her offer, saying why, and eligibility runs again for the revised Condition: a new selection in the queue, the old offer 409 superseded', async () => {
    const { patient, offer, group, condition } = await offered(gw, clinician);
    const current = await clinician.medplum.readResource('Condition', condition.id);
    const revised = await clinician.medplum.updateResource<Condition>({
      ...current,
      code: {
        coding: [
          {
            system: 'http://hl7.org/fhir/sid/icd-10-cm',
            code: 'R03.0',
            display: 'Elevated blood-pressure reading, without diagnosis of hypertension',
          },
        ],
      },
    });
    await gw.backend.subscriptions.idle();
    const withdrawn = await repo().readResource<Task>('Task', offer.id);
    expect(withdrawn).toMatchObject({ status: 'cancelled', businessStatus: { text: 'condition-revised' } });
    expect(withdrawn.statusReason?.text).toMatch(/revised the diagnosis/);
    expect((await repo().readResource<RequestGroup>('RequestGroup', group.id)).status).toBe('revoked');
    const before = storeSnapshot(gw.backend);
    for (const body of [{ decision: 'accept' }, { decision: 'decline' }]) {
      expect(await answer(gw, patient, offer, body)).toMatchObject({
        status: 409,
        body: { error: { code: 'invalid_state' } },
      });
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Eligibility again, for the Condition as it now is (keyed by the review and its version).
    const selections = await workAbout(gw, patient, 'select-treatment');
    const fresh = selections.find(
      (t) => t.reasonReference?.reference === `Condition/${condition.id}/_history/${revised.meta?.versionId}`,
    );
    expect(fresh?.status).toBe('ready');
    // A note on the revised Condition afterwards writes nothing more (not clinical; its selection stands).
    const mark = storeSnapshot(gw.backend);
    await clinician.medplum.updateResource<Condition>({ ...revised, note: [{ text: 'rechecked' }] });
    await gw.backend.subscriptions.idle();
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(selections.length);
    expect(storeSnapshot(gw.backend).counts).toEqual(mark.counts);
  });

  it('a diagnosis entered in error withdraws her offer and asks for no new selection', async () => {
    const { patient, offer, condition } = await offered(gw, clinician);
    const { clinicalStatus: _clinical, ...current } = await clinician.medplum.readResource('Condition', condition.id);
    await clinician.medplum.updateResource<Condition>({
      ...current,
      verificationStatus: {
        coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'entered-in-error' }],
      },
    });
    await gw.backend.subscriptions.idle();
    expect((await repo().readResource<Task>('Task', offer.id)).status).toBe('cancelled');
    expect((await workAbout(gw, patient, 'select-treatment')).filter((t) => t.status === 'ready')).toEqual([]);
  });

  it('versions published after the offer change neither the offer nor the plan: both keep the pinned versions', async () => {
    const { patient, offer, group } = await offered(gw, clinician);
    // The tenant publishes version 3 of the protocol and of the option (catalog versions are new resources).
    for (const canonical of [PROTOCOL, AMLODIPINE]) {
      const [url, pinned] = canonical.split('|');
      const type = canonical.includes('/protocols/') ? 'PlanDefinition' : 'ActivityDefinition';
      const [v1] = await repo().searchResources<PlanDefinition | ActivityDefinition>({
        resourceType: type,
        filters: [
          { code: 'url', operator: 'eq', value: url },
          { code: 'version', operator: 'eq', value: pinned },
        ],
      });
      const { id: _id, meta, ...rest } = v1;
      await repo().createResource({
        ...rest,
        meta: { project: meta?.project, accounts: meta?.accounts, tag: meta?.tag },
        version: String(Number(pinned) + 1),
        title: `${v1.title} (revised)`,
      } as WithId<PlanDefinition>);
    }
    expect((await offerOf(gw, offer)).group).toEqual(group);
    const accepted = await answer(gw, patient, offer, { decision: 'accept' });
    expect(accepted.status, accepted.text).toBe(200);
    const plan = await repo().readReference<CarePlan>({ reference: (accepted.body as { carePlan: string }).carePlan });
    expect(plan.instantiatesCanonical).toEqual([PROTOCOL, AMLODIPINE]);
  });

  it('answers of the wrong kind are 400, the order-decisions task names its endpoint, and another patient gets 404', async () => {
    const { patient, offer } = await offered(gw, clinician);
    const wrongKind = await answer(gw, patient, offer, {
      measurements: [{ code: 'http://loinc.org|8480-6', value: 120, unit: 'mm[Hg]' }],
    });
    expect(wrongKind).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    for (const bad of [
      { decision: 'maybe' },
      { decision: 'accept', carePlan: 'CarePlan/x' },
      { decision: 'counter' },
    ]) {
      expect((await answer(gw, patient, offer, bad)).status, JSON.stringify(bad)).toBe(400);
    }
    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await answer(gw, stranger, offer, { decision: 'accept' })).status).toBe(404);

    const accepted = await answer(gw, patient, offer, { decision: 'accept' });
    const orderTask = (accepted.body as { tasks: string[] }).tasks.at(-1) as string;
    const misplaced = await gw.call('POST', `/v1/${orderTask.replace('Task/', 'tasks/')}/complete`, {
      token: patient.token,
      body: { decision: 'accept' },
    });
    expect(misplaced).toMatchObject({
      status: 409,
      body: { error: { code: 'invalid_state', details: { use: 'POST /v1/orders/{id}/decisions' } } },
    });
  });
});
