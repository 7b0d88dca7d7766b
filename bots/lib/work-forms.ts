import { randomUUID } from 'node:crypto';
import type { MedplumClient } from '@medplum/core';
import type { BundleEntry, Questionnaire, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { formReference, RESPONSE_OUTPUT, responseReference } from '../../contracts/work-forms';
import { absent } from './absent';
import { answerProblems } from './answers';

/** Clinician work as a questionnaire: its conventions are contracts/work-forms.ts; here, what a bot believes. */

/**
 * A work form stored for one task (contracts/work-forms.ts): the transaction entry that creates it in the
 * patient's tenant (its account: a Questionnaire names no patient, so Medplum keeps the account its
 * writer sends, packages/server/src/fhir/repo.ts getAccounts), and the reference the task points at it by
 * (resolved by the transaction). Its version names this one form.
 */
export function storedForm(form: Questionnaire, tenant: string | undefined): { entry: BundleEntry; reference: string } {
  const reference = `urn:uuid:${randomUUID()}`;
  const resource: Questionnaire = {
    ...form,
    ...(tenant ? { meta: { accounts: [{ reference: tenant }] } } : {}),
    version: randomUUID(),
  };
  return { entry: { fullUrl: reference, resource, request: { method: 'POST', url: 'Questionnaire' } }, reference };
}

/**
 * The form the platform stored for a task, as the task a bot issued points at it: believed only when a
 * Bot wrote it (Medplum stamps `meta.author`; clinicians and patients cannot write Questionnaires of a
 * tenant) and it is a work form of `kind` (its url).
 */
/** The stored form a task points at, read (undefined when it points at none); what it is worth is issuedForm's to say. */
export function formOfTask(medplum: MedplumClient, task: Task): Promise<Questionnaire | undefined> {
  const [type, id] = (formReference(task) ?? '').split('/');
  return type === 'Questionnaire' && id
    ? (medplum.readResource('Questionnaire', id).catch(absent) as Promise<Questionnaire | undefined>)
    : Promise.resolve(undefined);
}

export async function issuedForm(
  medplum: MedplumClient,
  issued: Task,
  kind: string,
): Promise<Questionnaire | undefined> {
  const form = await formOfTask(medplum, issued);
  return form?.meta?.author?.reference?.startsWith('Bot/') && form.url === kind ? form : undefined;
}

/**
 * The completed work that hands in this response (a Subscription on completed work-form responses wakes
 * the bot with the response: the Provider app completes the task before the response). Found among the
 * work of `kinds` completed by the requester, who must be the response's writer (Medplum's `meta.author`),
 * by its output. Believed no further than that: the bot then checks the task as if woken by it.
 */
export async function taskHandingIn(
  medplum: MedplumClient,
  responseId: string,
  kinds: readonly string[],
  /** Who Medplum says woke the bot (a subscription's requester: the writer of the completing write). */
  requester: string,
): Promise<Task | undefined> {
  if (!requester.startsWith('Practitioner/')) {
    return undefined;
  }
  // Her completed work is asked beside the response (fewer round trips), and believed only if she wrote it.
  const [response, tasks] = await Promise.all([
    medplum.readResource('QuestionnaireResponse', responseId).catch(absent) as Promise<
      QuestionnaireResponse | undefined
    >,
    medplum.searchResources(
      'Task',
      {
        code: kinds.map((kind) => `${SYSTEMS.taskKind}|${kind}`).join(','),
        owner: requester,
        status: 'completed',
        _sort: '-_lastUpdated',
        _count: '50',
      },
      { cache: 'no-cache' },
    ),
  ]);
  if (response?.status !== 'completed' || response.meta?.author?.reference !== requester) {
    return undefined;
  }
  return tasks.find(
    (task) => responseReference(task)?.split('/_history/')[0] === `QuestionnaireResponse/${responseId}`,
  );
}

/**
 * Her answers to the form of a completed task, believed only when: the output names a
 * QuestionnaireResponse (as it is now, or the version it pins), written by `clinician` herself (that
 * version's `meta.author`, stamped by Medplum, never the client), completed, about the task's patient (or
 * about nobody, as the Provider app writes it: the task's output is what ties it to the patient), to this
 * form (its `url`, and its `version` when the response names one), and fitting it (bots/lib/answers.ts).
 * Anything else is a reason, never answers. A response still `in-progress` is `pending`: the Provider
 * app completes the task first and the response after, which wakes the bot again.
 */
export async function herAnswers(
  medplum: MedplumClient,
  task: Task,
  form: Questionnaire,
  clinician: string,
): Promise<
  { ok: true; response: QuestionnaireResponse & { id: string } } | { ok: false; reason: string; pending?: true }
> {
  const reading = handedIn(medplum, task);
  if (!reading) {
    return { ok: false, reason: `the task hands in no ${RESPONSE_OUTPUT}` };
  }
  const response = await reading;
  if (!response || response.meta?.author?.reference !== clinician) {
    return { ok: false, reason: 'the answers are not the completing clinician’s own' };
  }
  const [url, version] = (response.questionnaire ?? '').split('|');
  if (
    (response.subject !== undefined && response.subject.reference !== task.for?.reference) ||
    url !== form.url ||
    (version !== undefined && version !== form.version)
  ) {
    return { ok: false, reason: 'the answers are not a response to this task’s form about its patient' };
  }
  if (response.status === 'in-progress') {
    return { ok: false, pending: true, reason: 'the answers are not completed yet' };
  }
  if (response.status !== 'completed') {
    return { ok: false, reason: 'the answers are not completed' };
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
