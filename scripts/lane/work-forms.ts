import type { AuditEvent, Bot, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { OPTION_ITEM, WORK_FORMS } from '../../contracts/work-forms';
import { appShaped } from './app-shaped';
import {
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  ICD10CM,
  message,
  type Person,
  pause,
  row,
  SUBSCRIPTION_WAIT_MS,
  sameSet,
} from './common';
import { formAsText, formRights } from './form-rights';
import { formSaid, type IntakeReview, intakeReview, readForm } from './intake-review';
import { ownAnswers } from './own-answers';
import { providerApp } from './provider-app';
import { type FormKit, formKit } from './work-form-kit';
import { steps } from './work-form-steps';

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
  const eligibility = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|eligibility`)}`)).body,
  )[0] as Bot | undefined;
  if (!clinician || !eligibility?.id) {
    for (const step of Object.values(steps)) {
      row(step, 'not reached', !clinician ? 'the Northwind clinician could not sign in' : 'no eligibility Bot');
    }
    return;
  }
  const kit = formKit(ctx, people, clinician, eligibility, queueRef);
  const { her, direct, aftermath, runsOf, handIn, answersTo, refusedCreate, judgeAttack } = kit;

  // The control: her own answers.
  const mine = await intakeReview(ctx, 'her own answers', queueRef);
  await formAsText(ctx, mine);
  await formRights(ctx, kit, mine);
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
          Boolean(queueRef) &&
          queueOfTask(selection) === queueRef &&
          !selection.owner &&
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
              ? `Task/${selection.id} select-treatment ${selection.status}, queue ${queueOfTask(selection) ?? 'none'}${queueOfTask(selection) === queueRef ? ' (the Northwind intake queue)' : ` (NOT the Northwind intake queue ${queueRef})`}, owner ${selection.owner?.reference ?? 'none'}, reasonReference ${selection.reasonReference?.reference ?? 'none'}, its stored form ${selectionForm ? `${formSaid(storedSelection)}${sameSet(formAccounts, mine.tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"} with ${options} option(s)` : formSaid(storedSelection)}`
              : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`
          }; ${runsOf(seen)}`,
        );
      }
    } catch (err) {
      row(steps.control, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  await appShaped(ctx, kit);
  await providerApp(ctx, kit);

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
  await saysWhy(ctx, kit, steps.colleagueWhy, colleagues);

  // The patient's own answers to the clinician's form.
  const patients = await intakeReview(ctx, "the patient's own answers", queueRef);
  await judgeAttack(steps.patient, patients, patients?.patient);

  await ownAnswers(ctx, kit, mine ?? colleagues ?? patients, handedIn);
}

/**
 * A hand-in the platform did nothing with says why on the task (bots/lib/queues.ts markUnanswered):
 * `businessStatus` 'no-answers' and the reason in `statusReason.text`, written once (the mark wakes the
 * bot again, which then writes nothing). Read by the admin once the bot has run twice, or after 30 s.
 */
async function saysWhy(
  ctx: AttackContext,
  kit: FormKit,
  step: string,
  intake: IntakeReview | undefined,
): Promise<void> {
  const { eligibility } = kit;
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
}
