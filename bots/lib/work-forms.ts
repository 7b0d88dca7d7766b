import type { MedplumClient } from '@medplum/core';
import type { Questionnaire, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { RESPONSE_OUTPUT, responseReference } from '../../contracts/work-forms';
import { absent } from './absent';
import { answerProblems } from './answers';

/** Clinician work as a questionnaire: its conventions are contracts/work-forms.ts; here, what a bot believes. */

/**
 * Her answers to the form of a completed task, believed only when: the output names a
 * QuestionnaireResponse (as it is now, or the version it pins), written by `clinician` herself (that
 * version's `meta.author`, stamped by Medplum, never the client), completed, about the task's patient, to
 * this form (its `url`), and fitting it (bots/lib/answers.ts). Anything else is a reason, never answers.
 */
export async function herAnswers(
  medplum: MedplumClient,
  task: Task,
  form: Questionnaire,
  clinician: string,
): Promise<{ ok: true; response: QuestionnaireResponse & { id: string } } | { ok: false; reason: string }> {
  const reading = handedIn(medplum, task);
  if (!reading) {
    return { ok: false, reason: `the task hands in no ${RESPONSE_OUTPUT}` };
  }
  const response = await reading;
  if (!response || response.meta?.author?.reference !== clinician) {
    return { ok: false, reason: 'the answers are not the completing clinician’s own' };
  }
  if (
    response.status !== 'completed' ||
    response.subject?.reference !== task.for?.reference ||
    (response.questionnaire ?? '').split('|')[0] !== form.url
  ) {
    return { ok: false, reason: 'the answers are not a completed response to this task’s form about its patient' };
  }
  const problems = answerProblems(form, response.item ?? []);
  if (problems.length > 0) {
    return {
      ok: false,
      reason: `the answers do not fit the form: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
    };
  }
  return { ok: true, response };
}

/**
 * The QuestionnaireResponse a completed task hands in (the version it pins, or as it is now), read; or
 * undefined when its output names none. What it is worth is herAnswers' to say.
 */
export function handedIn(
  medplum: MedplumClient,
  task: Task,
): Promise<(QuestionnaireResponse & { id: string }) | undefined> | undefined {
  const [type, id, history, versionId] = (responseReference(task) ?? '').split('/');
  if (type !== 'QuestionnaireResponse' || !id || (history !== undefined && (history !== '_history' || !versionId))) {
    return undefined;
  }
  return (
    versionId
      ? medplum.readVersion('QuestionnaireResponse', id, versionId)
      : medplum.readResource('QuestionnaireResponse', id)
  ).catch(absent) as Promise<(QuestionnaireResponse & { id: string }) | undefined>;
}
