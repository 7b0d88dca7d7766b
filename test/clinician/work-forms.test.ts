import type { WithId } from '@medplum/core';
import type { Condition, DetectedIssue, QuestionnaireResponse, RequestGroup, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import {
  CONDITION_ITEM,
  formOf,
  OPTION_ITEM,
  RESPONSE_OUTPUT,
  responseOutput,
  WORK_FORMS,
} from '../../contracts/work-forms';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician, freshClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import {
  AMLODIPINE,
  assigned,
  assignedCondition,
  LISINOPRIL,
  openOffers,
  reviewedIntake,
  spironolactoneOrder,
  workAbout,
} from '../support/spine';

/**
 * Clinician work is a questionnaire (issue 26 item 2, JOURNEY J): the review and the selection carry
 * the form of what she must answer, she answers it with a QuestionnaireResponse of her own, and the
 * bots believe nothing else: not a colleague's answers, not the patient's, not answers that do not fit.
 */
let gw: TestGateway;
let clinician: Clinician;
let colleague: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  colleague = await freshClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;

const onSpironolactone = (patient: DemoActor) => spironolactoneOrder(gw, patient);

const hers = <T extends RequestGroup | DetectedIssue>(type: T['resourceType'], patient: DemoActor, param = 'subject') =>
  repo().searchResources<T>({
    resourceType: type,
    filters: [{ code: param, operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });

/** Hands in answers someone else wrote (their own QuestionnaireResponse) as hers: claim, then complete. */
async function handIn(taskId: string, response: QuestionnaireResponse & { id: string }) {
  await clinician.claim(taskId);
  await clinician.complete(taskId, [responseOutput(`QuestionnaireResponse/${response.id}`)]);
  await gw.backend.subscriptions.idle();
}

/** A fitting answer to a review's form: the catalog's I10, as the form offers it. */
const i10Answers = (review: Task): QuestionnaireResponse => {
  const form = formOf(review);
  const valueCoding = form?.item?.[0].answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
  return {
    resourceType: 'QuestionnaireResponse',
    questionnaire: form?.url,
    status: 'completed',
    subject: review.for,
    item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
  };
};

describe('the forms clinician work carries', () => {
  it('a review asks for the condition among her tenant’s condition catalog, nothing preselected', async () => {
    const { review } = await reviewedIntake(gw, clinician);
    const form = formOf(review);
    expect(review.input).toContainEqual({
      type: { text: 'questionnaire' },
      valueReference: { reference: '#form', display: 'Assign a condition' },
    });
    expect(form).toMatchObject({
      resourceType: 'Questionnaire',
      url: WORK_FORMS.assignCondition,
      derivedFrom: ['https://patient-care.example/northwind/valuesets/conditions|1'],
      item: [{ linkId: CONDITION_ITEM, type: 'choice', required: true }],
    });
    expect(form?.item?.[0].answerOption?.map((o) => o.valueCoding?.code)).toEqual(['I10', 'R03.0', 'E66.9']);
    expect(JSON.stringify(form)).not.toMatch(/initial/);
    // The same as text, which Medplum's app shows (it shows nothing of a contained resource).
    const note = review.note?.map((n) => n.text).join('\n') ?? '';
    expect(note).toContain(WORK_FORMS.assignCondition);
    expect(note).toContain('condition (required)');
    expect(note).toContain('I10 (Essential (primary) hypertension)');
    expect(note).toContain(`"${RESPONSE_OUTPUT}"`);
  });

  it('a selection offers every option, labels the guideline’s one, and asks a mitigation of each finding only of the option chosen', async () => {
    const { patient, selection } = await assigned(gw, clinician, 'I10', onSpironolactone);
    const form = formOf(selection);
    expect(form?.url).toBe(WORK_FORMS.selectTreatment);
    const [choice, ...mitigations] = form?.item ?? [];
    expect(choice).toMatchObject({ linkId: OPTION_ITEM, type: 'choice', required: true });
    const options = choice.answerOption?.map((o) => o.valueCoding) ?? [];
    expect(options.map((c) => [c?.system, c?.code])).toEqual([
      [SYSTEMS.treatmentOption, LISINOPRIL],
      [SYSTEMS.treatmentOption, AMLODIPINE],
    ]);
    expect(options[0]?.display).toMatch(/\(guideline-preferred; not eligible: 1 finding to mitigate\)$/);
    expect(options[1]?.display).not.toMatch(/\(/);
    expect(JSON.stringify(form)).not.toMatch(/initial/);
    const findings = await hers<DetectedIssue>('DetectedIssue', patient, 'patient');
    expect(findings).toHaveLength(1);
    const note = selection.note?.map((n) => n.text).join('\n') ?? '';
    expect(note).toContain(`${mitigations[0]?.linkId} (required)`);
    expect(note).toContain(`only when option is ${LISINOPRIL}`);
    expect(mitigations).toEqual([
      expect.objectContaining({
        type: 'text',
        required: true,
        text: `Mitigation of "${findings[0].detail}" (${options[0]?.display?.split(' (')[0]})`,
        enableWhen: [{ question: OPTION_ITEM, operator: '=', answerCoding: options[0] }],
      }),
    ]);
  });
});

describe('her answers decide', () => {
  it('the condition she chose is recorded by eligibility: her as asserter, her answers as evidence', async () => {
    const { review, condition } = await assigned(gw, clinician);
    const done = await repo().readResource<Task>('Task', review.id);
    const [type, id] = done.output?.[0]?.valueReference?.reference?.split('/') ?? ['', ''];
    expect(type).toBe('QuestionnaireResponse');
    const response = await repo().readResource<QuestionnaireResponse>('QuestionnaireResponse', id);
    expect(response.meta?.author?.reference).toBe(clinician.profile.reference);
    expect(condition).toMatchObject({
      asserter: { reference: clinician.profile.reference },
      recorder: { reference: clinician.profile.reference },
      evidence: [{ detail: [{ reference: `QuestionnaireResponse/${id}` }] }],
      verificationStatus: { coding: [{ code: 'confirmed' }] },
    });
    expect(condition.meta?.author?.reference).toMatch(/^Bot\//);
  });

  it('an ineligible option chosen with her mitigation in the form is offered; without it, override-required and nothing offered', async () => {
    const without = await assigned(gw, clinician, 'I10', onSpironolactone);
    await clinician.select(without.selection.id, LISINOPRIL);
    await gw.backend.subscriptions.idle();
    expect((await repo().readResource<Task>('Task', without.selection.id)).businessStatus?.text).toBe(
      'override-required',
    );
    expect(await openOffers(gw, without.patient)).toEqual([]);

    const mitigated = await assigned(gw, clinician, 'I10', onSpironolactone);
    await clinician.select(mitigated.selection.id, LISINOPRIL, 'Potassium checked weekly for the first month');
    await gw.backend.subscriptions.idle();
    expect(await openOffers(gw, mitigated.patient)).toHaveLength(1);
    const [group] = await hers<RequestGroup>('RequestGroup', mitigated.patient);
    expect(group.instantiatesCanonical).toContain(LISINOPRIL);
    // The findings themselves are unchanged: the override is her signed answer, named by the offer's provenance.
    const [finding] = await hers<DetectedIssue>('DetectedIssue', mitigated.patient, 'patient');
    expect(finding.mitigation).toBeUndefined();
  });

  it('answers a colleague wrote, handed in by her, are not believed: no Condition, no selection, and the review says why', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const response = (await colleague.medplum.createResource(i10Answers(review))) as WithId<QuestionnaireResponse>;
    await handIn(review.id, response);
    expect(await assignedCondition(gw, review)).toBeUndefined();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
    const done = await repo().readResource<Task>('Task', review.id);
    expect(done.businessStatus?.text).toBe('no-answers');
    expect(done.statusReason?.text).toBe('the answers are not the completing clinician’s own');
  });

  it('answers as Medplum app’s forms write them (a coding without its system, the output named by a coding) are believed, as the form’s own choice', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    await clinician.claim(review.id);
    const response = (await clinician.medplum.createResource({
      ...i10Answers(review),
      item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding: { code: 'I10', display: 'I10' } }] }],
    })) as WithId<QuestionnaireResponse>;
    await clinician.complete(review.id, [
      {
        type: { coding: [{ code: RESPONSE_OUTPUT, display: RESPONSE_OUTPUT }] },
        valueReference: { reference: `QuestionnaireResponse/${response.id}` },
      },
    ]);
    await gw.backend.subscriptions.idle();
    expect((await assignedCondition(gw, review))?.code?.coding).toEqual([
      { system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'I10', display: 'Essential (primary) hypertension' },
    ]);
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
  });

  it('answers the patient wrote herself (her own QuestionnaireResponse to the form) are not believed', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const created = await direct(gw.backend, patient.token, 'POST', fhirPath('QuestionnaireResponse'), {
      body: { ...i10Answers(review), author: { reference: `Patient/${patient.patient.id}` } },
    });
    expect(created.status).toBe(201);
    await handIn(review.id, created.body as WithId<QuestionnaireResponse>);
    expect(await assignedCondition(gw, review)).toBeUndefined();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
  });

  it('her own answers about another patient, to another form, still in progress or not fitting the form are not believed; the same answers done right are', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const other = await reviewedIntake(gw, clinician);
    const wrong: ((fresh: Task) => QuestionnaireResponse)[] = [
      (fresh) => ({ ...i10Answers(fresh), subject: other.review.for }),
      (fresh) => ({ ...i10Answers(fresh), questionnaire: WORK_FORMS.selectTreatment }),
      (fresh) => ({ ...i10Answers(fresh), status: 'in-progress' }),
      (fresh) => ({ ...i10Answers(fresh), item: [{ linkId: CONDITION_ITEM, answer: [{ valueString: 'I10' }] }] }),
      // The condition right, plus an item the form does not ask (answers must fit the form: bots/lib/answers.ts).
      (fresh) => ({
        ...i10Answers(fresh),
        item: [...(i10Answers(fresh).item ?? []), { linkId: 'note', answer: [{ valueString: 'also asthma' }] }],
      }),
    ];
    for (const answers of wrong) {
      // Each on a fresh review of hers: a completed task is not completed again.
      const { review: fresh } = await reviewedIntake(gw, clinician);
      const response = (await clinician.medplum.createResource(answers(fresh))) as WithId<QuestionnaireResponse>;
      await handIn(fresh.id, response);
      expect(await assignedCondition(gw, fresh)).toBeUndefined();
    }
    const right = (await clinician.medplum.createResource(i10Answers(review))) as WithId<QuestionnaireResponse>;
    await handIn(review.id, right);
    expect(((await assignedCondition(gw, review)) as Condition).code?.coding?.[0].code).toBe('I10');
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
  });

  it('a review completed without answers starts nothing', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    await clinician.claim(review.id);
    const done = await clinician.complete(review.id, []);
    expect(done.output?.some((o) => o.type.text === RESPONSE_OUTPUT)).toBe(false);
    await gw.backend.subscriptions.idle();
    expect(await assignedCondition(gw, review)).toBeUndefined();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
  });
});

