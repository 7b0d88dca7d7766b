import type { MedplumClient } from '@medplum/core';
import type { CarePlan, EpisodeOfCare, ObservationDefinition, Reference, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { PatientTask } from '../../contracts/tasks';
import { absent } from './absent';
import { episodeTag, patientTaskView, taskDefinition } from './journey';
import { searchAll } from './search';

/**
 * An enrollment as `POST /v1/enrollments`, `/activate` and `DELETE` answer it. The enrollment bot answers
 * with these, and the gateway answers repeats of finished enrollment work from her own reads with the
 * same (src/medplum/finished-work.ts). No Node built-in here: the gateway also runs as a Worker.
 */

export interface Enrollment {
  created?: boolean;
  carePlan: string;
  episodeOfCare?: string;
  protocol: string;
  status: 'draft' | 'active' | 'revoked';
  tasks?: PatientTask[];
  cancelledTasks?: string[];
  cancelledAppointments?: string[];
}

/** Tasks of a plan that are still hers to do (what unenrolling cancels). */
export const OPEN: Task['status'][] = ['ready', 'on-hold', 'requested', 'received', 'accepted', 'in-progress'];

/** Her draft or active plan of an enrollment's journey (episode). */
export async function enrollmentIn(
  medplum: MedplumClient,
  episode: EpisodeOfCare,
  patientId: string,
): Promise<CarePlan | undefined> {
  const tag = episodeTag(episode.id as string);
  const plans = await medplum.searchResources(
    'CarePlan',
    { _tag: `${tag.system}|${tag.code}`, status: 'draft,active' },
    { cache: 'no-cache' },
  );
  return plans.find((p) => p.subject?.reference === `Patient/${patientId}`);
}

/** The plan's journey: the episode its tag names, when it is hers. */
export async function episodeOfPlan(
  medplum: MedplumClient,
  plan: CarePlan,
  patientId: string,
): Promise<EpisodeOfCare | undefined> {
  const code = plan.meta?.tag?.find((t) => t.system === SYSTEMS.episode)?.code ?? '';
  const id = code.startsWith('EpisodeOfCare/') ? code.slice('EpisodeOfCare/'.length) : undefined;
  const episode = id
    ? ((await medplum.readResource('EpisodeOfCare', id).catch(absent)) as EpisodeOfCare | undefined)
    : undefined;
  return episode?.patient?.reference === `Patient/${patientId}` ? episode : undefined;
}

/** The plan as she is answered it: with her open tasks once it is active. */
/**
 * Tasks in the order of the plan's activities (the program's actions), whatever order a search gives
 * (Medplum promises none without `_sort`, and one transaction stamps them all with one instant).
 */
function inPlanOrder(plan: CarePlan, tasks: Task[]): Task[] {
  const order = (plan.activity ?? []).map((a) => a.detail?.instantiatesCanonical?.[0] ?? '');
  const rank = (t: Task) => {
    const at = order.indexOf(taskDefinition(t) ?? '');
    return at < 0 ? order.length : at;
  };
  return [...tasks].sort((a, b) => rank(a) - rank(b) || (a.authoredOn ?? '').localeCompare(b.authoredOn ?? ''));
}

export async function enrollmentAnswer(
  medplum: MedplumClient,
  plan: CarePlan,
  episode: EpisodeOfCare | undefined,
  created: boolean,
  /** How a task's versioned definition is read (the gateway keeps the versions it read: they never change). */
  readDefinition?: (reference: Reference<ObservationDefinition>) => Promise<ObservationDefinition>,
): Promise<{ ok: true } & Enrollment> {
  const status = plan.status as 'draft' | 'active' | 'revoked';
  const tasks =
    status === 'active'
      ? inPlanOrder(
          plan,
          (await searchAll(medplum, 'Task', { 'based-on': `CarePlan/${plan.id}` })).filter(
            (t) => t.for?.reference === plan.subject?.reference && OPEN.includes(t.status),
          ),
        )
      : [];
  return {
    ok: true,
    created,
    carePlan: `CarePlan/${plan.id}`,
    ...(episode ? { episodeOfCare: `EpisodeOfCare/${episode.id}` } : {}),
    protocol: plan.instantiatesCanonical?.[0] ?? '',
    status,
    ...(status === 'active'
      ? { tasks: await Promise.all(tasks.map((t) => patientTaskView(medplum, t, readDefinition))) }
      : {}),
  };
}
