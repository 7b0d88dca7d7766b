import type { MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  CodeableConcept,
  Coding,
  EpisodeOfCare,
  ObservationDefinition,
  Patient,
  PlanDefinition,
  Questionnaire,
  Reference,
  Task,
} from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod, SYSTEMS, TASK_KINDS, type TaskKind } from '../../contracts/systems';
import type { PatientTask } from '../../contracts/tasks';
import { isPublishedTo } from './agreements';
import { allowedUnits, definitionCode } from './measurements';
import { lostRace } from './races';
import { searchAll } from './search';

/**
 * One journey's conventions (JOURNEY section 0), shared by every bot that starts or advances one:
 * the EpisodeOfCare as the join key (a tag on every resource of the journey), its idempotency key,
 * and how a patient task is issued and shown.
 */

/** `Patient/<id>;<plan url>`: one episode per patient and plan, whatever version (no `|` or `,`: FHIR search splits on them). */
export const episodeKey = (patientId: string, planUrl: string): string => `Patient/${patientId};${planUrl}`;

export const episodeTag = (episodeId: string): Coding => ({
  system: SYSTEMS.episode,
  code: `EpisodeOfCare/${episodeId}`,
});

/** The plan an episode instantiates, pinned when it was claimed (`url|version`). */
export const episodePlan = (episode: EpisodeOfCare): string | undefined =>
  episode.extension?.find((e) => e.url === EXTENSIONS.episodePlan)?.valueCanonical;

export const PATIENT_TASK_TAG: Coding = { system: SYSTEMS.taskAudience, code: 'patient' };

/**
 * The patient's episode under a key: hers alone (its patient, whom the key also names), so an episode of
 * anyone else under the same identifier (another tenant's) is never resumed, nor blocks her claim.
 */
export const episodeKeyQuery = (patientId: string, key: string): Record<string, string> => ({
  identifier: `${SYSTEMS.episodeKey}|${key}`,
  patient: `Patient/${patientId}`,
});

export async function episodeByKey(
  medplum: MedplumClient,
  patientId: string,
  key: string,
): Promise<EpisodeOfCare | undefined> {
  const found = await medplum.searchResources('EpisodeOfCare', episodeKeyQuery(patientId, key), {
    cache: 'no-cache',
  });
  return found.find((episode) => episode.patient?.reference === `Patient/${patientId}`);
}

/** The tasks of an episode, oldest first (the order they were issued in). */
export async function episodeTasks(medplum: MedplumClient, episodeId: string): Promise<Task[]> {
  const tag = episodeTag(episodeId);
  const tasks = await searchAll(medplum, 'Task', { _tag: `${tag.system}|${tag.code}` });
  return tasks.sort(
    (a, b) => (a.authoredOn ?? '').localeCompare(b.authoredOn ?? '') || (a.id ?? '').localeCompare(b.id ?? ''),
  );
}

/**
 * The patient's own tasks of her episode, as she is shown them: issued for her and tagged as hers to do.
 * The episode tag alone is data anyone with a Task write could have set; clinician tasks of the episode
 * (a review) are not hers to do.
 */
export async function patientEpisodeTasks(
  medplum: MedplumClient,
  episodeId: string,
  patientId: string,
): Promise<Task[]> {
  return (await episodeTasks(medplum, episodeId)).filter(
    (task) =>
      task.for?.reference === `Patient/${patientId}` &&
      (task.meta?.tag ?? []).some((t) => t.system === PATIENT_TASK_TAG.system && t.code === PATIENT_TASK_TAG.code),
  );
}

/**
 * A catalog definition by its pinned `url|version`, published to this tenant (or the platform): what a
 * patient of the tenant may read, whatever more the bot itself can.
 */
export async function publishedDefinition<T extends PlanDefinition | Questionnaire | ActivityDefinition>(
  medplum: MedplumClient,
  resourceType: T['resourceType'],
  canonical: string,
  organization: string | undefined,
): Promise<T | undefined> {
  const [url, version] = canonical.split('|');
  if (!url || !version) {
    return undefined;
  }
  const found = (await medplum.searchResources(resourceType, { url, version })) as T[];
  return found.find((resource) => isPublishedTo(resource, organization));
}

/** The kind of a task (Task.code under SYSTEMS.taskKind). */
export function taskKind(task: Task): TaskKind | undefined {
  const code = task.code?.coding?.find((c) => c.system === SYSTEMS.taskKind)?.code;
  return TASK_KINDS.find((kind) => kind === code);
}

/** The pinned Questionnaire of a questionnaire task (`url|version`, its input). */
export const taskQuestionnaire = (task: Task): string | undefined =>
  task.input?.find((i) => i.type.coding?.some((c) => c.code === 'questionnaire'))?.valueCanonical;

/** The definition a task was issued from (`url|version`): its Questionnaire or its ActivityDefinition. */
export const taskDefinition = (task: Task): string | undefined =>
  task.input?.find((i) => i.type.coding?.some((c) => c.code === 'questionnaire' || c.code === 'activity-definition'))
    ?.valueCanonical;

/** The versioned ObservationDefinitions a measurement task asks for (its inputs). */
export const taskObservationDefinitions = (task: Task): Reference<ObservationDefinition>[] =>
  (task.input ?? [])
    .filter((i) => i.type.coding?.some((c) => c.code === 'observation-definition'))
    .map((i) => i.valueReference as Reference<ObservationDefinition>);