describe('answers stay as their writer submitted them (clinician policy OWN_ANSWERS_ONLY)', () => {
  it('on Medplum a clinician cannot rewrite the patient’s submitted intake, change or sign a colleague’s answers, or write in the patient’s name; her own draft she may change, once submitted never', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const [intake] = await repo().searchResources<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(intake.status).toBe('completed');
    const token = clinician.medplum.getAccessToken() as string;
    const put = (response: QuestionnaireResponse) =>
      direct(gw.backend, token, 'PUT', fhirPath(`QuestionnaireResponse/${response.id}`), { body: response });
    const before = storeSnapshot(gw.backend);
    expect((await put({ ...intake, item: [] })).status).toBe(403);
    const colleagues = (await colleague.medplum.createResource({
      ...i10Answers(review),
      status: 'in-progress',
    })) as WithId<QuestionnaireResponse>;
    const afterColleague = storeSnapshot(gw.backend);
    expect((await put({ ...colleagues, author: clinician.profile })).status).toBe(403);
    expect((await put({ ...colleagues, status: 'completed' })).status).toBe(403);
    const inHerName = await direct(gw.backend, token, 'POST', fhirPath('QuestionnaireResponse'), {
      body: { ...i10Answers(review), author: { reference: `Patient/${patient.patient.id}` } },
    });
    expect(inHerName.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(afterColleague);
    expect(afterColleague.counts).not.toEqual(before.counts);
    // Her own: a draft she may change; submitted, frozen.
    const draft = (await clinician.medplum.createResource({
      ...i10Answers(review),
      status: 'in-progress',
      author: { reference: clinician.profile.reference },
    })) as WithId<QuestionnaireResponse>;
    const submitted = await put({ ...draft, status: 'completed' });
    expect(submitted.status).toBe(200);
    expect((await put({ ...(submitted.body as QuestionnaireResponse), item: [] })).status).toBe(403);
  });

  it('the review hands in the version she wrote (a pinned reference)', async () => {
    const { review } = await assigned(gw, clinician);
    const done = await repo().readResource<Task>('Task', review.id);
    expect(done.output?.[0]?.valueReference?.reference).toMatch(/^QuestionnaireResponse\/[^/]+\/_history\/[^/]+$/);
  });
});
