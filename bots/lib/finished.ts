import type { MedplumClient } from '@medplum/core';
import type { Task } from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod, SYSTEMS } from '../../contracts/systems';
import { PATIENT_TASK_TAG, taskKind } from './journey';
import { issuedVersion } from './queues';

/**
 * Finished work as its workflow answers a repeat of it: from the task alone, no other read. The bots
 * answer a replay with these, and so does the gateway when it answers one from the patient's own read
 * without running a bot (src/medplum/finished-work.ts), so the two answers are one. No Node
 * built-in here: the gateway also runs as a Worker.
 */

/** A task the platform issued to a patient (its tag), as opposed to any other Task. */
export const isPatientTask = (task: Task): boolean =>
  (task.meta?.tag ?? []).some((t) => t.system === PATIENT_TASK_TAG.system && t.code === PATIENT_TASK_TAG.code);

/** A task the platform issued to this patient: for her, with the patient-task tag. */
export const isHerTask = (task: Task | undefined, patientId: string): task is Task =>
  task?.for?.reference === `Patient/${patientId}` && isPatientTask(task);

/** The fingerprint (bots/lib/digest.ts) of the payload that completed a task, kept on the task. */
export const completionDigest = (task: Task): string | undefined =>
  task.extension?.find((e) => e.url === EXTENSIONS.completionDigest)?.valueString;

export interface CompletedTask {
  task: string;
  status: 'completed';
  questionnaireResponse?: string;
  observations?: string[];
  decision?: string;
  consent?: string;
  carePlan?: string;
  tasks?: string[];
  proposal?: string;
}

/** A completed task as `POST /v1/tasks/{id}/complete` answers it: what its outputs say. */
export function completedTask(task: Task): { ok: true } & CompletedTask {
  const outputs = (task.output ?? []).map((o) => o.valueReference?.reference ?? '');
  const answers = outputs.find((r) => r.startsWith('QuestionnaireResponse/'));
  const observations = outputs.filter((r) => r.startsWith('Observation/'));
  return {
    ok: true,
    task: `Task/${task.id}`,
    status: 'completed',
    ...(answers ? { questionnaireResponse: answers } : {}),
    ...(taskKind(task) === 'measurement' ? { observations } : {}),
    ...(taskKind(task) === 'treatment-offer' ? offerAnswered(task) : {}),
  };
}

/** What an answered offer task says of itself (its outputs), as `POST /v1/tasks/{id}/complete` answers it. */
function offerAnswered(task: Task): Omit<CompletedTask, 'task' | 'status'> {
  const named = (name: string) => (task.output ?? []).filter((o) => o.type.text === name);
  const reference = (name: string) => named(name)[0]?.valueReference?.reference;
  const decision = named('decision')[0]?.valueCode;
  return {
    ...(decision ? { decision } : {}),
    ...(reference('consent') ? { consent: reference('consent') } : {}),
    ...(reference('care-plan') ? { carePlan: reference('care-plan') } : {}),
    ...(decision === 'accept' ? { tasks: named('task').map((o) => o.valueReference?.reference ?? '') } : {}),
    ...(reference('proposal') ? { proposal: reference('proposal') } : {}),
  };
}

export interface PlacedItem {
  item: string;
  decision: 'accept' | 'decline';
  intent: 'order' | 'proposal';
  status: 'active' | 'cancelled';
  fulfilment?: FulfilmentMethod;
}

export interface PlacedOrder {
  order: string;
  status: 'completed' | 'revoked';
  items: PlacedItem[];
}

/** A placed order as `POST /v1/orders/{id}/decisions` answers it, from its completed order-decisions task. */
export function placedOrder(task: Task): { ok: true } & PlacedOrder {
  const items = (task.output ?? []).map((o): PlacedItem => {
    const item = o.valueReference?.reference as string;
    const fulfilment = o.extension?.find((e) => e.url === EXTENSIONS.fulfilmentMethod)?.valueCode;
    return o.type.text === 'accept'
      ? { item, decision: 'accept', intent: 'order', status: 'active', fulfilment: fulfilment as FulfilmentMethod }
      : { item, decision: 'decline', intent: 'proposal', status: 'cancelled' };
  });
  return {
    ok: true,
    order: task.focus?.reference as string,
    status: items.some((i) => i.decision === 'accept') ? 'completed' : 'revoked',
    items,
  };
}

/**
 * Her order-decisions task for an order (issued when she accepted its offer): only one the platform
 * issued (a first version the Bot wrote, `ready`); anyone else's Task is data. `only` narrows her
 * candidates before their history is read; `onMine` sees each one first (a bot asks ahead what it reads
 * of them next).
 */
export async function orderDecisionsTask(
  medplum: MedplumClient,
  orderId: string,
  own: string,
  { only, onMine }: { only?: (task: Task) => boolean; onMine?: (task: Task) => void } = {},
): Promise<Task | undefined> {
  // Read fresh: a run's reads are its own and forgotten at each of its writes (bots/lib/reads.ts).
  const tasks = await medplum.searchResources('Task', {
    code: `${SYSTEMS.taskKind}|order-decisions`,
    focus: `RequestGroup/${orderId}`,
    subject: own,
  });
  const mine = tasks.filter(
    (task) => task.for?.reference === own && task.owner?.reference === own && (only?.(task) ?? true),
  );
  for (const task of mine) {
    onMine?.(task);
  }
  const issued = await Promise.all(mine.map((task) => issuedVersion(medplum, task)));
  return mine.find((_, index) => issued[index]);
}
