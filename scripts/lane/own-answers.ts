// OWN_ANSWERS_ONLY: a clinician's answers name no one but herself, and nobody else's, once written, are hers to change.
import type { QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { PROVIDER_APP_OUTPUT, responseReference } from '../../contracts/work-forms';
import { type AttackContext, adminRead, describe, entriesOf, message, outputName, row } from './common';
import { type IntakeReview, readForm } from './intake-review';
import type { FormKit } from './work-form-kit';
import { steps } from './work-form-steps';

/**
 * OWN_ANSWERS_ONLY (the clinician policy's QuestionnaireResponse writes, 0caf264): a clinician's
 * answers are hers alone (no author, or herself), she changes only her own draft (`in-progress`, author
 * herself), and once submitted they are frozen; nobody else's is hers to change. `intake`: a new
 * Northwind patient and her review (its form), for the answers written here.
 */
export async function ownAnswers(
  ctx: AttackContext,
  kit: FormKit,
  intake: IntakeReview | undefined,
  handed: QuestionnaireResponse | undefined,
): Promise<void> {
  const { clinician, colleague, her, direct, conditionItem, answersTo, refusedCreate, frozen } = kit;
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
}