/** Reads a versioned reference (`Type/<id>/_history/<vid>`) as it was then. */
export async function readVersioned<T extends ObservationDefinition>(
  medplum: MedplumClient,
  reference: Reference<T>,
): Promise<T> {
  const [type, id, history, versionId] = (reference.reference ?? '').split('/');
  if (type !== 'ObservationDefinition' || history !== '_history' || !id || !versionId) {
    throw new Error('not a versioned ObservationDefinition reference');
  }
  return (await medplum.readVersion('ObservationDefinition', id, versionId)) as T;
}

/** A schedule-visit task for an asynchronous review (its `visit-type` input). */
const isAsyncReview = (task: Task): boolean =>
  task.input?.find((i) => i.type.coding?.some((c) => c.code === 'visit-type'))?.valueCoding?.code === 'async-review';

/** The call that completes a patient task of this kind, with what its body carries (the task view's `complete`). */
function completeCall(kind: TaskKind, task: Task): string {
  const id = task.id as string;
  switch (kind) {
    case 'questionnaire':
      return `POST /v1/tasks/${id}/complete {questionnaireResponse}`;
    case 'measurement':
      return `POST /v1/tasks/${id}/complete {measurements}`;
    case 'treatment-offer':
      return `POST /v1/tasks/${id}/complete {decision}`;
    case 'order-decisions':
      return `POST /v1/orders/${(task.focus?.reference ?? '').split('/')[1] ?? '{id}'}/decisions {items}`;
    case 'schedule-visit':
      // An asynchronous review takes no slot (it is booked for its review window).
      return isAsyncReview(task)
        ? `POST /v1/appointments {task: "Task/${id}"}`
        : `POST /v1/appointments {task: "Task/${id}", slot}`;
  }
}

/** A task as the patient sees it in the action plane. */
export async function patientTaskView(
  medplum: MedplumClient,
  task: Task,
  /** How a versioned ObservationDefinition is read (the gateway keeps the versions it read: they never change). */
  readDefinition: (reference: Reference<ObservationDefinition>) => Promise<ObservationDefinition> = (r) =>
    readVersioned(medplum, r),
): Promise<PatientTask> {
  const kind = taskKind(task) ?? 'questionnaire';
  const view: PatientTask = {
    task: `Task/${task.id}`,
    kind,
    status: task.status as PatientTask['status'],
    ...(task.description ? { description: task.description } : {}),
    complete: completeCall(kind, task),
  };
  if (kind === 'questionnaire') {
    view.questionnaire = taskQuestionnaire(task);
  } else if (kind === 'treatment-offer' || kind === 'order-decisions') {
    view.offer = task.focus?.reference;
    const items = (task.input ?? []).filter((i) => i.type.coding?.some((c) => c.code === 'order-item'));
    if (kind === 'order-decisions' && items.length > 0) {
      view.items = items.map((i) => ({
        item: i.valueReference?.reference as string,
        allowed: (i.extension ?? [])
          .filter((e) => e.url === EXTENSIONS.fulfilmentMethod)
          .map((e) => e.valueCode as FulfilmentMethod),
      }));
    }
  } else if (kind === 'schedule-visit') {
    view.visitType = isAsyncReview(task) ? 'async-review' : 'video-visit';
    if (task.restriction?.period?.start) {
      view.notBefore = task.restriction.period.start;
    }
    const team = task.input?.find((i) => i.type.coding?.some((c) => c.code === 'care-team'))?.valueReference?.reference;
    if (team) {
      view.careTeam = team;
    }
  } else {
    const definitions = await Promise.all(taskObservationDefinitions(task).map(readDefinition));
    view.measurements = definitions.map((d) => ({ code: definitionCode(d), units: allowedUnits(d) }));
  }
  return view;
}

/** The input types of a patient task (Task.input.type): what each input of the task is. */
export type TaskInputKind =
  | 'questionnaire'
  | 'activity-definition'
  | 'observation-definition'
  | 'segment'
  | 'visit-type'
  | 'care-team'
  | 'order-item';

export const taskInputType = (kind: TaskInputKind): CodeableConcept => ({
  coding: [{ system: SYSTEMS.taskKind, code: kind }],
});

/**
 * The claim of a journey: its EpisodeOfCare, `planned`, created once per key by a conditional create (a
 * concurrent call gets the same one), pinned to the plan it instantiates.
 */
export async function claimEpisode(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  key: string,
  canonical: string,
): Promise<EpisodeOfCare | undefined> {
  const organization = patient.managingOrganization?.reference;
  const episode: EpisodeOfCare = {
    resourceType: 'EpisodeOfCare',
    status: 'planned',
    identifier: [{ system: SYSTEMS.episodeKey, value: key }],
    extension: [{ url: EXTENSIONS.episodePlan, valueCanonical: canonical }],
    patient: { reference: `Patient/${patient.id}` },
    ...(organization ? { managingOrganization: { reference: organization } } : {}),
  };
  try {
    const written = await medplum.executeBatch({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: episode,
          request: {
            method: 'POST',
            url: 'EpisodeOfCare',
            ifNoneExist: new URLSearchParams(episodeKeyQuery(patient.id, key)).toString(),
          },
        },
      ],
    });
    // What the create answered (made now, or the one its condition found): hers, of this key. Read back
    // only when the answer does not say (fewer round trips).
    const claimed = written.entry?.[0]?.resource as EpisodeOfCare | undefined;
    if (
      claimed?.resourceType === 'EpisodeOfCare' &&
      claimed.patient?.reference === `Patient/${patient.id}` &&
      claimed.identifier?.some((i) => i.system === SYSTEMS.episodeKey && i.value === key)
    ) {
      return claimed;
    }
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
  }
  return episodeByKey(medplum, patient.id, key);
}
