import type { WithId } from '@medplum/core';
import type {
  Condition,
  DetectedIssue,
  Device,
  GuidanceResponse,
  MedicationRequest,
  Observation,
  Parameters,
  Patient,
  Provenance,
  Reference,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import {
  AMLODIPINE,
  assignedCondition,
  formOf,
  LISINOPRIL,
  RXNORM,
  reviewedIntake as reviewedIntakeOf,
  selectionsOf,
  spironolactoneOrder,
} from '../support/spine';

/**
 * bots/eligibility.ts (issue 15 items 1-2, JOURNEY D.1-2): a clinician completes an intake review with
 * the Condition she assigned; the platform answers with each treatment option's eligibility, advisory
 * and with machine provenance, as a selection task in her queue.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

/**
 * The clinician's review, answered as Medplum's app answers a form (src/clinician/ assignCondition);
 * eligibility then runs and records the Condition (undefined when it records none).
 */
async function assign(review: WithId<Task>, _patient: DemoActor, code: string): Promise<WithId<Condition>> {
  await clinician.assignCondition(review.id, code);
  await gw.backend.subscriptions.idle();
  return (await assignedCondition(gw, review)) as WithId<Condition>;
}

const reviewedIntake = () => reviewedIntakeOf(gw, clinician);

const onSpironolactone = (patient: DemoActor) => spironolactoneOrder(gw, patient);

const selectionFor = (review: Task) => selectionsOf(gw, review);

const issuesOf = (patient: DemoActor) =>
  gw.backend.systemRepo.searchResources<DetectedIssue>({
    resourceType: 'DetectedIssue',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });

const option = (selection: Task, canonical: string) => {
  const input = selection.input?.find((i) => i.valueCanonical === canonical);
  return {
    eligible: input?.extension?.find((e) => e.url === EXTENSIONS.eligible)?.valueBoolean,
    preferred: input?.extension?.some((e) => e.url === EXTENSIONS.guidelinePreferred && e.valueBoolean) ?? false,
  };
};

describe('eligibility after review', () => {
  it('offers both options for selection, advisory, with the engine and the pinned versions as provenance; rules run on @medplum/core from the runtime’s require (packages/server/src/bots/vmcontext.ts), and the task takes the tenant from the patient compartment (packages/server/src/fhir/repo.ts getAccounts)', async () => {
    const { patient, review } = await reviewedIntake();
    const condition = await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    expect(selection).toMatchObject({
      status: 'ready',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'select-treatment' }] },
      for: { reference: `Patient/${patient.patient.id}` },
      reasonReference: { reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` },
    });
    expect(selection.owner).toBeUndefined();
    expect(selection.performerType?.[0]?.coding?.find((c) => c.system === SYSTEMS.queue)?.code).toMatch(/^CareTeam\//);
    expect(selection.output).toBeUndefined();
    // Both eligible (her readings meet the prerequisite); the guideline's choice is a label only.
    expect(option(selection, LISINOPRIL)).toEqual({ eligible: true, preferred: true });
    expect(option(selection, AMLODIPINE)).toEqual({ eligible: true, preferred: false });
    expect(await issuesOf(patient)).toEqual([]);
    // Machine provenance: the engine (a Device and its version), what was read (pinned versions).
    const device = (await gw.backend.systemRepo.searchOne<Device>({
      resourceType: 'Device',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.device}|eligibility-engine` }],
    })) as Device;
    const guidance = selection.contained?.find((r) => r.resourceType === 'GuidanceResponse') as GuidanceResponse;
    expect(guidance).toMatchObject({
      status: 'success',
      performer: { reference: `Device/${device.id}` },
      reasonReference: [{ reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` }],
    });
    const results = selection.contained?.find((r) => r.resourceType === 'Parameters') as Parameters;
    expect(results.parameter).toHaveLength(2);
    const [provenance] = await gw.backend.systemRepo.searchResources<Provenance>({
      resourceType: 'Provenance',
      filters: [{ code: 'target', operator: 'eq', value: `Task/${selection.id}` }],
    });
    expect(provenance.agent[0].who).toEqual({ reference: `Device/${device.id}` });
    const sources = provenance.entity?.map((e) => e.what.reference) ?? [];
    expect(sources).toContain(`Condition/${condition.id}/_history/${condition.meta?.versionId}`);
    expect(sources.filter((s) => s?.startsWith('ActivityDefinition/'))).toHaveLength(2);
    expect(sources.filter((s) => s?.startsWith('PlanDefinition/'))).toHaveLength(1);
    expect(sources.every((s) => s?.includes('/_history/'))).toBe(true);
    // In her tenant, readable by the clinician: her queue lists it.
    expect((await clinician.queue()).map((t) => t.id)).toContain(selection.id);
  });

  it('marks an option ineligible with the rule that fired (an interaction with her current medication)', async () => {
    const { patient, review } = await reviewedIntake();
    // A prior order on record (as an import would bring it): spironolactone.
    await onSpironolactone(patient);
    await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    expect(option(selection, LISINOPRIL)).toEqual({ eligible: false, preferred: true });
    expect(option(selection, AMLODIPINE)).toEqual({ eligible: true, preferred: false });
    const issues = await issuesOf(patient);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({
      status: 'preliminary',
      code: { coding: [{ system: SYSTEMS.eligibilityRule, code: 'potassium-sparing-diuretic' }], text: 'interaction' },
      severity: 'high',
    });
    expect(issues[0].implicated?.[0]?.reference).toMatch(/^ActivityDefinition\/[^/]+\/_history\//);
    expect(issues[0].author?.reference).toMatch(/^Device\//);
  });

  it('never calls an option eligible on facts her record lacks: "not determined", naming them, in the form and on the record (issue 48)', async () => {
    // No sex, date of birth, pregnancy status, potassium or kidney function on her record.
    const { patient, review } = await reviewedIntakeOf(gw, clinician, undefined, { baseline: false });
    await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    expect(option(selection, LISINOPRIL)).toEqual({ eligible: false, preferred: true });
    // Amlodipine's rules need nothing she lacks: decided, eligible.
    expect(option(selection, AMLODIPINE)).toEqual({ eligible: true, preferred: false });
    const results = selection.contained?.find((r) => r.resourceType === 'Parameters') as Parameters;
    const part = (canonical: string, name: string) =>
      results.parameter
        ?.find((p) => p.part?.some((q) => q.valueCanonical === canonical))
        ?.part?.find((q) => q.name === name)?.valueBoolean;
    expect([part(LISINOPRIL, 'eligible'), part(LISINOPRIL, 'determined')]).toEqual([false, false]);
    expect([part(AMLODIPINE, 'eligible'), part(AMLODIPINE, 'determined')]).toEqual([true, true]);
    // One finding per undecided rule, each naming what is missing.
    const issues = await issuesOf(patient);
    expect(issues.map((i) => i.code?.coding?.[0]?.code).sort()).toEqual([
      'hyperkalaemia',
      'pregnancy',
      'renal-impairment',
    ]);
    const detail = (code: string) => issues.find((i) => i.code?.coding?.[0]?.code === code)?.detail ?? '';
    expect(detail('pregnancy')).toContain(
      'Not determined: her record has no sex (administrative gender), no date of birth, no pregnancy status',
    );
    expect(detail('hyperkalaemia')).toContain('no serum potassium (LOINC 2823-3)');
    expect(detail('renal-impairment')).toContain('no kidney function (an eGFR result');
    // The form says it in words and what to record; the choice's label too.
    const stored = await formOf(gw, selection);
    const words = stored?.item?.find((i) => i.text?.startsWith('Lisinopril'))?.text ?? '';
    expect(words).toMatch(
      /^Lisinopril 10 mg daily: not determined: no sex \(administrative gender\), no date of birth/,
    );
    expect(words).not.toMatch(/: eligible/);
    expect(words).toContain('To decide it, record on her chart: sex (administrative gender); date of birth;');
    const choice = stored?.item?.find((i) => i.linkId === 'option')?.answerOption?.[0]?.valueCoding?.display;
    expect(choice).toMatch(/\(guideline-preferred; not determined: no sex .*: 3 findings to mitigate\)$/);
  });

  it('decides the rules once the facts are on her record: a high potassium fires, a man needs no pregnancy status', async () => {
    const { patient, review } = await reviewedIntake();
    const repo = gw.backend.systemRepo;
    const her = await repo.readResource<Patient>('Patient', patient.patient.id as string);
    await repo.updateResource<Patient>({ ...her, gender: 'male' });
    await repo.createResource<Observation>({
      resourceType: 'Observation',
      meta: { project: gw.backend.project.id },
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '2823-3' }] },
      subject: { reference: `Patient/${patient.patient.id}` },
      valueQuantity: { value: 5.9, unit: 'mmol/L', system: 'http://unitsofmeasure.org', code: 'mmol/L' },
    });
    await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    expect(option(selection, LISINOPRIL)).toEqual({ eligible: false, preferred: true });
    const issues = await issuesOf(patient);
    expect(issues.map((i) => [i.code?.coding?.[0]?.code, i.detail])).toEqual([
      ['hyperkalaemia', 'ACE inhibitors raise potassium: not started with serum potassium above 5.0 mmol/L.'],
    ]);
  });

  it('answers a review once, whatever the deliveries; a condition outside the catalog is offered nothing', async () => {
    const { patient, review } = await reviewedIntake();
    await assign(review, patient, 'I10');
    // Her later edit of the completed review is delivered again (and twice more at once).
    const completed = await gw.backend.systemRepo.readResource<Task>('Task', review.id);
    await clinician.medplum.updateResource({ ...completed, note: [{ text: 'Discussed with the patient' }] });
    await gw.backend.subscriptions.idle();
    expect(await selectionFor(review)).toHaveLength(1);

    const other = await reviewedIntake();
    await assign(other.review, other.patient, 'J45.909');
    expect(await selectionFor(other.review)).toEqual([]);
  });
});

/** The clinician's selection, as Medplum's app makes it (src/clinician/ select); the offer is then composed. */
async function select(selection: Task, option: string): Promise<void> {
  await clinician.select(selection.id as string, option);
  await gw.backend.subscriptions.idle();
}

const offerTasks = (patient: DemoActor) =>
  gw.backend.systemRepo.searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|treatment-offer` },
      { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
    ],
  });

describe('selection and the consent bundle', () => {
  it('composes the selected option into a pinned proposal offered to the patient as a task', async () => {
    const { patient, review } = await reviewedIntake();
    const condition = await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    await select(selection, AMLODIPINE);
    const [offer] = await offerTasks(patient);
    expect(offer).toMatchObject({ status: 'ready', owner: { reference: `Patient/${patient.patient.id}` } });
    const group = await gw.backend.systemRepo.readReference<RequestGroup>(offer.focus as Reference<RequestGroup>);
    expect(group).toMatchObject({
      status: 'active',
      intent: 'proposal',
      author: { reference: clinician.profile.reference },
      instantiatesCanonical: ['https://patient-care.example/northwind/protocols/hypertension-treatment|2', AMLODIPINE],
      reasonReference: [{ reference: `Condition/${condition.id}/_history/${condition.meta?.versionId}` }],
    });
    const medication = await gw.backend.systemRepo.readReference<MedicationRequest>(
      group.action?.[0]?.resource as Reference<MedicationRequest>,
    );
    expect(medication).toMatchObject({
      intent: 'proposal',
      requester: { reference: clinician.profile.reference },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '197361' }] },
    });
    // The monitoring commitment travels with it; she sees her offer in her record.
    expect(group.note?.map((n) => n.text)).toEqual([
      'Monitoring commitment: Weekly blood pressure',
      'Monitoring commitment: Follow-up video visit',
    ]);
    const mine = await gw.call('GET', `/v1/fhir/RequestGroup/${group.id}`, { token: patient.token });
    expect(mine.status).toBe(200);
    const done = await gw.backend.systemRepo.readResource<Task>('Task', selection.id as string);
    expect(done.businessStatus?.text).toBe('offer-composed');
  });

  it('refuses an ineligible option without an override, and composes it once its finding is mitigated by her', async () => {
    const { patient, review } = await reviewedIntake();
    await onSpironolactone(patient);
    await assign(review, patient, 'I10');
    const [selection] = await selectionFor(review);
    await select(selection, LISINOPRIL);
    expect(await offerTasks(patient)).toEqual([]);
    expect((await gw.backend.systemRepo.readResource<Task>('Task', selection.id as string)).businessStatus?.text).toBe(
      'override-required',
    );

    // A second selection, after she records her reasons on the finding (an update Medplum's app can make).
    const review2 = await gw.backend.systemRepo.readResource<Task>('Task', selection.id as string);
    const [issue] = await issuesOf(patient);
    const mitigated = await clinician.medplum.updateResource<DetectedIssue>({
      ...issue,
      mitigation: [
        {
          action: { text: 'Spironolactone stopped; potassium to be monitored' },
          date: new Date().toISOString(),
          author: { reference: clinician.profile.reference },
        },
      ],
    });
    expect(mitigated.mitigation).toHaveLength(1);
    // She cannot rewrite what the engine found.
    await expect(clinician.medplum.updateResource<DetectedIssue>({ ...mitigated, severity: 'low' })).rejects.toThrow();
    await clinician.medplum.updateResource<Task>({ ...review2, note: [{ text: 'Override recorded' }] });
    await gw.backend.subscriptions.idle();
    expect(await offerTasks(patient)).toHaveLength(1);
  });
});
