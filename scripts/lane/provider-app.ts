// Medplum's Provider app's way: the claim in two updates, answers saved in-progress, completed after the task.
import type { AuditEvent, Bot, Questionnaire, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { OPTION_ITEM, PROVIDER_APP_OUTPUT } from '../../contracts/work-forms';
import {
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  ICD10CM,
  message,
  pause,
  row,
  SUBSCRIPTION_WAIT_MS,
  sameSet,
} from './common';
import { formSaid, intakeReview, readForm } from './intake-review';
import type { FormKit } from './work-form-kit';
import { steps } from './work-form-steps';

/**
 * Medplum's Provider app's way with clinician work (65cd263, contracts/work-forms.ts), on a new patient's
 * review and then its selection, each waiting unowned in the Northwind intake queue: the claim as two
 * updates (herself as owner, status still ready; then
 * in-progress), neither with If-Match; her answers saved in-progress (the form's url without version,
 * `source` her, no subject or author), the task's output replaced by them (`QuestionnaireResponse`),
 * the task completed while they are still in-progress, then they are completed. The bot woken by the
 * completed task finds the answers pending and writes nothing; the Subscription on completed answers
 * (`QuestionnaireResponse?status=completed&questionnaire=<url>`) wakes it again, and it acts: proof that
 * its criteria match on a real Medplum (a run of the bot whose AuditEvent names the response).
 */
export async function providerApp(ctx: AttackContext, kit: FormKit): Promise<void> {
  const { clinician, her, direct, eligibility, queueRef, conditionItem, aftermath, runsOf } = kit;
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
  /** The two-step claim of unowned queue work, as the Provider app saves the assignee and then the status. */
  const claimTwoSteps = async (taskId: string) => {
    const said: string[] = [];
    const read = await direct(clinician, 'GET', `Task/${taskId}`);
    if (read.status !== 200) {
      return { said: [`her read of Task/${taskId}: ${describe(read)}`] };
    }
    const before = read.body as Task;
    const waiting = before.status === 'ready' && !before.owner && Boolean(queueRef) && queueOfTask(before) === queueRef;
    said.push(
      `before: ${before.status}, queue ${queueOfTask(before) ?? 'none'}${queueOfTask(before) === queueRef ? ' (the Northwind intake queue)' : ` (NOT the Northwind intake queue ${queueRef})`}, owner ${before.owner?.reference ?? 'none'}`,
    );
    const assigned = await direct(clinician, 'PUT', `Task/${taskId}`, {
      ...(read.body as Task),
      owner: { reference: her },
    });
    const first = assigned.status === 200 ? (assigned.body as Task) : undefined;
    said.push(`the owner: ${describe(assigned)}${first ? ` (${first.status}, owner ${first.owner?.reference})` : ''}`);
    if (!first) {
      return { said };
    }
    const started = await direct(clinician, 'PUT', `Task/${taskId}`, { ...first, status: 'in-progress' });
    const second = started.status === 200 ? (started.body as Task) : undefined;
    said.push(
      `the status: ${describe(started)}${second ? ` (${second.status}, owner ${second.owner?.reference})` : ''}`,
    );
    const good =
      waiting &&
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
    `expected ready and unowned in the Northwind intake queue, then 200 (ready, owner her), then 200 (in-progress, owner her); got ${claim.said.join('; ')}`,
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
}
