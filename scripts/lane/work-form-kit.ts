// What every form case shares: her hand-in of answers, what eligibility did, the verdicts of refused writes.
import type {
  AuditEvent,
  Bot,
  Condition,
  Questionnaire,
  QuestionnaireResponse,
  Task,
  TaskOutput,
} from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { CONDITION_ITEM, responseOutput } from '../../contracts/work-forms';
import {
  type Aftermath,
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  ICD10CM,
  medplumCall,
  message,
  outputName,
  type Person,
  pause,
  REJECTED,
  row,
  SUBSCRIPTION_WAIT_MS,
} from './common';
import type { IntakeReview } from './intake-review';

/**
 * The form cases' common moves, with the Northwind clinician signed in and the eligibility Bot found:
 * calls in extended mode, answers to a review's form, her hand-in, eligibility's aftermath, and the
 * verdicts of an attack, a refused create and a refused write to answers already written.
 */
export function formKit(
  ctx: AttackContext,
  people: Map<string, Person>,
  clinician: Person,
  eligibility: Bot,
  queueRef: string | undefined,
) {
  const colleague = people.get('outsider');
  const southridge = people.get('southridge-clinician');
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body, extended: true });
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
   * A write to answers already written that the clinician policy must refuse (OWN_ANSWERS_ONLY) or keep
   * as they are (submitted answers: submittedAnswersPolicy's readonly fields): `attacker` reads `target`
   * (as Medplum's app would) and PUTs it back with `change` applied; held when refused (400/403), or
   * answered 200 with the stored version itself, and the admin reads the very version it read before.
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
      const keptAsItWas =
        written.status === 200 &&
        (written.body as QuestionnaireResponse | undefined)?.meta?.versionId === before?.meta?.versionId;
      row(
        step,
        (REJECTED.includes(written.status) || keptAsItWas) && same ? 'held' : 'FAILED',
        `expected 403/400 (or 200 changing nothing) and the same version; got ${describe(written)}; ${target} (${after?.status}, author ${after?.author?.reference ?? 'none'}, written by ${after?.meta?.author?.reference}): version ${after?.meta?.versionId}${same ? ' as before' : ` (was ${before?.meta?.versionId})`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  return {
    clinician,
    colleague,
    southridge,
    her,
    direct,
    eligibility,
    queueRef,
    conditionItem,
    answersTo,
    handIn,
    aftermath,
    runsOf,
    judgeAttack,
    responsesOf,
    refusedCreate,
    frozen,
  };
}

export type FormKit = ReturnType<typeof formKit>;
