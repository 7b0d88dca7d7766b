// Answers as Medplum's app writes them: a coding without a system, the output named by a coding.
import type { Coding, QuestionnaireResponse, Task, TaskOutput } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { CONDITION_ITEM, OPTION_ITEM, RESPONSE_OUTPUT, WORK_FORMS } from '../../contracts/work-forms';
import { type AttackContext, adminRead, entriesOf, ICD10CM, message, pause, row, SUBSCRIPTION_WAIT_MS } from './common';
import { formSaid, intakeReview, readForm } from './intake-review';
import type { FormKit } from './work-form-kit';
import { steps } from './work-form-steps';

/**
 * Answers as Medplum's app writes them (found driving the app on a real Medplum): its coding
 * field writes `{code, display: code}` and no system, and its CodeableConcept field names the output by
 * a coding, never by text. A new patient's review answered so, then her selection the same way.
 */
export async function appShaped(ctx: AttackContext, kit: FormKit): Promise<void> {
  const { clinician, her, queueRef, answersTo, handIn, aftermath, runsOf } = kit;
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
}
