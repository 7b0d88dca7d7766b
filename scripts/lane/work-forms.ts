import { MedplumClient } from '@medplum/core';
import type {
  AuditEvent,
  Bot,
  Coding,
  Condition,
  Questionnaire,
  QuestionnaireResponse,
  Resource,
  Task,
  TaskOutput,
} from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import {
  CONDITION_ITEM,
  FORM_INPUT,
  formReference,
  OPTION_ITEM,
  PROVIDER_APP_OUTPUT,
  RESPONSE_OUTPUT,
  responseOutput,
  responseReference,
  WORK_FORMS,
} from '../../contracts/work-forms';
import { createPatientCareClient } from '../../src/sdk';
import { answerBloodPressureIntake } from '../intake';
import {
  type Aftermath,
  type Answer,
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  ICD10CM,
  medplumCall,
  message,
  outputName,
  type Person,
  PUBLIC_URL,
  pause,
  REFUSED,
  REJECTED,
  row,
  SUBSCRIPTION_WAIT_MS,
  sameSet,
} from './common';

/** A task's stored form (contracts/work-forms.ts: `focus` and first input -> `Questionnaire/<id>`), as one reads it. */
export interface StoredForm {
  /** `Questionnaire/<id>` (formReference), undefined when the task points at no stored form. */
  reference?: string;
  /** What the read answered. */
  answer?: Answer;
  form?: Questionnaire & { id: string };
}

/**
 * The stored form a task points at, read with `token` (a person's, or the admin's) in extended mode, so
 * that `meta.author` (the Bot that stored it) shows. Clinician work carries no contained form since 65cd263.
 */
export async function readForm(baseUrl: string, token: string, task: Task | undefined): Promise<StoredForm> {
  const reference = task ? formReference(task) : undefined;
  if (!reference) {
    return {};
  }
  const answer = await medplumCall(baseUrl, token, 'GET', `fhir/R4/${reference}`, {
    waitOutQuota: true,
    extended: true,
  });
  return {
    reference,
    answer,
    form: answer.status === 200 ? (answer.body as Questionnaire & { id: string }) : undefined,
  };
}

/** A stored form in a few words: its reference, url|version, writer and accounts. */
export const formSaid = (stored: StoredForm): string =>
  !stored.reference
    ? 'no stored form (focus and first input naming the same Questionnaire/<id>)'
    : !stored.form
      ? `${stored.reference}: ${stored.answer ? describe(stored.answer) : 'not read'}`
      : `${stored.reference} ${stored.form.url}|${stored.form.version}, written by ${stored.form.meta?.author?.reference ?? 'nobody'}, accounts ${stored.form.meta?.accounts?.map((a) => a.reference).join(', ') || 'none'}`;

/** A new Northwind patient (signed in) and her intake review as the complete-task bot issued it, with its stored form. */
export interface IntakeReview {
  patient: Person;
  review: Task & { id: string };
  /** The review's stored form, as the admin read it (the Questionnaire `focus` and the first input name). */
  form: Questionnaire & { id: string };
  /** The patient's tenant (her Patient's `meta.accounts`, as the admin reads them). */
  tenant: string[];
}

/**
 * A new patient registers through Northwind's app and completes the blood-pressure intake through the
 * gateway (the journey's steps 1 to 5, without the upload): the complete-task bot issues her intake
 * review in the Northwind intake queue, and stores its form (contracts/work-forms.ts: a Questionnaire of
 * her tenant, written by the Bot, that the review's `focus` and first input name). One row says what was
 * issued; undefined when it was not as it must be.
 */
