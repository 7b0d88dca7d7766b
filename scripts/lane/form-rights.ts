// The review's form: carried as text in its note, read in its tenant only, written by the bots only.
import type { Questionnaire, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { CONDITION_ITEM, formReference, responseReference, WORK_FORMS } from '../../contracts/work-forms';
import {
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  ICD10CM,
  message,
  type Person,
  REFUSED,
  row,
} from './common';
import type { IntakeReview } from './intake-review';
import type { FormKit } from './work-form-kit';
import { steps } from './work-form-steps';

/**
 * Each review carries its form as text too (bc53859, contracts/work-forms.ts formInstructions: Medplum's
 * app shows nothing of a contained resource): a `note` naming the form's url and its `condition` item.
 * The journey's review (completed through src/clinician) and a fresh one (as the bot issued it).
 */
export async function formAsText(ctx: AttackContext, fresh: IntakeReview | undefined): Promise<void> {
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
}

/**
 * The stored review form (65cd263, contracts/work-forms.ts): a Questionnaire of the patient's tenant,
 * read by her tenant's clinicians (the clinician policy's read-only, tenant-scoped Questionnaire), by no
 * clinician of another tenant and by no patient; and a Questionnaire is written by the bots only (a
 * clinician's or a patient's POST or PUT: 403, nothing written).
 */
export async function formRights(ctx: AttackContext, kit: FormKit, intake: IntakeReview | undefined): Promise<void> {
  const { clinician, southridge, direct } = kit;
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
}
