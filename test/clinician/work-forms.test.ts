import type { WithId } from '@medplum/core';
import type {
  Condition,
  DetectedIssue,
  Patient,
  Questionnaire,
  QuestionnaireResponse,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import {
  CONDITION_ITEM,
  ELIGIBILITY_ITEM,
  mitigationsAsked,
  OPTION_ITEM,
  PROVIDER_APP_OUTPUT,
  RESPONSE_OUTPUT,
  responseOutput,
  WORK_FORMS,
} from '../../contracts/work-forms';
import { type Clinician, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import { direct, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician, freshClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import {
  AMLODIPINE,
  assigned,
  assignedCondition,
  formOf,
  LISINOPRIL,
  openOffers,
  reviewedIntake,
  spironolactoneOrder,
  workAbout,
} from '../support/spine';

/**
 * Clinician work is a questionnaire (JOURNEY J): the review and the selection point at the stored form of
 * what she must answer, as Medplum's Provider app reads it; she answers it with a QuestionnaireResponse of
 * her own (as the Provider app writes it, or as the admin app's forms do), and the bots believe nothing
 * else: not a colleague's answers, not the patient's, not answers that do not fit.
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

/** A fitting answer to a review's form, as the admin app's form writes it: the catalog's I10, as offered. */
const i10Answers = async (review: Task): Promise<QuestionnaireResponse> => {
  const form = await formOf(gw, review);
  const valueCoding = form?.item?.[0].answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
  return {
    resourceType: 'QuestionnaireResponse',
    questionnaire: `${form?.url}|${form?.version}`,
    status: 'completed',
    subject: review.for,
    item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
  };
};

describe('the forms clinician work carries', () => {
  it('a review points at its stored form, as the Provider app reads it: the condition among her tenant’s condition catalog, nothing preselected', async () => {
    const { review } = await reviewedIntake(gw, clinician);
    const form = await formOf(gw, review);
    // The Provider app shows a form when `focus` is a Questionnaire and loads it from the FIRST input.
    expect(review.focus?.reference).toBe(`Questionnaire/${form?.id}`);
    expect(review.input?.[0]).toEqual({
      type: { text: 'questionnaire' },
      valueReference: { reference: `Questionnaire/${form?.id}`, display: 'Assign a condition' },
    });
    expect(review.reasonReference?.reference).toMatch(/^EpisodeOfCare\//);
    expect(review.code?.text).toBe('Review the intake: assign a condition');
    expect(review.performerType?.[0]?.coding?.[0]).toMatchObject({ system: SYSTEMS.careQueue, code: 'intake-review' });
    expect(review.contained).toBeUndefined();
    expect(form).toMatchObject({
      resourceType: 'Questionnaire',
      url: WORK_FORMS.assignCondition,
      derivedFrom: ['https://patient-care.example/northwind/valuesets/conditions|1'],
      item: [{ linkId: CONDITION_ITEM, type: 'choice', required: true }],
    });
    expect(form?.version).toMatch(/^[0-9a-f-]{36}$/);
    // Stored in her tenant by the bot that issued the review; nobody's but the platform's.
    expect(form?.meta?.author?.reference).toMatch(/^Bot\//);
    expect(form?.meta?.accounts).toEqual([{ reference: await patientTenant(review) }]);
    expect(form?.item?.[0].answerOption?.map((o) => o.valueCoding?.code)).toEqual(['I10', 'R03.0', 'E66.9']);
    expect(JSON.stringify(form)).not.toMatch(/initial/);
    // The same as text, for an app that shows the form only as a link (Medplum's admin app).
    const note = review.note?.map((n) => n.text).join('\n') ?? '';
    expect(note).toContain(WORK_FORMS.assignCondition);
    expect(note).toContain('condition (required)');
    expect(note).toContain('I10 (Essential (primary) hypertension)');
    expect(note).toContain(`"${RESPONSE_OUTPUT}"`);
  });

  it('a selection offers every option, says each one’s eligibility in words, labels the guideline’s one, and asks a mitigation of each finding only of the option chosen', async () => {
    const { patient, selection, condition } = await assigned(gw, clinician, 'I10', onSpironolactone);
    const form = await formOf(gw, selection);
    expect(form?.url).toBe(WORK_FORMS.selectTreatment);
    expect(selection.focus?.reference).toBe(`Questionnaire/${form?.id}`);
    expect(selection.input?.[0]?.valueReference?.reference).toBe(`Questionnaire/${form?.id}`);
    expect(selection.reasonReference?.reference).toBe(
      `Condition/${condition.id}/_history/${condition.meta?.versionId}`,
    );
    expect(selection.code?.text).toBe('Select a treatment');
    expect(selection.description).toBe('Select a treatment for Essential (primary) hypertension (I10)');
    const [heading, lisinopril, amlodipine, choice, ...mitigations] = form?.item ?? [];
    const findings = await hers<DetectedIssue>('DetectedIssue', patient, 'patient');
    expect(findings).toHaveLength(1);
    // In words, a paragraph each: the options' eligibility and every finding, advisory.
    expect(heading).toMatchObject({ linkId: ELIGIBILITY_ITEM, type: 'display' });
    expect(heading.text).toMatch(/advisory/);
    expect([lisinopril, amlodipine].map((i) => [i.linkId, i.type])).toEqual([
      [`${ELIGIBILITY_ITEM}-1`, 'display'],
      [`${ELIGIBILITY_ITEM}-2`, 'display'],
    ]);
    expect(lisinopril.text).toMatch(/^Lisinopril[^:]*: not eligible, guideline-preferred\. Findings: /);
    expect(lisinopril.text).toContain(`Findings: ${findings[0].detail?.replace(/\.$/, '')}. Choosing it`);
    expect(amlodipine.text).toMatch(/^Amlodipine[^:]*: eligible\.$/);
    expect(choice).toMatchObject({ linkId: OPTION_ITEM, type: 'choice', required: true });
    const options = choice.answerOption?.map((o) => o.valueCoding) ?? [];
    expect(options.map((c) => [c?.system, c?.code])).toEqual([
      [SYSTEMS.treatmentOption, LISINOPRIL],
      [SYSTEMS.treatmentOption, AMLODIPINE],
    ]);
    expect(options[0]?.display).toMatch(/\(guideline-preferred; not eligible: 1 finding to mitigate\)$/);
    expect(options[1]?.display).not.toMatch(/\(/);
    expect(JSON.stringify(form)).not.toMatch(/initial/);
    const note = selection.note?.map((n) => n.text).join('\n') ?? '';
    expect(note).toContain(`${mitigations[0]?.linkId}: If you choose ${options[0]?.display?.split(' (')[0]}`);
    // Always shown, saying which option it is for (a hidden item would be dropped by the Provider app's
    // completion of the copy it loaded: contracts/work-forms.ts selectionForm); asked for the chosen option only.
    expect(mitigations).toEqual([
      {
        linkId: expect.stringMatching(/^mitigation-1-/),
        type: 'text',
        text: `If you choose ${options[0]?.display?.split(' (')[0]}: your mitigation of "${findings[0].detail}"`,
      },
    ]);
    expect(mitigationsAsked(form, LISINOPRIL)).toEqual(mitigations);
    expect(mitigationsAsked(form, options[1]?.code as string)).toEqual([]);
    expect(mitigationsAsked(form, 'https://elsewhere.example/option|1')).toEqual([]);
  });

  it('a work form is read by the clinicians of her tenant, never by the other tenant’s, nor by patients, and nobody but the platform writes one', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const form = (await formOf(gw, review)) as WithId<Questionnaire>;
    const path = fhirPath(`Questionnaire/${form.id}`);
    const token = (who: Clinician) => who.medplum.getAccessToken() as string;
    expect((await direct(gw.backend, token(clinician), 'GET', path)).status).toBe(200);
    expect((await direct(gw.backend, token(colleague), 'GET', path)).status).toBe(200);
    const southridge = await demoClinician(gw.backend, 'southridge');
    expect((await direct(gw.backend, token(southridge), 'GET', path)).status).toBe(404);
    expect((await direct(gw.backend, patient.token, 'GET', path)).status).toBe(404);
    const before = storeSnapshot(gw.backend);
    for (const [who, bearer] of [
      ['clinician', token(clinician)],
      ['patient', patient.token],
    ] as const) {
      const edited = await direct(gw.backend, bearer, 'PUT', path, { body: { ...form, item: [] } });
      expect([403, 404], who).toContain(edited.status);
      const forged = await direct(gw.backend, bearer, 'POST', fhirPath('Questionnaire'), {
        body: { ...form, id: undefined, meta: undefined },
      });
      expect(forged.status, who).toBe(403);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
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
    const response = (await colleague.medplum.createResource(
      await i10Answers(review),
    )) as WithId<QuestionnaireResponse>;
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
      ...(await i10Answers(review)),
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

  it('a patient cannot answer a clinician’s form on Medplum (its answers wake the bots, on their shared quota); answers in her name made around her policy are not believed', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const before = storeSnapshot(gw.backend);
    for (const status of ['completed', 'in-progress']) {
      const refused = await direct(gw.backend, patient.token, 'POST', fhirPath('QuestionnaireResponse'), {
        body: { ...(await i10Answers(review)), status, author: { reference: `Patient/${patient.patient.id}` } },
      });
      expect(refused.status, status).toBe(403);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Her own intake answers (another questionnaire) she still writes.
    const own = await direct(gw.backend, patient.token, 'POST', fhirPath('QuestionnaireResponse'), {
      body: {
        ...(await i10Answers(review)),
        questionnaire: 'https://patient-care.example/questionnaires/intake|1',
        item: [],
      },
    });
    expect(own.status, own.text).toBe(201);
    const created = (await gw.backend.admin.createResource<QuestionnaireResponse>({
      ...(await i10Answers(review)),
      author: { reference: `Patient/${patient.patient.id}` },
    })) as WithId<QuestionnaireResponse>;
    await handIn(review.id, created);
    expect(await assignedCondition(gw, review)).toBeUndefined();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
  });

  it('her own answers about another patient, to another form, still in progress or not fitting the form are not believed; the same answers done right are', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const other = await reviewedIntake(gw, clinician);
    const wrong: ((right: QuestionnaireResponse) => QuestionnaireResponse)[] = [
      (right) => ({ ...right, subject: other.review.for }),
      (right) => ({ ...right, questionnaire: WORK_FORMS.selectTreatment }),
      // Another form of the same kind (its version names another task's form).
      (right) => ({ ...right, questionnaire: `${WORK_FORMS.assignCondition}|another-form` }),
      (right) => ({ ...right, status: 'stopped' }),
      (right) => ({ ...right, item: [{ linkId: CONDITION_ITEM, answer: [{ valueString: 'I10' }] }] }),
      // The condition right, plus an item the form does not ask (answers must fit the form: bots/lib/answers.ts).
      (right) => ({
        ...right,
        item: [...(right.item ?? []), { linkId: 'note', answer: [{ valueString: 'also asthma' }] }],
      }),
    ];
    for (const answers of wrong) {
      // Each on a fresh review of hers: a completed task is not completed again.
      const { review: fresh } = await reviewedIntake(gw, clinician);
      const response = (await clinician.medplum.createResource(
        answers(await i10Answers(fresh)),
      )) as WithId<QuestionnaireResponse>;
      await handIn(fresh.id, response);
      expect(await assignedCondition(gw, fresh)).toBeUndefined();
    }
    const right = (await clinician.medplum.createResource(await i10Answers(review))) as WithId<QuestionnaireResponse>;
    await handIn(review.id, right);
    expect(((await assignedCondition(gw, review)) as Condition).code?.coding?.[0].code).toBe('I10');
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
  });

  it('as the Provider app hands them in (the task completed while her answers are still in progress, completed after): nothing until they are, then eligibility', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const form = await formOf(gw, review);
    const valueCoding = form?.item?.[0].answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
    // Assignee and status as two separate updates (the Provider app's Properties tab), no If-Match.
    const token = clinician.medplum.getAccessToken() as string;
    const put = async (change: Partial<Task>) => {
      const current = await repo().readResource<Task>('Task', review.id);
      const res = await direct(gw.backend, token, 'PUT', fhirPath(`Task/${review.id}`), {
        body: { ...current, ...change },
      });
      expect(res.status, res.text).toBe(200);
    };
    await put({ owner: clinician.profile });
    const response = (await clinician.medplum.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      questionnaire: form?.url,
      status: 'in-progress',
      authored: new Date().toISOString(),
      source: clinician.profile,
      item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
    })) as WithId<QuestionnaireResponse>;
    // Filed in her tenant though it names no patient: Medplum makes the writer's policy `compartment` the
    // account of what she creates (packages/server/src/fhir/repo.ts getAccounts), as the embedded one does.
    expect(response.meta?.accounts).toEqual([{ reference: await patientTenant(review) }]);
    await put({
      output: [
        { type: { text: PROVIDER_APP_OUTPUT }, valueReference: { reference: `QuestionnaireResponse/${response.id}` } },
      ],
    });
    await put({ status: 'completed' });
    await gw.backend.subscriptions.idle();
    expect(await assignedCondition(gw, review)).toBeUndefined();
    // Waiting is not a refusal: the review says nothing of missing answers.
    expect((await repo().readResource<Task>('Task', review.id)).businessStatus).toBeUndefined();
    await clinician.medplum.updateResource({ ...response, status: 'completed' });
    await gw.backend.subscriptions.idle();
    expect(((await assignedCondition(gw, review)) as Condition).code?.coding?.[0].code).toBe('I10');
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
  });

  it('completed answers of hers that no completed task of hers hands in wake nothing', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const form = await formOf(gw, review);
    const valueCoding = form?.item?.[0].answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
    await clinician.claim(review.id);
    const response = (await clinician.medplum.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      questionnaire: form?.url,
      status: 'in-progress',
      source: clinician.profile,
      item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
    })) as WithId<QuestionnaireResponse>;
    await clinician.medplum.updateResource({ ...response, status: 'completed' });
    await gw.backend.subscriptions.idle();
    expect(await assignedCondition(gw, review)).toBeUndefined();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
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
  it('on Medplum a clinician cannot rewrite the patient’s submitted intake, change or sign a colleague’s answers, or write in the patient’s name; her own draft she may change, once submitted never (a write to submitted answers changes nothing: packages/server/src/fhir/repo.ts restoreReadonlyFields takes the entry the stored version matches)', async () => {
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
    // Submitted answers are kept as submitted whatever a write says: it changes nothing (200, the stored
    // version answered, no new one), as Medplum's readonlyFields do (clinician policy submittedAnswersPolicy).
    const rewritten = await put({ ...intake, item: [], status: 'in-progress', source: clinician.profile });
    expect(rewritten.status).toBe(200);
    expect(rewritten.body).toMatchObject({
      status: 'completed',
      item: intake.item,
      meta: { versionId: intake.meta?.versionId },
    });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    const colleagues = (await colleague.medplum.createResource({
      ...(await i10Answers(review)),
      status: 'in-progress',
    })) as WithId<QuestionnaireResponse>;
    const afterColleague = storeSnapshot(gw.backend);
    expect((await put({ ...colleagues, author: clinician.profile })).status).toBe(403);
    expect((await put({ ...colleagues, status: 'completed' })).status).toBe(403);
    const inHerName = await direct(gw.backend, token, 'POST', fhirPath('QuestionnaireResponse'), {
      body: { ...(await i10Answers(review)), author: { reference: `Patient/${patient.patient.id}` } },
    });
    expect(inHerName.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(afterColleague);
    expect(afterColleague.counts).not.toEqual(before.counts);
    // Her own: a draft she may change; submitted, frozen.
    const draft = (await clinician.medplum.createResource({
      ...(await i10Answers(review)),
      status: 'in-progress',
      author: { reference: clinician.profile.reference },
    })) as WithId<QuestionnaireResponse>;
    const submitted = await put({ ...draft, status: 'completed' });
    expect(submitted.status).toBe(200);
    const frozen = await put({ ...(submitted.body as QuestionnaireResponse), item: [] });
    expect([frozen.status, (frozen.body as QuestionnaireResponse).item]).toEqual([
      200,
      (submitted.body as QuestionnaireResponse).item,
    ]);
    expect((frozen.body as QuestionnaireResponse).meta?.versionId).toBe(
      (submitted.body as QuestionnaireResponse).meta?.versionId,
    );
  });

  it('a task a colleague opened (the Provider app then drafts its answers in her name) and handed over is answered by whoever holds it: she takes the draft over in her own name (issue 48)', async () => {
    const { patient, review } = await reviewedIntake(gw, clinician);
    const form = await formOf(gw, review);
    const valueCoding = form?.item?.[0].answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
    const kim = await signInClinician({
      baseUrl: gw.backend.baseUrl,
      fetch: gw.backend.fetch,
      email: demoEmail('colleague', 'northwind'),
      password: DEMO_PASSWORD,
      projectId: gw.backend.project.id,
    });
    const as = (who: Clinician) => (method: string, path: string, body: unknown) =>
      direct(gw.backend, who.medplum.getAccessToken() as string, method, fhirPath(path), { body });
    const current = () => repo().readResource<Task>('Task', review.id);
    // She opens it: the app drafts an empty response in her name and points the task at it (before taking it).
    const draft = await as(clinician)('POST', 'QuestionnaireResponse', {
      resourceType: 'QuestionnaireResponse',
      questionnaire: form?.url,
      status: 'in-progress',
      authored: new Date().toISOString(),
      source: clinician.profile,
    });
    expect(draft.status, draft.text).toBe(201);
    const drafted = draft.body as WithId<QuestionnaireResponse>;
    const pointed = await as(clinician)('PUT', `Task/${review.id}`, {
      ...(await current()),
      output: [
        { type: { text: PROVIDER_APP_OUTPUT }, valueReference: { reference: `QuestionnaireResponse/${drafted.id}` } },
      ],
    });
    expect(pointed.status, pointed.text).toBe(200);
    // She hands it to her colleague of the queue, who answers the draft the form names, in her own name.
    expect((await as(clinician)('PUT', `Task/${review.id}`, { ...(await current()), owner: kim.profile })).status).toBe(
      200,
    );
    const answered = await as(kim)('PUT', `QuestionnaireResponse/${drafted.id}`, {
      ...drafted,
      source: kim.profile,
      item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
    });
    expect(answered.status, answered.text).toBe(200);
    expect((answered.body as QuestionnaireResponse).source?.reference).toBe(kim.profile.reference);
    // The app completes the copy it loaded when she opened the task: her answers (filled in place), and the
    // name of the colleague who drafted it as its source. Recorded in her name (ownDraftPolicy), no refusal.
    expect((await as(kim)('PUT', `Task/${review.id}`, { ...(await current()), status: 'completed' })).status).toBe(200);
    const done = await as(kim)('PUT', `QuestionnaireResponse/${drafted.id}`, {
      ...drafted,
      item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }],
      status: 'completed',
    });
    expect(done.status, done.text).toBe(200);
    expect((done.body as QuestionnaireResponse).source?.reference).toBe(kim.profile.reference);
    await gw.backend.subscriptions.idle();
    const condition = (await assignedCondition(gw, review)) as Condition;
    expect([condition.code?.coding?.[0].code, condition.asserter?.reference]).toEqual(['I10', kim.profile.reference]);
    expect(await workAbout(gw, patient, 'select-treatment')).toHaveLength(1);
    // The page she left on the task saves the response again as it goes (Medplum's Provider app): the
    // submitted answers stay as they are, and the save is no false alarm (200, nothing changed).
    const late = await as(clinician)('PUT', `QuestionnaireResponse/${drafted.id}`, {
      ...(done.body as object),
      status: 'in-progress',
      source: clinician.profile,
    });
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({
      status: 'completed',
      source: { reference: kim.profile.reference },
      meta: { versionId: (done.body as QuestionnaireResponse).meta?.versionId },
    });
  });

  it('the review hands in her answers as the Provider app does: its output, her as source, about nobody, completed', async () => {
    const { review } = await assigned(gw, clinician);
    const done = await repo().readResource<Task>('Task', review.id);
    expect(done.output).toHaveLength(1);
    expect(done.output?.[0]?.type).toEqual({ text: PROVIDER_APP_OUTPUT });
    const [, id] = done.output?.[0]?.valueReference?.reference?.split('/') ?? [];
    const response = await repo().readResource<QuestionnaireResponse>('QuestionnaireResponse', id);
    expect(response).toMatchObject({ status: 'completed', source: { reference: clinician.profile.reference } });
    expect(response.subject).toBeUndefined();
    expect(response.author).toBeUndefined();
  });
});

/** Her tenant (the patient's managing organization), as the test backend provisioned it. */
async function patientTenant(task: Task): Promise<string> {
  const patient = await repo().readReference<Patient>({ reference: task.for?.reference ?? '' });
  return patient.managingOrganization?.reference ?? '';
}