export async function intakeReview(
  ctx: AttackContext,
  label: string,
  queueRef: string | undefined,
): Promise<IntakeReview | undefined> {
  const step = `precondition: a new patient (${label}) registers through Northwind's app and completes the blood-pressure intake through the gateway: the complete-task bot issues her intake review in the Northwind intake queue, its form stored (focus and first input -> Questionnaire/<id> of url ${WORK_FORMS.assignCondition}, written by a Bot, meta.accounts the patient's tenant; reasonReference her EpisodeOfCare)`;
  try {
    const client = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    const user = await client.startNewUser({
      firstName: 'Rhea',
      lastName: `Review (${label})`,
      email: `lane.form.${Date.now()}@example.com`,
      password: 'a long enough lane password',
      projectId: ctx.projectId,
      clientId: ctx.appIdOf('northwind'),
      recaptchaToken: '',
    });
    const registered = await client.startNewPatient({ login: user.login, projectId: ctx.projectId });
    await client.processCode(registered.code as string);
    const token = client.getAccessToken() as string;
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    const profile = await api.patient.profile();
    await api.fhir.updatePatient({
      ...(profile as typeof profile & { id: string }),
      address: [{ line: ['7 Form Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    if (!check) {
      row(step, 'FAILED', `${home.patient}: the blood-pressure check is not in her catalog`);
      return undefined;
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
    await api.agreements.accept(unmet);
    const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
    await answerBloodPressureIntake(api, assessment);
    const search = `fhir/R4/Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|review-intake`)}&patient=${home.patient}`;
    const start = Date.now();
    let review: Task | undefined;
    for (;;) {
      review = entriesOf((await adminRead(ctx, search)).body)[0] as Task | undefined;
      if (review || Date.now() - start > SUBSCRIPTION_WAIT_MS) {
        break;
      }
      await pause(1000);
    }
    if (!review?.id) {
      row(step, 'FAILED', `${home.patient}: no review-intake Task of hers within ${SUBSCRIPTION_WAIT_MS / 1000} s`);
      return undefined;
    }
    const stored = await readForm(ctx.baseUrl, ctx.adminToken, review);
    const form = stored.form;
    const first = review.input?.[0];
    const reference = first?.type?.text === FORM_INPUT ? first.valueReference?.reference : undefined;
    const choices = (form?.item?.find((i) => i.linkId === CONDITION_ITEM)?.answerOption ?? []).map(
      (o) => o.valueCoding?.code,
    );
    const author = review.meta?.author?.reference ?? '';
    const tenant = (
      ((await adminRead(ctx, `fhir/R4/${home.patient}`)).body as Resource | undefined)?.meta?.accounts ?? []
    )
      .map((a) => a.reference ?? '')
      .filter(Boolean);
    const formAccounts = (form?.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const good =
      review.status === 'ready' &&
      review.owner?.reference === queueRef &&
      author.startsWith('Bot/') &&
      review.reasonReference?.reference?.startsWith('EpisodeOfCare/') === true &&
      form !== undefined &&
      form.url === WORK_FORMS.assignCondition &&
      form.meta?.author?.reference?.startsWith('Bot/') === true &&
      tenant.length > 0 &&
      sameSet(formAccounts, tenant) &&
      choices.includes('I10');
    row(
      step,
      good ? 'ok' : 'FAILED',
      `${home.patient} (tenant ${tenant.join(', ') || 'none'}); Task/${review.id} ${review.status}, owner ${review.owner?.reference}${review.owner?.reference === queueRef ? ' (the Northwind intake queue)' : ''}, written by ${author || 'nobody'}, reasonReference ${review.reasonReference?.reference ?? 'none'}, focus ${review.focus?.reference ?? 'none'}, first input '${first?.type?.text ?? ''}' -> ${reference ?? 'none'}: ${form ? `a stored Questionnaire, ${formSaid(stored)}${sameSet(formAccounts, tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"}, item '${CONDITION_ITEM}' of ${choices.length} choice(s): ${choices.join(', ')}` : formSaid(stored)}`,
    );
    return good && form
      ? {
          patient: { who: `the new patient (${label})`, token, profile: home.patient },
          review: review as Task & { id: string },
          form,
          tenant,
        }
      : undefined;
  } catch (err) {
    row(step, 'FAILED', message(err));
    return undefined;
  }
}

/**
 * Clinician work as forms (bots/lib/work-forms.ts), on a real Medplum: a new Northwind patient's
 * intake review is claimed by the Northwind clinician and completed with a QuestionnaireResponse as its
 * output `questionnaire-response`. Eligibility records the Condition (identifier
 * `eligibilityKey|Task/<review>`, her as asserter) and issues the selection only for answers whose
 * writer (`meta.author`, stamped by Medplum) is the clinician who completes the review: her own, not a
 * colleague's she hands in, not the patient's. Each case has a patient and a review of its own. Then the
 * clinician policy's OWN_ANSWERS_ONLY (ownAnswers): a clinician's answers name no one but herself, and
 * nobody's submitted answers, nor a colleague's draft, are hers to change.
 */
export async function workForms(
  ctx: AttackContext,
  people: Map<string, Person>,
  queueRef: string | undefined,
): Promise<void> {
  const clinician = people.get('northwind-clinician');
  const colleague = people.get('outsider');
  const southridge = people.get('southridge-clinician');
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body, extended: true });
  const eligibility = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|eligibility`)}`)).body,
  )[0] as Bot | undefined;
  const steps = {
    control:
      "control: the Northwind clinician claims the new patient's intake review, answers its stored form with her own QuestionnaireResponse as the admin app writes it (completed, subject the patient, condition I10, author herself) and completes the review with it as output 'questionnaire-response'",
    believed:
      "control: eligibility believes her answers: the Condition keyed by the review (SYSTEMS.eligibilityKey|Task/<review>) appears, I10, asserter and recorder her, her response its evidence; and a ready select-treatment Task, reasonReference that Condition (versioned), its form stored (Questionnaire/<id> of url select-treatment, written by a Bot, meta.accounts the patient's tenant) with its options",
    southridge:
      "attack: the Southridge clinician writes a QuestionnaireResponse to the review's form about a Northwind patient (subject the patient, author herself)",
    colleague:
      "attack: a Northwind colleague (the clinician outside the queue, clinician policy) writes the answers to the review's form (I10, no author: her policy lets her name only herself); the Northwind clinician claims the review and completes it with the colleague's QuestionnaireResponse as 'questionnaire-response'",
    inHerName:
      "attack: a Northwind colleague (the clinician outside the queue) writes the answers to the review's form in the Northwind clinician's name (I10, `author` the Northwind clinician)",
    patient:
      "attack: the new patient writes a QuestionnaireResponse to the review's form herself, directly on Medplum (her token, subject and author herself, I10); the Northwind clinician claims the review and completes it with it as 'questionnaire-response'",
    // OWN_ANSWERS_ONLY (ownAnswers, below).
    pinned:
      "the journey's review and selection, completed through the clinician helper (src/clinician `answer`, which writes as Medplum's Provider app since 65cd263, no longer a pinned version): output 'QuestionnaireResponse' -> QuestionnaireResponse/<id> (unversioned), that response completed, written by her (meta.author), to the form's url without a version, source her, no subject, no author",
    intake:
      "attack: the Northwind clinician rewrites the journey patient's submitted intake QuestionnaireResponse (her yes/no answers flipped)",
    colleagueDraft:
      "precondition: a Northwind colleague (the clinician outside the queue) writes a draft of answers to a review's form (in-progress, no author) about the form case's patient",
    signColleagues:
      "attack: the Northwind clinician takes over the colleague's draft (author herself, still in-progress)",
    submitColleagues:
      "attack: the Northwind clinician submits the colleague's draft (status completed, nothing else changed)",
    patientsName:
      "attack: the Northwind clinician writes answers to a review's form in the patient's name (author the patient, I10)",
    ownDraft:
      'control: the Northwind clinician writes her own draft (in-progress, author herself) and changes it (condition R03.0 instead of I10)',
    ownSubmit: 'control: the Northwind clinician submits her own draft (status completed)',
    ownSubmitted: 'attack: the Northwind clinician changes her own submitted answers (condition back to I10)',
    ownHandedIn:
      "attack: the Northwind clinician changes the answers she handed in for her review, the Condition's evidence (condition R03.0 instead of I10)",
    // Answers as Medplum's app writes them (95e27f7; found driving the app on a real Medplum).
    appShaped:
      "control: answers as Medplum's app writes them: the Northwind clinician claims a new patient's review, answers its form with the condition as a coding without a system ({code: 'I10', display: 'I10'}: the app's coding field can only '+ Create I10') and completes the review naming the output by a coding (type.coding [{code: 'questionnaire-response'}]: the app's CodeableConcept field cannot write text)",
    appShapedBelieved:
      "control: eligibility believes them as the form's own choice: the Condition keyed by the review is I10 with the catalog's system and display ('Essential (primary) hypertension'), asserter her; a ready select-treatment Task",
    appShapedSelection:
      "control: the selection answered the same way (the amlodipine option's canonical as a coding without a system, the output named by a coding): compose-offer composes the offer (the selection's businessStatus offer-composed, the patient's treatment-offer Task)",
    colleagueWhy:
      "the refused hand-in (a colleague's answers, the attack above) says why on the review: businessStatus 'no-answers' and statusReason.text, written once by the eligibility bot",
    // The stored form (65cd263): read in its tenant only, written by the bots only (formRights, below).
    formRead:
      "control: the Northwind clinician reads the stored review form (Questionnaire/<id>, the Northwind patient's tenant) directly on Medplum",
    formReadSouthridge: 'attack: the Southridge clinician reads the stored Northwind review form (Questionnaire/<id>)',
    formSearchSouthridge: `attack: the Southridge clinician searches the work forms (Questionnaire?url=${WORK_FORMS.assignCondition}): nothing of the Northwind review form`,
    formReadPatient: 'attack: the patient reads the stored form of her own review (Questionnaire/<id>)',
    formPostClinician: `attack: the Northwind clinician creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
    formPutClinician:
      'attack: the Northwind clinician rewrites the stored review form (PUT, one more condition choice)',
    formPostPatient: `attack: the patient creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
    formPutPatient: 'attack: the patient rewrites the stored form of her own review (PUT, one more condition choice)',
    // Medplum's Provider app's way (65cd263): providerApp, below.
    providerClaim:
      "control: the Provider app's claim in two updates: the Northwind clinician sets herself as the owner of a new patient's review (PUT, no If-Match, status still ready), then its status in-progress (PUT, no If-Match)",
    providerAnswers:
      "control: answers as Medplum's Provider app writes them: her QuestionnaireResponse in-progress (questionnaire the stored form's url without version, source her, no subject, no author: 201, written by her, meta.accounts her tenant by the clinician policy's compartment), the review's output replaced by 'QuestionnaireResponse' -> it (200), the review completed while the response is still in-progress (200): eligibility runs on the completed review and writes nothing yet; then the response completed (200)",
    providerBelieved: `control: the completed answers wake eligibility (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.assignCondition}: a run of the eligibility bot naming the response): the Condition keyed by the review (I10, asserter her, her response its evidence) and a ready select-treatment Task`,
    providerSelection: `control: the selection the Provider app's way (the two-step claim, the amlodipine option as its stored form offers it, the response in-progress, the output, the completion, then the response completed): compose-offer runs on the completed selection and writes nothing yet; woken by the completed answers (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.selectTreatment}: a run naming the response), it composes the offer (businessStatus offer-composed, a ready treatment-offer Task instantiating the option)`,
  };
  if (!clinician || !eligibility?.id) {
    for (const step of Object.values(steps)) {
      row(step, 'not reached', !clinician ? 'the Northwind clinician could not sign in' : 'no eligibility Bot');
    }
    return;
  }
  const her = clinician.profile;

  /** The condition `code` as a review's stored form offers it (I10, R03.0, E66.9), as an item of answers. */
  const conditionItem = (form: Questionnaire | undefined, code = 'I10'): QuestionnaireResponse['item'] => {
    const coding = form?.item
      ?.find((i) => i.linkId === CONDITION_ITEM)
      ?.answerOption?.find((o) => o.valueCoding?.code === code)?.valueCoding ?? { system: ICD10CM, code };
    return [{ linkId: CONDITION_ITEM, answer: [{ valueCoding: coding }] }];
  };
  /**
   * Answers to a review's stored form as the admin app writes them: completed, the condition I10 as the
   * form offers it, about the patient; no `author` when undefined.
   */
  const answersTo = (form: Questionnaire, subject: string, author: string | undefined): QuestionnaireResponse => ({
    resourceType: 'QuestionnaireResponse',
    questionnaire: form.url,
    status: 'completed',
    subject: { reference: subject },
    ...(author ? { author: { reference: author } as QuestionnaireResponse['author'] } : {}),
    authored: new Date().toISOString(),
    item: conditionItem(form),
  });

  /**
   * The Northwind clinician reads and claims the review (as Medplum's app does: the Task as she reads it,
   * owner herself, in-progress), `writer` writes `answers`, and she completes the review naming them.
   * What each write answered; `response` when the answers were written, `completed` when she completed.
   */
  const handIn = async (
    review: Task,
    writer: Person,
    answers: QuestionnaireResponse,
    output: (reference: string) => TaskOutput = responseOutput,
  ) => {
    const said: string[] = [];
    const read = await direct(clinician, 'GET', `Task/${review.id}`);
    if (read.status !== 200) {
      return { said: [`her read of Task/${review.id}: ${describe(read)}`], stopped: 'read' as const };
    }
    const claim = await direct(clinician, 'PUT', `Task/${review.id}`, {
      ...(read.body as Task),
      owner: { reference: her },
      status: 'in-progress',
      executionPeriod: { start: new Date().toISOString() },
    });
    said.push(`her claim ${describe(claim)}`);
    if (claim.status !== 200) {
      return { said, stopped: 'claim' as const };
    }
    const written = await direct(writer, 'POST', 'QuestionnaireResponse', answers);
    const response = written.status === 201 ? (written.body as QuestionnaireResponse) : undefined;
    said.push(
      `the answers by ${writer.who}: ${describe(written)}${response ? ` (meta.author ${response.meta?.author?.reference}, author ${response.author?.reference ?? 'none'})` : ''}`,
    );
    if (!response?.id) {
      return { said, stopped: 'answers' as const, written };
    }
    const claimed = claim.body as Task;
    const done = await direct(clinician, 'PUT', `Task/${review.id}`, {
      ...claimed,
      status: 'completed',
      output: [output(`QuestionnaireResponse/${response.id}`)],
      executionPeriod: { ...claimed.executionPeriod, end: new Date().toISOString() },
    });
    said.push(
      `her completion with output ${outputName(output(''))} -> QuestionnaireResponse/${response.id}: ${describe(done)}`,
    );
    return { said, response, stopped: done.status === 200 ? undefined : ('completion' as const), done };
  };

  /**
   * What eligibility did about a review, as the admin reads it: its runs on the review (AuditEvents of
   * the eligibility Bot naming the Task), the patient's Conditions and select-treatment Tasks (those
   * keyed by the review apart). Polled every second until `enough`, or 30 s.
   */
  const aftermath = async (review: Task, patient: string, enough: (seen: Aftermath) => boolean) => {
    const started = Date.now();
    const key = `Task/${review.id}`;
    const keyed = (r: Condition | Task) =>
      r.identifier?.some((i) => i.system === SYSTEMS.eligibilityKey && i.value === key) ?? false;
    for (;;) {
      const [events, conditions, selections] = await Promise.all([
        adminRead(ctx, `fhir/R4/AuditEvent?entity=${key}&_count=20`),
        adminRead(ctx, `fhir/R4/Condition?subject=${patient}&_count=20`),
        adminRead(
          ctx,
          `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|select-treatment`)}&_count=20`,
        ),
      ]);
      const seen: Aftermath = {
        runs: (entriesOf(events.body) as AuditEvent[]).filter(
          (e) => e.source?.observer?.reference === `Bot/${eligibility.id}`,
        ),
        conditions: entriesOf(conditions.body) as Condition[],
        selections: entriesOf(selections.body) as Task[],
        keyedCondition: undefined,
        keyedSelection: undefined,
        seconds: (Date.now() - started) / 1000,
      };
      seen.keyedCondition = seen.conditions.find(keyed);
      seen.keyedSelection = seen.selections.find(keyed);
      if (enough(seen) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
        return seen;
      }
      await pause(1000);
    }
  };
  const runsOf = (seen: Aftermath) =>
    seen.runs.length === 0
      ? `no run of the eligibility bot on it within ${SUBSCRIPTION_WAIT_MS / 1000} s`
      : `the eligibility bot ran on it ${seen.runs.length} time(s) (AuditEvent outcome ${seen.runs.map((r) => r.outcome).join(', ')})`;

  /**
   * An attack's verdict: held when a write of it was refused (400/403/404), or when everything was
   * written and the eligibility bot ran on the completed review (outcome 0: it returned, it did not
   * throw) and wrote nothing (no Condition of the patient, no select-treatment Task of hers); FAILED when
   * anything appeared, or when the bot did not run or failed (nothing proven). Medplum keeps a subscription
   * bot's console, not what it returned, so its reason is not in the AuditEvent: the control differs only
   * in who wrote the answers.
   */
  const judgeAttack = async (step: string, intake: IntakeReview | undefined, writer: Person | undefined) => {
    if (!intake || !writer) {
      row(
        step,
        'not reached',
        !intake ? 'no intake review (see the precondition row)' : 'the writer could not sign in',
      );
      return;
    }
    try {
      // The patient names herself; a colleague no one (the policy lets a clinician name only herself).
      const written = answersTo(
        intake.form,
        intake.patient.profile,
        writer === intake.patient ? intake.patient.profile : undefined,
      );
      const handed = await handIn(intake.review, writer, written);
      if (handed.stopped === 'read' || handed.stopped === 'claim') {
        row(step, 'FAILED', `the attack could not be staged: ${handed.said.join('; ')}`);
        return;
      }
      if (handed.stopped === 'answers' && handed.written && [400, 403, 404].includes(handed.written.status)) {
        row(step, 'held', `refused outright: ${handed.said.join('; ')}`);
        return;
      }
      if (handed.stopped) {
        const refused = handed.done && REJECTED.includes(handed.done.status);
        row(
          step,
          refused ? 'held' : 'FAILED',
          `${refused ? 'refused at her completion' : 'unexpected'}: ${handed.said.join('; ')}`,
        );
        return;
      }
      const seen = await aftermath(intake.review, intake.patient.profile, (s) => s.runs.length > 0);
      // The bot's writes are done when its AuditEvent is written; look once more, a second later.
      if (seen.runs.length > 0) {
        await pause(1000);
      }
      const after = seen.runs.length > 0 ? await aftermath(intake.review, intake.patient.profile, () => true) : seen;
      const wrote = after.conditions.length > 0 || after.selections.length > 0;
      // A run that failed (outcome not 0) wrote nothing for another reason: nothing would be proven.
      const held = after.runs.some((r) => r.outcome === '0') && !wrote;
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected the eligibility bot to run and write nothing; ${handed.said.join('; ')}; then ${runsOf(after)}${seen.runs.length > 0 ? `, seen after ${seen.seconds.toFixed(1)} s` : ''}; a second later the patient has ${after.conditions.length} Condition(s)${after.keyedCondition ? ` (Condition/${after.keyedCondition.id} keyed by the review, asserter ${after.keyedCondition.asserter?.reference})` : ''} and ${after.selections.length} select-treatment Task(s)${after.keyedSelection ? ` (Task/${after.keyedSelection.id}, ${after.keyedSelection.status})` : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /** The patient's QuestionnaireResponses as the admin finds them (ids), to tell that a refused create wrote nothing. */
  const responsesOf = async (patient: string) =>
    entriesOf((await adminRead(ctx, `fhir/R4/QuestionnaireResponse?subject=${patient}&_count=100`)).body).map(
      (r) => r.id,
    );

  /**
   * A create the clinician policy must refuse (OWN_ANSWERS_ONLY): `writer` POSTs `body(intake)`; held when
   * refused (400/403) and the patient's QuestionnaireResponses, as the admin finds them, are those of before.
   */
  const refusedCreate = async (
    step: string,
    writer: Person | undefined,
    intake: IntakeReview | undefined,
    body: (intake: IntakeReview) => QuestionnaireResponse,
    noWriter: string,
  ): Promise<void> => {
    if (!writer || !intake) {
      row(step, 'not reached', !writer ? noWriter : 'no intake review (see the precondition row)');
      return;
    }
    try {
      const before = await responsesOf(intake.patient.profile);
      const written = await direct(writer, 'POST', 'QuestionnaireResponse', body(intake));
      const after = await responsesOf(intake.patient.profile);
      const same = after.length === before.length && after.every((id) => before.includes(id));
      row(
        step,
        REJECTED.includes(written.status) && same ? 'held' : 'FAILED',
        `expected 403/400 and nothing written; got ${describe(written)}; ${intake.patient.profile} has ${after.length} QuestionnaireResponse(s)${same ? ', as before' : ` (${before.length} before)`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * A write to answers already written that the clinician policy must refuse (OWN_ANSWERS_ONLY):
   * `attacker` reads `target` (as Medplum's app would) and PUTs it back with `change` applied; held when
   * refused (400/403) and the admin reads the very version it read before (its `versionId`).
   */
  const frozen = async (
    step: string,
    attacker: Person | undefined,
    target: string | undefined,
    missing: string,
    change: (response: QuestionnaireResponse) => QuestionnaireResponse,
  ): Promise<void> => {
    if (!attacker || !target) {
      row(step, 'not reached', !attacker ? 'the attacker could not sign in' : missing);
      return;
    }
    try {
      const before = (await adminRead(ctx, `fhir/R4/${target}`)).body as QuestionnaireResponse | undefined;
      const read = await direct(attacker, 'GET', target);
      if (read.status !== 200) {
        // Not a refusal of the write: nothing was tried, nothing proven.
        row(step, 'FAILED', `the attack could not be staged: her read of ${target}: ${describe(read)}`);
        return;
      }
      const written = await direct(attacker, 'PUT', target, change(read.body as QuestionnaireResponse));
      const after = (await adminRead(ctx, `fhir/R4/${target}`)).body as QuestionnaireResponse | undefined;
      const same = after?.meta?.versionId !== undefined && after.meta.versionId === before?.meta?.versionId;
      row(
        step,
        REJECTED.includes(written.status) && same ? 'held' : 'FAILED',
        `expected 403/400 and the same version; got ${describe(written)}; ${target} (${after?.status}, author ${after?.author?.reference ?? 'none'}, written by ${after?.meta?.author?.reference}): version ${after?.meta?.versionId}${same ? ' as before' : ` (was ${before?.meta?.versionId})`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * OWN_ANSWERS_ONLY (the clinician policy's QuestionnaireResponse writes, 0caf264): a clinician's
   * answers are hers alone (no author, or herself), she changes only her own draft (`in-progress`, author
   * herself), and once submitted they are frozen; nobody else's is hers to change. `intake`: a new
   * Northwind patient and her review (its form), for the answers written here.
   */
  const ownAnswers = async (intake: IntakeReview | undefined, handed: QuestionnaireResponse | undefined) => {
    const noIntake = 'no intake review (see the precondition rows)';
    // The journey's review and selection, completed through src/clinician (`answer`): as the Provider app
    // writes them since 65cd263 (the output `QuestionnaireResponse`, unversioned; no pinned version).
    const journeyPatient = ctx.progress.patient;
    if (!journeyPatient) {
      row(steps.pinned, 'not reached', 'the journey did not make it');
    } else {
      try {
        const said: string[] = [];
        let good = true;
        for (const kind of ['review-intake', 'select-treatment']) {
          const task = entriesOf(
            (
              await adminRead(
                ctx,
                `fhir/R4/Task?patient=${journeyPatient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|${kind}`)}&status=completed&_count=5`,
              )
            ).body,
          ).find((t) => responseReference(t as Task)) as Task | undefined;
          if (!task) {
            good = false;
            said.push(`no completed ${kind} Task of the journey patient handing in answers`);
            continue;
          }
          const output = task.output?.find((o) => o.valueReference?.reference === responseReference(task));
          const reference = output?.valueReference?.reference ?? '';
          const unversioned = /^QuestionnaireResponse\/[^/]+$/.test(reference);
          const response = unversioned
            ? ((await adminRead(ctx, `fhir/R4/${reference}`)).body as QuestionnaireResponse | undefined)
            : undefined;
          const form = (await readForm(ctx.baseUrl, ctx.adminToken, task)).form;
          const ok =
            output?.type?.text === PROVIDER_APP_OUTPUT &&
            (task.output?.length ?? 0) === 1 &&
            unversioned &&
            response?.status === 'completed' &&
            response.meta?.author?.reference === clinician.profile &&
            form?.url !== undefined &&
            response.questionnaire === form.url &&
            response.source?.reference === clinician.profile &&
            response.subject === undefined &&
            response.author === undefined;
          good &&= ok;
          said.push(
            `${kind} Task/${task.id}: ${task.output?.length ?? 0} output(s), ${output ? outputName(output) : 'none'} -> ${reference || 'nothing'}${unversioned ? '' : ' (NOT unversioned)'}${
              response
                ? `, ${response.status}, written by ${response.meta?.author?.reference ?? '?'}${response.meta?.author?.reference === clinician.profile ? ' (her)' : ' (NOT her)'}, questionnaire ${response.questionnaire}${response.questionnaire === form?.url ? " (the stored form's url)" : ` (NOT the stored form's url ${form?.url})`}, source ${response.source?.reference ?? 'none'}, subject ${response.subject?.reference ?? 'none'}, author ${response.author?.reference ?? 'none'}`
                : ''
            }`,
          );
        }
        row(steps.pinned, good ? 'ok' : 'FAILED', said.join('; '));
      } catch (err) {
        row(steps.pinned, 'FAILED', `the call threw: ${message(err)}`);
      }
    }

    // The patient's submitted intake: the journey patient's (else the new patient's).
    const journeyIntake = ctx.progress.questionnaireResponse || undefined;
    let intakeAnswers = journeyIntake;
    if (!intakeAnswers && intake) {
      const own = entriesOf(
        (await adminRead(ctx, `fhir/R4/QuestionnaireResponse?subject=${intake.patient.profile}&_count=20`)).body,
      ).find((r) => (r as QuestionnaireResponse).meta?.author?.reference === intake.patient.profile);
      intakeAnswers = own ? `QuestionnaireResponse/${own.id}` : undefined;
    }
    const flipped = (items: QuestionnaireResponse['item']): QuestionnaireResponse['item'] =>
      items?.map((i) => ({
        ...i,
        answer: i.answer?.map((a) => (a.valueBoolean === undefined ? a : { ...a, valueBoolean: !a.valueBoolean })),
      }));
    await frozen(
      `${steps.intake}${journeyIntake ? '' : " (the form case patient's instead: the journey did not make it)"}`,
      clinician,
      intakeAnswers,
      'no intake answers of a patient (the journey and the form cases did not make it)',
      (r) => ({ ...r, item: flipped(r.item) }),
    );

    // A colleague's draft: not hers to take over, nor to submit.
    let draft: QuestionnaireResponse | undefined;
    if (!colleague || !intake) {
      row(
        steps.colleagueDraft,
        'not reached',
        !colleague ? 'the clinician outside the queue could not sign in' : noIntake,
      );
    } else {
      try {
        const written = await direct(colleague, 'POST', 'QuestionnaireResponse', {
          ...answersTo(intake.form, intake.patient.profile, undefined),
          status: 'in-progress',
        });
        draft = written.status === 201 ? (written.body as QuestionnaireResponse) : undefined;
        row(
          steps.colleagueDraft,
          draft?.meta?.author?.reference === colleague.profile ? 'ok' : 'FAILED',
          `expected 201, written by her; got ${describe(written)}${draft ? `, ${draft.status}, written by ${draft.meta?.author?.reference}, author ${draft.author?.reference ?? 'none'}` : ''}`,
        );
      } catch (err) {
        row(steps.colleagueDraft, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    const draftRef = draft?.id ? `QuestionnaireResponse/${draft.id}` : undefined;
    const noDraft = "no colleague's draft (see the precondition row)";
    await frozen(steps.signColleagues, clinician, draftRef, noDraft, (r) => ({
      ...r,
      author: { reference: her } as QuestionnaireResponse['author'],
    }));
    await frozen(steps.submitColleagues, clinician, draftRef, noDraft, (r) => ({ ...r, status: 'completed' }));

    // In the patient's name.
    await refusedCreate(
      steps.patientsName,
      clinician,
      intake,
      (i) => answersTo(i.form, i.patient.profile, i.patient.profile),
      'the Northwind clinician could not sign in',
    );

    // Her own: a draft she may change and submit; once submitted, frozen.
    let submitted: QuestionnaireResponse | undefined;
    if (!intake) {
      row(steps.ownDraft, 'not reached', noIntake);
      row(steps.ownSubmit, 'not reached', noIntake);
    } else {
      try {
        const created = await direct(clinician, 'POST', 'QuestionnaireResponse', {
          ...answersTo(intake.form, intake.patient.profile, her),
          status: 'in-progress',
        });
        const createdBody = created.status === 201 ? (created.body as QuestionnaireResponse) : undefined;
        const changed = createdBody?.id
          ? await direct(clinician, 'PUT', `QuestionnaireResponse/${createdBody.id}`, {
              ...createdBody,
              item: conditionItem(intake.form, 'R03.0'),
            })
          : undefined;
        const ownDraft = changed?.status === 200 ? (changed.body as QuestionnaireResponse) : undefined;
        row(
          steps.ownDraft,
          ownDraft ? 'ok' : 'FAILED',
          `expected 201, then 200; got ${describe(created)}${createdBody ? ` (in-progress, written by ${createdBody.meta?.author?.reference})` : ''}${changed ? `; ${describe(changed)}${ownDraft ? `, ${ownDraft.status}, condition ${ownDraft.item?.[0]?.answer?.[0]?.valueCoding?.code}, version ${ownDraft.meta?.versionId}` : ''}` : ''}`,
        );
        if (!ownDraft?.id) {
          row(steps.ownSubmit, 'not reached', 'her draft (the control above) failed');
        } else {
          const done = await direct(clinician, 'PUT', `QuestionnaireResponse/${ownDraft.id}`, {
            ...ownDraft,
            status: 'completed',
          });
          submitted = done.status === 200 ? (done.body as QuestionnaireResponse) : undefined;
          row(
            steps.ownSubmit,
            submitted?.status === 'completed' ? 'ok' : 'FAILED',
            `expected 200, completed; got ${describe(done)}${submitted ? `, ${submitted.status}, version ${submitted.meta?.versionId}` : ''}`,
          );
        }
      } catch (err) {
        row(steps.ownDraft, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    await frozen(
      steps.ownSubmitted,
      clinician,
      submitted?.id ? `QuestionnaireResponse/${submitted.id}` : undefined,
      'her submitted draft (the controls above) failed',
      (r) => ({ ...r, item: conditionItem(intake?.form, 'I10') }),
    );
    await frozen(
      steps.ownHandedIn,
      clinician,
      handed?.id ? `QuestionnaireResponse/${handed.id}` : undefined,
      'her hand-in (the control above) failed',
      (r) => ({ ...r, item: conditionItem(intake?.form, 'R03.0') }),
    );
  };

  /**
   * Answers as Medplum's app writes them (found driving the app on a real Medplum): its coding
   * field writes `{code, display: code}` and no system, and its CodeableConcept field names the output by
   * a coding, never by text. A new patient's review answered so, then her selection the same way.
   */
  const appShaped = async () => {
    const appCoding = (code: string): Coding => ({ code, display: code });
    const appOutput = (reference: string): TaskOutput => ({
      type: { coding: [{ code: RESPONSE_OUTPUT, display: RESPONSE_OUTPUT }] },
      valueReference: { reference },
    });
    const later = [steps.appShapedBelieved, steps.appShapedSelection];
    const intake = await intakeReview(ctx, "answers as Medplum's app writes them", queueRef);
    if (!intake) {
      for (const step of [steps.appShaped, ...later]) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    try {
      const patient = intake.patient.profile;
      const answers: QuestionnaireResponse = {
        ...answersTo(intake.form, patient, her),
        item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding: appCoding('I10') }] }],
      };
      const handed = await handIn(intake.review, clinician, answers, appOutput);
      const response = handed.response;
      row(
        steps.appShaped,
        !handed.stopped && response?.meta?.author?.reference === her ? 'ok' : 'FAILED',
        `expected her claim 200, her answers 201 (meta.author her), her completion 200; got ${handed.said.join('; ')}; her answer ${JSON.stringify(response?.item?.[0]?.answer?.[0]?.valueCoding ?? null)}`,
      );
      if (handed.stopped || !response?.id) {
        for (const step of later) {
          row(step, 'not reached', 'the hand-in above did not complete');
        }
        return;
      }
      // The catalog's own coding of I10, as the review's form offers it.
      const offered = intake.form.item
        ?.find((i) => i.linkId === CONDITION_ITEM)
        ?.answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
      const seen = await aftermath(
        intake.review,
        patient,
        (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
      );
      const condition = seen.keyedCondition;
      const selection = seen.keyedSelection;
      const coding = condition?.code?.coding ?? [];
      const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference) ?? [];
      const good =
        offered?.display !== undefined &&
        offered.display !== 'I10' &&
        coding.length === 1 &&
        coding[0].system === ICD10CM &&
        coding[0].code === 'I10' &&
        coding[0].display === offered.display &&
        condition?.asserter?.reference === her &&
        evidence.includes(`QuestionnaireResponse/${response.id}`) &&
        selection?.status === 'ready';
      row(
        steps.appShapedBelieved,
        good ? 'ok' : 'FAILED',
        `the form offers ${JSON.stringify(offered ?? null)}; after ${seen.seconds.toFixed(1)} s: ${
          condition
            ? `Condition/${condition.id}: code ${JSON.stringify(coding)}, ${condition.verificationStatus?.coding?.[0]?.code}, asserter ${condition.asserter?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
            : `no Condition keyed by Task/${intake.review.id} (${seen.conditions.length} Condition(s) of the patient)`
        }; ${selection ? `Task/${selection.id} select-treatment ${selection.status}` : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`}; ${runsOf(seen)}`,
      );
      if (selection?.status !== 'ready') {
        row(steps.appShapedSelection, 'not reached', 'no ready selection (the row above)');
        return;
      }
      // Her read of the selection's stored form (as Medplum's app loads it).
      const selectionForm = await readForm(ctx.baseUrl, clinician.token, selection);
      const option = (selectionForm.form?.item?.find((i) => i.linkId === OPTION_ITEM)?.answerOption ?? [])
        .map((o) => o.valueCoding?.code ?? '')
        .find((code) => code.includes('amlodipine'));
      if (!option) {
        row(
          steps.appShapedSelection,
          'FAILED',
          `Task/${selection.id}: its form offers no amlodipine option (${formSaid(selectionForm)})`,
        );
        return;
      }
      const chosen = await handIn(
        selection,
        clinician,
        {
          resourceType: 'QuestionnaireResponse',
          questionnaire: WORK_FORMS.selectTreatment,
          status: 'completed',
          subject: { reference: patient },
          author: { reference: her } as QuestionnaireResponse['author'],
          authored: new Date().toISOString(),
          item: [{ linkId: OPTION_ITEM, answer: [{ valueCoding: appCoding(option) }] }],
        },
        appOutput,
      );
      if (chosen.stopped) {
        row(steps.appShapedSelection, 'FAILED', `the hand-in stopped at ${chosen.stopped}: ${chosen.said.join('; ')}`);
        return;
      }
      const started = Date.now();
      let after: Task | undefined;
      let offer: Task | undefined;
      for (;;) {
        const [read, offers] = await Promise.all([
          adminRead(ctx, `fhir/R4/Task/${selection.id}`),
          adminRead(
            ctx,
            `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|treatment-offer`)}&_count=5`,
          ),
        ]);
        after = read.body as Task | undefined;
        offer = entriesOf(offers.body)[0] as Task | undefined;
        if ((offer && after?.businessStatus) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const group = offer?.focus?.reference?.startsWith('RequestGroup/')
        ? ((await adminRead(ctx, `fhir/R4/${offer.focus.reference}`)).body as {
            instantiatesCanonical?: string[];
          })
        : undefined;
      const composed =
        after?.businessStatus?.text === 'offer-composed' &&
        offer?.status === 'ready' &&
        (group?.instantiatesCanonical ?? []).includes(option);
      row(
        steps.appShapedSelection,
        composed ? 'ok' : 'FAILED',
        `${chosen.said.join('; ')}; after ${((Date.now() - started) / 1000).toFixed(1)} s: Task/${selection.id} ${after?.status}, businessStatus ${after?.businessStatus?.text ?? 'none'}${after?.statusReason?.text ? ` (${after.statusReason.text})` : ''}; ${offer ? `the offer Task/${offer.id} ${offer.status}, ${offer.focus?.reference} instantiates ${(group?.instantiatesCanonical ?? []).join(', ') || 'nothing'}` : 'no treatment-offer Task of the patient'}`,
      );
    } catch (err) {
      row(steps.appShaped, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * A hand-in the platform did nothing with says why on the task (bots/lib/queues.ts markUnanswered):
   * `businessStatus` 'no-answers' and the reason in `statusReason.text`, written once (the mark wakes the
   * bot again, which then writes nothing). Read by the admin once the bot has run twice, or after 30 s.
   */
  const saysWhy = async (step: string, intake: IntakeReview | undefined) => {
    if (!intake) {
      row(step, 'not reached', 'no intake review (see the precondition row)');
      return;
    }
    try {
      const key = `Task/${intake.review.id}`;
      const started = Date.now();
      let review: Task | undefined;
      let runs: AuditEvent[] = [];
      for (;;) {
        const [read, events] = await Promise.all([
          adminRead(ctx, `fhir/R4/${key}`),
          adminRead(ctx, `fhir/R4/AuditEvent?entity=${key}&_count=20`),
        ]);
        review = read.body as Task | undefined;
        runs = (entriesOf(events.body) as AuditEvent[]).filter(
          (e) => e.source?.observer?.reference === `Bot/${eligibility.id}`,
        );
        if ((review?.statusReason?.text && runs.length >= 2) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const versions = entriesOf((await adminRead(ctx, `fhir/R4/${key}/_history?_count=50`)).body) as Task[];
      const marks = versions.filter((v) => v.meta?.author?.reference === `Bot/${eligibility.id}`).length;
      const reason = review?.statusReason?.text ?? '';
      const good = review?.businessStatus?.text === 'no-answers' && reason.length > 0 && marks === 1;
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${key} ${review?.status}, businessStatus ${review?.businessStatus?.text ?? 'none'}, statusReason.text ${reason ? `"${reason}"` : 'none'}; ${versions.length} version(s), ${marks} by the eligibility bot; ${runs.length} run(s) of the bot on it (outcome ${runs.map((r) => r.outcome).join(', ') || '-'})`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * Each review carries its form as text too (bc53859, contracts/work-forms.ts formInstructions: Medplum's
   * app shows nothing of a contained resource): a `note` naming the form's url and its `condition` item.
   * The journey's review (completed through src/clinician) and a fresh one (as the bot issued it).
   */
  const formAsText = async (fresh: IntakeReview | undefined) => {
    const step = `control: the review Tasks carry their form as text (Task.note): the form's url ${WORK_FORMS.assignCondition} and its item '${CONDITION_ITEM}' (the journey's review, and a fresh review as issued)`;
    try {
      const reviews: { label: string; task: Task }[] = [];
      const journeyPatient = ctx.progress.patient;
      const journeys = journeyPatient
        ? (entriesOf(
            (
              await adminRead(
                ctx,
                `fhir/R4/Task?patient=${journeyPatient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|review-intake`)}&_count=5`,
              )
            ).body,
          ) as Task[])
        : [];
      // The journey's own review (the one she handed her answers in with), not the queue task the admin
      // issued above for the same patient.
      const journeyReview = journeys.find((t) => responseReference(t)) ?? journeys.find((t) => formReference(t));
      if (journeyReview) {
        reviews.push({ label: "the journey's review", task: journeyReview });
      }
      if (fresh) {
        reviews.push({ label: 'a fresh review', task: fresh.review });
      }
      if (reviews.length === 0) {
        row(step, 'not reached', 'no review (the journey and the precondition above did not make it)');
        return;
      }
      const names = (task: Task) => {
        const notes = (task.note ?? []).map((n) => n.text ?? '');
        const text = notes.find((n) => n.includes(WORK_FORMS.assignCondition)) ?? '';
        return {
          text,
          notes: notes.length,
          url: text.includes(WORK_FORMS.assignCondition),
          item: text.split('\n').some((line) => line.startsWith(`- ${CONDITION_ITEM}`)),
        };
      };
      const seen = reviews.map((r) => ({ ...r, ...names(r.task) }));
      const good = (journeyPatient ? journeyReview !== undefined : true) && seen.every((s) => s.url && s.item);
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${journeyPatient && !journeyReview ? 'no review-intake Task of the journey patient; ' : ''}${seen
          .map(
            (s) =>
              `${s.label} Task/${s.task.id} (${s.task.status}): ${s.notes} note(s)${
                s.text
                  ? `, one naming the form's url${s.item ? ` and item '${CONDITION_ITEM}'` : ` but NOT item '${CONDITION_ITEM}'`}: "${s.text.split('\n').slice(0, 2).join(' / ').slice(0, 300)}"`
                  : `, none naming ${WORK_FORMS.assignCondition}`
              }`,
          )
          .join('; ')}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * The stored review form (65cd263, contracts/work-forms.ts): a Questionnaire of the patient's tenant,
   * read by her tenant's clinicians (the clinician policy's read-only, tenant-scoped Questionnaire), by no
   * clinician of another tenant and by no patient; and a Questionnaire is written by the bots only (a
   * clinician's or a patient's POST or PUT: 403, nothing written).
   */
  const formRights = async (intake: IntakeReview | undefined) => {
    const all = [
      steps.formRead,
      steps.formReadSouthridge,
      steps.formSearchSouthridge,
      steps.formReadPatient,
      steps.formPostClinician,
      steps.formPutClinician,
      steps.formPostPatient,
      steps.formPutPatient,
    ];
    if (!intake) {
      for (const step of all) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    const target = `Questionnaire/${intake.form.id}`;
    const reads: [string, Person | undefined, number[]][] = [
      [steps.formRead, clinician, [200]],
      [steps.formReadSouthridge, southridge, [404]],
      [steps.formReadPatient, intake.patient, [403, 404]],
    ];
    for (const [step, person, expected] of reads) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const answer = await direct(person, 'GET', target);
        const good =
          expected.includes(answer.status) &&
          (answer.status !== 200 || (answer.body as Questionnaire).url === intake.form.url);
        row(
          step,
          good ? (expected.includes(200) ? 'ok' : 'held') : 'FAILED',
          `${target}: expected ${expected.join('/')}, got ${describe(answer)}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    if (!southridge) {
      row(steps.formSearchSouthridge, 'not reached', 'could not sign in');
    } else {
      try {
        const found = await direct(
          southridge,
          'GET',
          `Questionnaire?url=${encodeURIComponent(WORK_FORMS.assignCondition)}&_count=100`,
        );
        const leaked = entriesOf(found.body).some((r) => r.id === intake.form.id);
        row(
          steps.formSearchSouthridge,
          REFUSED.includes(found.status) || (found.status === 200 && !leaked) ? 'held' : 'FAILED',
          `expected 403/404, or a Bundle without ${target}; got ${describe(found)}${leaked ? ` WITH ${target}` : ''}`,
        );
      } catch (err) {
        row(steps.formSearchSouthridge, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    // One more condition choice: what a rewrite of the form would slip in.
    const withChoice = (form: Questionnaire): Questionnaire['item'] =>
      form.item?.map((item) =>
        item.linkId === CONDITION_ITEM
          ? {
              ...item,
              answerOption: [
                ...(item.answerOption ?? []),
                { valueCoding: { system: ICD10CM, code: 'Z99.89', display: 'lane attack' } },
              ],
            }
          : item,
      );
    const creates: [string, Person | undefined][] = [
      [steps.formPostClinician, clinician],
      [steps.formPostPatient, intake.patient],
    ];
    for (const [step, person] of creates) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const version = `lane-attack-${Date.now()}`;
        const written = await direct(person, 'POST', 'Questionnaire', {
          resourceType: 'Questionnaire',
          url: WORK_FORMS.assignCondition,
          version,
          status: 'active',
          title: 'Assign a condition (lane attack)',
          item: withChoice(intake.form),
        } satisfies Questionnaire);
        const found = entriesOf(
          (await adminRead(ctx, `fhir/R4/Questionnaire?version=${encodeURIComponent(version)}`)).body,
        );
        row(
          step,
          written.status === 403 && found.length === 0 ? 'held' : 'FAILED',
          `expected 403 and nothing written; got ${describe(written)}; the admin finds ${found.length} Questionnaire(s) of version ${version}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    const updates: [string, Person | undefined][] = [
      [steps.formPutClinician, clinician],
      [steps.formPutPatient, intake.patient],
    ];
    for (const [step, person] of updates) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const before = (await adminRead(ctx, `fhir/R4/${target}`)).body as Questionnaire | undefined;
        if (!before?.meta?.versionId) {
          row(step, 'FAILED', `the attack could not be staged: the admin could not read ${target}`);
          continue;
        }
        const written = await direct(person, 'PUT', target, { ...before, item: withChoice(before) });
        const after = (await adminRead(ctx, `fhir/R4/${target}`)).body as Questionnaire | undefined;
        const same = after?.meta?.versionId === before.meta.versionId;
        row(
          step,
          written.status === 403 && same ? 'held' : 'FAILED',
          `expected 403 and the same version; got ${describe(written)}; ${target} version ${after?.meta?.versionId}${same ? ' as before' : ` (was ${before.meta.versionId})`}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  };

  /**
   * Medplum's Provider app's way with clinician work (65cd263, contracts/work-forms.ts), on a new patient's
   * review and then its selection: the claim as two updates (herself as owner, status still ready; then
   * in-progress), neither with If-Match; her answers saved in-progress (the form's url without version,
   * `source` her, no subject or author), the task's output replaced by them (`QuestionnaireResponse`),
   * the task completed while they are still in-progress, then they are completed. The bot woken by the
   * completed task finds the answers pending and writes nothing; the Subscription on completed answers
   * (`QuestionnaireResponse?status=completed&questionnaire=<url>`) wakes it again, and it acts: proof that
   * its criteria match on a real Medplum (a run of the bot whose AuditEvent names the response).
   */
  const providerApp = async () => {
    const later = [steps.providerAnswers, steps.providerBelieved, steps.providerSelection];
    const intake = await intakeReview(ctx, "answers as Medplum's Provider app writes them", queueRef);
    if (!intake) {
      for (const step of [steps.providerClaim, ...later]) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    const patient = intake.patient.profile;
    const composeOffer = entriesOf(
      (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|compose-offer`)}`)).body,
    )[0] as Bot | undefined;
    /** The runs of `bot` on `entity` (its AuditEvents naming it), as the admin finds them. */
    const runsOn = async (entity: string, bot: string | undefined) =>
      (entriesOf((await adminRead(ctx, `fhir/R4/AuditEvent?entity=${entity}&_count=20`)).body) as AuditEvent[]).filter(
        (e) => e.source?.observer?.reference === `Bot/${bot}`,
      );
    const runsSaid = (runs: AuditEvent[]) =>
      `${runs.length} run(s)${runs.length ? ` (outcome ${runs.map((r) => r.outcome).join(', ')})` : ''}`;
    /** The two-step claim, as the Provider app saves the assignee and then the status. */
    const claimTwoSteps = async (taskId: string) => {
      const said: string[] = [];
      const read = await direct(clinician, 'GET', `Task/${taskId}`);
      if (read.status !== 200) {
        return { said: [`her read of Task/${taskId}: ${describe(read)}`] };
      }
      const assigned = await direct(clinician, 'PUT', `Task/${taskId}`, {
        ...(read.body as Task),
        owner: { reference: her },
      });
      const first = assigned.status === 200 ? (assigned.body as Task) : undefined;
      said.push(
        `the owner: ${describe(assigned)}${first ? ` (${first.status}, owner ${first.owner?.reference})` : ''}`,
      );
      if (!first) {
        return { said };
      }
      const started = await direct(clinician, 'PUT', `Task/${taskId}`, { ...first, status: 'in-progress' });
      const second = started.status === 200 ? (started.body as Task) : undefined;
      said.push(
        `the status: ${describe(started)}${second ? ` (${second.status}, owner ${second.owner?.reference})` : ''}`,
      );
      const good =
        first.status === 'ready' &&
        first.owner?.reference === her &&
        second?.status === 'in-progress' &&
        second.owner?.reference === her;
      return { said, claimed: good ? second : undefined };
    };
    /**
     * Her answers the Provider app's way on a claimed task; `wrote` says what the bot wrote (undefined:
     * nothing), asked once its run on the completed task is seen, before the answers are completed.
     */
    const answerTheProviderWay = async (
      task: Task,
      form: Questionnaire,
      items: QuestionnaireResponse['item'],
      bot: string | undefined,
      wrote: () => Promise<string | undefined>,
    ) => {
      const said: string[] = [];
      const saved = await direct(clinician, 'POST', 'QuestionnaireResponse', {
        resourceType: 'QuestionnaireResponse',
        questionnaire: form.url,
        status: 'in-progress',
        authored: new Date().toISOString(),
        source: { reference: her } as QuestionnaireResponse['source'],
        item: items,
      } satisfies QuestionnaireResponse);
      const response = saved.status === 201 ? (saved.body as QuestionnaireResponse & { id: string }) : undefined;
      const accounts = (response?.meta?.accounts ?? []).map((a) => a.reference ?? '');
      said.push(
        `her answers: ${describe(saved)}${response ? ` (${response.status}, written by ${response.meta?.author?.reference}, questionnaire ${response.questionnaire}, source ${response.source?.reference}, subject ${response.subject?.reference ?? 'none'}, accounts ${accounts.join(', ') || 'none'}${sameSet(accounts, intake.tenant) ? ' (her tenant)' : ' (NOT her tenant)'})` : ''}`,
      );
      if (!response || response.meta?.author?.reference !== her || !sameSet(accounts, intake.tenant)) {
        return { said };
      }
      const output = await direct(clinician, 'PUT', `Task/${task.id}`, {
        ...task,
        output: [
          {
            type: { text: PROVIDER_APP_OUTPUT },
            valueReference: { reference: `QuestionnaireResponse/${response.id}` },
          },
        ],
      });
      said.push(`the output: ${describe(output)}`);
      if (output.status !== 200) {
        return { said, response };
      }
      const done = await direct(clinician, 'PUT', `Task/${task.id}`, { ...(output.body as Task), status: 'completed' });
      said.push(`the completion: ${describe(done)}`);
      if (done.status !== 200) {
        return { said, response };
      }
      // The bot's run on the completed task: the answers are still in-progress (pending), nothing written.
      const started = Date.now();
      let pendingRuns: AuditEvent[] = [];
      for (;;) {
        pendingRuns = await runsOn(`Task/${task.id}`, bot);
        if (pendingRuns.length > 0 || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      if (pendingRuns.length > 0) {
        await pause(1000);
      }
      const early = await wrote();
      said.push(
        `on the completed task, while the answers are in-progress: ${runsSaid(pendingRuns)} of the bot${pendingRuns.length ? '' : ` within ${SUBSCRIPTION_WAIT_MS / 1000} s`}, ${early ? `it WROTE ${early}` : 'nothing written'}`,
      );
      const completed = await direct(clinician, 'PUT', `QuestionnaireResponse/${response.id}`, {
        ...response,
        status: 'completed',
      });
      said.push(`her answers completed: ${describe(completed)}`);
      const good = pendingRuns.some((r) => r.outcome === '0') && !early && completed.status === 200;
      return { said, response, good };
    };

    // (d) The claim in two updates.
    const claim = await claimTwoSteps(intake.review.id);
    row(
      steps.providerClaim,
      claim.claimed ? 'ok' : 'FAILED',
      `expected 200 (ready, owner her), then 200 (in-progress, owner her); got ${claim.said.join('; ')}`,
    );
    if (!claim.claimed) {
      for (const step of later) {
        row(step, 'not reached', 'the two-step claim above failed');
      }
      return;
    }
    try {
      // (c) Her answers, the review completed before them.
      const reviewKey = `Task/${intake.review.id}`;
      const answered = await answerTheProviderWay(
        claim.claimed,
        intake.form,
        conditionItem(intake.form),
        eligibility.id,
        async () => {
          const seen = await aftermath(intake.review, patient, () => true);
          const what = [
            seen.keyedCondition ? `Condition/${seen.keyedCondition.id}` : '',
            seen.keyedSelection ? `Task/${seen.keyedSelection.id}` : '',
          ].filter(Boolean);
          return what.length ? what.join(', ') : undefined;
        },
      );
      row(steps.providerAnswers, answered.good ? 'ok' : 'FAILED', answered.said.join('; '));
      const response = answered.response;
      if (!answered.good || !response) {
        row(steps.providerBelieved, 'not reached', 'the hand-in above did not go as the Provider app makes it');
        row(steps.providerSelection, 'not reached', 'the hand-in above did not go as the Provider app makes it');
        return;
      }
      const responseRef = `QuestionnaireResponse/${response.id}`;
      const seen = await aftermath(
        intake.review,
        patient,
        (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
      );
      const woken = await runsOn(responseRef, eligibility.id);
      const condition = seen.keyedCondition;
      const selection = seen.keyedSelection;
      const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference ?? '') ?? [];
      const believed =
        woken.some((r) => r.outcome === '0') &&
        condition?.asserter?.reference === her &&
        condition.code?.coding?.some((c) => c.system === ICD10CM && c.code === 'I10') === true &&
        evidence.some((e) => e === responseRef || e.startsWith(`${responseRef}/_history/`)) &&
        selection?.status === 'ready';
      row(
        steps.providerBelieved,
        believed ? 'ok' : 'FAILED',
        `after ${seen.seconds.toFixed(1)} s: ${runsSaid(woken)} of the eligibility bot naming ${responseRef}; ${
          condition
            ? `Condition/${condition.id} (keyed by ${reviewKey}): ${condition.code?.coding?.map((c) => `${c.system}|${c.code}`).join(', ')}, asserter ${condition.asserter?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
            : `no Condition keyed by ${reviewKey} (${seen.conditions.length} Condition(s) of the patient)`
        }; ${selection ? `Task/${selection.id} select-treatment ${selection.status}` : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`}; ${runsOf(seen)} (the review's)`,
      );
      if (!believed || !selection?.id) {
        row(steps.providerSelection, 'not reached', 'no ready selection (the row above)');
        return;
      }
      // The selection the same way: compose-offer.
      const selectionClaim = await claimTwoSteps(selection.id);
      if (!selectionClaim.claimed) {
        row(
          steps.providerSelection,
          'FAILED',
          `the two-step claim of Task/${selection.id}: ${selectionClaim.said.join('; ')}`,
        );
        return;
      }
      const stored = await readForm(ctx.baseUrl, clinician.token, selectionClaim.claimed);
      const chosen = stored.form?.item
        ?.find((i) => i.linkId === OPTION_ITEM)
        ?.answerOption?.map((o) => o.valueCoding)
        .find((c) => c?.code?.includes('amlodipine'));
      if (!stored.form || !chosen?.code) {
        row(
          steps.providerSelection,
          'FAILED',
          `Task/${selection.id}: her read of its form: ${formSaid(stored)}, no amlodipine option`,
        );
        return;
      }
      const offerOf = async () => {
        const [read, offers] = await Promise.all([
          adminRead(ctx, `fhir/R4/Task/${selection.id}`),
          adminRead(
            ctx,
            `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|treatment-offer`)}&_count=5`,
          ),
        ]);
        return { after: read.body as Task | undefined, offer: entriesOf(offers.body)[0] as Task | undefined };
      };
      const selected = await answerTheProviderWay(
        selectionClaim.claimed,
        stored.form,
        [{ linkId: OPTION_ITEM, answer: [{ valueCoding: chosen }] }],
        composeOffer?.id,
        async () => {
          const { after, offer } = await offerOf();
          const what = [
            offer ? `Task/${offer.id} (treatment-offer)` : '',
            after?.businessStatus?.text ? `businessStatus ${after.businessStatus.text}` : '',
          ].filter(Boolean);
          return what.length ? what.join(', ') : undefined;
        },
      );
      if (!selected.good || !selected.response) {
        row(steps.providerSelection, 'FAILED', `the hand-in: ${selected.said.join('; ')}`);
        return;
      }
      const selectedRef = `QuestionnaireResponse/${selected.response.id}`;
      const started = Date.now();
      let now: { after: Task | undefined; offer: Task | undefined };
      for (;;) {
        now = await offerOf();
        if ((now.offer && now.after?.businessStatus) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const { after, offer } = now;
      const group = offer?.focus?.reference?.startsWith('RequestGroup/')
        ? ((await adminRead(ctx, `fhir/R4/${offer.focus.reference}`)).body as { instantiatesCanonical?: string[] })
        : undefined;
      const wokenBy = await runsOn(selectedRef, composeOffer?.id);
      const composed =
        wokenBy.some((r) => r.outcome === '0') &&
        after?.businessStatus?.text === 'offer-composed' &&
        offer?.status === 'ready' &&
        (group?.instantiatesCanonical ?? []).includes(chosen.code);
      row(
        steps.providerSelection,
        composed ? 'ok' : 'FAILED',
        `${selectionClaim.said.join('; ')}; ${selected.said.join('; ')}; after ${((Date.now() - started) / 1000).toFixed(1)} s: ${runsSaid(wokenBy)} of the compose-offer bot naming ${selectedRef}; Task/${selection.id} ${after?.status}, businessStatus ${after?.businessStatus?.text ?? 'none'}${after?.statusReason?.text ? ` (${after.statusReason.text})` : ''}; ${offer ? `the offer Task/${offer.id} ${offer.status}, ${offer.focus?.reference} instantiates ${(group?.instantiatesCanonical ?? []).join(', ') || 'nothing'}` : 'no treatment-offer Task of the patient'}`,
      );
    } catch (err) {
      row(steps.providerAnswers, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  // The control: her own answers.
  const mine = await intakeReview(ctx, 'her own answers', queueRef);
  await formAsText(mine);
  await formRights(mine);
  /** The answers she handed in for her review (the Condition's evidence), when the control got that far. */
  let handedIn: QuestionnaireResponse | undefined;
  if (!mine) {
    row(steps.control, 'not reached', 'no intake review (see the precondition row)');
    row(steps.believed, 'not reached', 'no intake review (see the precondition row)');
  } else {
    try {
      const handed = await handIn(mine.review, clinician, answersTo(mine.form, mine.patient.profile, her));
      const response = handed.response;
      const mineByHer = response?.meta?.author?.reference === her;
      handedIn = !handed.stopped ? response : undefined;
      row(
        steps.control,
        !handed.stopped && mineByHer ? 'ok' : 'FAILED',
        `expected her claim 200, her answers 201 (meta.author her), her completion 200; got ${handed.said.join('; ')}`,
      );
      if (handed.stopped || !response?.id) {
        row(steps.believed, 'not reached', 'the hand-in above did not complete');
      } else {
        const seen = await aftermath(
          mine.review,
          mine.patient.profile,
          (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
        );
        const condition = seen.keyedCondition;
        const selection = seen.keyedSelection;
        const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference) ?? [];
        const conditionGood =
          condition !== undefined &&
          condition.asserter?.reference === her &&
          condition.recorder?.reference === her &&
          condition.code?.coding?.some((c) => c.system === ICD10CM && c.code === 'I10') === true &&
          condition.subject?.reference === mine.patient.profile &&
          evidence.includes(`QuestionnaireResponse/${response.id}`);
        const storedSelection = await readForm(ctx.baseUrl, ctx.adminToken, selection);
        const selectionForm = storedSelection.form;
        const options = (selectionForm?.item?.find((i) => i.linkId === OPTION_ITEM)?.answerOption ?? []).length;
        const formAccounts = (selectionForm?.meta?.accounts ?? []).map((a) => a.reference ?? '');
        const selectionGood =
          selection?.status === 'ready' &&
          selectionForm?.url === WORK_FORMS.selectTreatment &&
          selectionForm.meta?.author?.reference?.startsWith('Bot/') === true &&
          sameSet(formAccounts, mine.tenant) &&
          selection.reasonReference?.reference?.startsWith(`Condition/${condition?.id}/_history/`) === true &&
          options > 0;
        row(
          steps.believed,
          conditionGood && selectionGood ? 'ok' : 'FAILED',
          `after ${seen.seconds.toFixed(1)} s: ${
            condition
              ? `Condition/${condition.id} (written by ${condition.meta?.author?.reference}): ${condition.code?.coding?.map((c) => c.code).join(', ')}, ${condition.verificationStatus?.coding?.[0]?.code}, asserter ${condition.asserter?.reference}, recorder ${condition.recorder?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
              : `no Condition keyed by Task/${mine.review.id} (${seen.conditions.length} Condition(s) of the patient)`
          }; ${
            selection
              ? `Task/${selection.id} select-treatment ${selection.status}, owner ${selection.owner?.reference}, reasonReference ${selection.reasonReference?.reference ?? 'none'}, its stored form ${selectionForm ? `${formSaid(storedSelection)}${sameSet(formAccounts, mine.tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"} with ${options} option(s)` : formSaid(storedSelection)}`
              : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`
          }; ${runsOf(seen)}`,
        );
      }
    } catch (err) {
      row(steps.control, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  await appShaped();
  await providerApp();

  // A colleague's answers, written in her name: Medplum stamps who wrote them (meta.author).
  const colleagues = await intakeReview(ctx, "a colleague's answers", queueRef);
  if (!southridge || !colleagues) {
    row(
      steps.southridge,
      'not reached',
      !southridge ? 'could not sign in' : 'no intake review (see the precondition row)',
    );
  } else {
    try {
      const written = await direct(
        southridge,
        'POST',
        'QuestionnaireResponse',
        answersTo(colleagues.form, colleagues.patient.profile, southridge.profile),
      );
      row(
        steps.southridge,
        [400, 403, 404].includes(written.status) ? 'held' : 'FAILED',
        `expected 400/403/404, got ${describe(written)}`,
      );
    } catch (err) {
      row(steps.southridge, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  // In her name: the policy refuses it outright (OWN_ANSWERS_ONLY: no author, or the writer herself).
  await refusedCreate(
    steps.inHerName,
    colleague,
    colleagues,
    (intake) => answersTo(intake.form, intake.patient.profile, her),
    'the clinician outside the queue could not sign in',
  );
  await judgeAttack(steps.colleague, colleagues, colleague);
  await saysWhy(steps.colleagueWhy, colleagues);

  // The patient's own answers to the clinician's form.
  const patients = await intakeReview(ctx, "the patient's own answers", queueRef);
  await judgeAttack(steps.patient, patients, patients?.patient);

  await ownAnswers(mine ?? colleagues ?? patients, handedIn);
}
