import type { MedplumClient } from '@medplum/core';
import type { EpisodeOfCare, ObservationDefinition, PlanDefinition, Reference, Task } from '@medplum/fhirtypes';
import type { PatientTask } from '../../contracts/tasks';
import { episodePlan, patientEpisodeTasks, patientTaskView, readVersioned, taskDefinition } from './journey';
import { type BotResult, fail } from './result';

/**
 * An assessment as `POST /v1/assessments` answers it: the episode and her tasks. The start-assessment bot
 * answers with these, and the gateway answers a resume from her own reads with the same (src/medplum/
 * finished-work.ts). No Node built-in here: the gateway also runs as a Worker.
 */

export interface StartedAssessment {
  created: boolean;
  episodeOfCare: string;
  assessment: string;
  status: 'active' | 'finished';
  tasks: PatientTask[];
}

/**
 * The episode as the patient is answered it: active or finished, with her tasks. One her clinician stopped
 * (cancelled, entered-in-error, on hold...) is not hers to resume, and is never reported as active.
 */
export async function assessmentAnswer(
  medplum: MedplumClient,
  patientId: string,
  episode: EpisodeOfCare,
  created: boolean,
  /** The plan the offering fronts now; the episode's own pinned plan is read when it is another version. */
  current: PlanDefinition,
  /** How a task's versioned definition is read (the gateway keeps the versions it read: they never change). */
  readDefinition?: (reference: Reference<ObservationDefinition>) => Promise<ObservationDefinition>,
): Promise<BotResult<StartedAssessment>> {
  if (episode.status !== 'active' && episode.status !== 'finished') {
    return fail(409, 'invalid_state', 'This assessment was stopped by the care team', { state: episode.status });
  }
  const own = await patientEpisodeTasks(medplum, episode.id as string, patientId);
  const pinned = episodePlan(episode);
  const plan = pinned === `${current.url}|${current.version}` ? current : await pinnedPlan(medplum, pinned);
  return assessmentAnswerWith(medplum, episode, inPlanOrder(plan, own), created, new Map(), readDefinition);
}

/** The episode and its tasks as the patient is answered them. */
export async function assessmentAnswerWith(
  medplum: MedplumClient,
  episode: EpisodeOfCare,
  tasks: Task[],
  created: boolean,
  /** Definition versions already read in this run, by versioned reference. */
  known = new Map<string, ObservationDefinition>(),
  readDefinition = (reference: Reference<ObservationDefinition>) => readVersioned(medplum, reference),
): Promise<BotResult<StartedAssessment>> {
  return {
    ok: true,
    created,
    episodeOfCare: `EpisodeOfCare/${episode.id}`,
    assessment: episodePlan(episode) ?? '',
    status: episode.status === 'finished' ? 'finished' : 'active',
    tasks: await Promise.all(
      tasks.map((task) =>
        patientTaskView(medplum, task, async (reference) => {
          const definition = known.get(reference.reference ?? '');
          return definition ?? readDefinition(reference);
        }),
      ),
    ),
  };
}

async function pinnedPlan(medplum: MedplumClient, canonical: string | undefined): Promise<PlanDefinition | undefined> {
  const [url, version] = (canonical ?? '').split('|');
  return url && version ? medplum.searchOne('PlanDefinition', { url, version }) : undefined;
}

/** The tasks in the order of the plan's actions (the order a patient meets them in). */
function inPlanOrder(plan: PlanDefinition | undefined, tasks: Task[]): Task[] {
  const order = (plan?.action ?? []).map((a) => a.definitionCanonical);
  const position = (task: Task) => {
    const at = order.indexOf(taskDefinition(task));
    return at === -1 ? order.length : at;
  };
  return [...tasks].sort((a, b) => position(a) - position(b));
}
