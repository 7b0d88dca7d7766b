import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  BundleEntry,
  CareTeam,
  Coding,
  DetectedIssue,
  Patient,
  ProvenanceAgent,
  Questionnaire,
  Reference,
  Resource,
  Task,
} from '@medplum/fhirtypes';
import { CLINICIAN_WORK_KINDS, type ClinicianWorkKind, SYSTEMS, VISIT_TYPES } from '../../contracts/systems';
import { formInput, formInstructions } from '../../contracts/work-forms';
import { absent } from './absent';
import { readInput } from './input';
import { lostRace } from './races';
import { ahead } from './reads';
import { fail } from './result';
import { taskHandingIn } from './work-forms';

/**
 * Clinicians' work (JOURNEY C, F): a Task for the tenant's queue, a CareTeam of the patient's
 * organization, `ready`, waiting in the queue (its `performerType`) with no owner until a clinician takes it. Every bot that hands work to
 * clinicians issues it here, so the queue's conventions live in one place.
 */

/** The clinician's work when an offer comes back declined or countered (JOURNEY D.4). */
export const REVIEW_RESPONSE = 'review-response';
/** The care team's review of an asynchronous (store-and-forward) visit (JOURNEY H). */
export const ASYNC_REVIEW = 'review-async-visit';

/**
 * The tenant's queue for a kind of work (a provisioned CareTeam of the patient's organization): the one
 * whose `queueWork` category names the kind, else its default (`*`), else (provisioned before queues were
 * routed) its `intake-review` queue. Messages go to the default queue (no kind).
 */
export async function tenantQueue(
  medplum: MedplumClient,
  patient: Patient,
  kind?: string,
): Promise<CareTeam | undefined> {
  const organization = patient.managingOrganization?.reference;
  if (!organization) {
    return undefined;
  }
  const teams = (
    await medplum.searchResources('CareTeam', {
      category: `${SYSTEMS.careQueue}|`,
      _compartment: organization,
      _count: '100',
    })
  ).filter((t) => t.status !== 'inactive' && t.managingOrganization?.some((o) => o.reference === organization));
  const routes = (team: CareTeam, code: string) =>
    team.category?.some((c) => c.coding?.some((x) => x.system === SYSTEMS.queueWork && x.code === code));
  return (
    (kind ? teams.find((t) => routes(t, kind)) : undefined) ??
    teams.find((t) => routes(t, '*')) ??
    teams.find((t) =>
      t.category?.some((c) => c.coding?.some((x) => x.system === SYSTEMS.careQueue && x.code === 'intake-review')),
    )
  );
}

export interface ClinicianWork {
  /** The kind of work (Task.code under SYSTEMS.taskKind): review-intake, review-reading, review-request... */
  code: string;
  description: string;
  patient: Patient & { id: string };
  queue: CareTeam | undefined;
  focus: Reference;
  priority?: Task['priority'];
  /** Tags the work carries (the journey's episode tag, when it belongs to one). */
  tags?: Coding[];
  /** When it is due (ISO 8601); absent: its kind's service window (DUE_WITHIN) from now. */
  due?: string;
  /**
   * What she must answer to complete it: the stored form the task points at (contracts/work-forms.ts;
   * `storedForm` makes one), and the form itself when known, for the task's written instructions. The
   * task's `focus` is then the form, and what the work is about (`focus` above) its `reasonReference`.
   */
  form?: { reference: string; questionnaire?: Questionnaire };
}

/** A Task's title in clinicians' apps (`code.text`: the Provider app's task list and header show it). */
const TITLES: Record<string, string> = {
  'review-intake': 'Review the intake: assign a condition',
  'select-treatment': 'Select a treatment',
  'review-response': 'Review the patient’s answer to the offer',
  [ASYNC_REVIEW]: 'Review an asynchronous visit',
};

/**
 * How long the care team has for each kind of work (hours), from when it is issued: the due date every
 * clinician task carries (`restriction.period.end`, the Provider app's "Due"), after which the reconciler
 * marks it urgent and overdue, so it comes first. An urgent kind's window is shorter. The platform's
 * defaults (issue 48); an asynchronous visit's review is due at the end of its review window instead.
 */
export const DUE_WITHIN_HOURS: Record<ClinicianWorkKind, number> = {
  'review-intake': 48,
  'select-treatment': 24,
  'review-reading': 4,
  'review-response': 48,
  'review-request': 72,
  'review-unenrollment': 72,
  // Its review window (the visit's own end is its due date; this is the same window).
  [ASYNC_REVIEW]: VISIT_TYPES['async-review'].reviewHours,
};

/** The kinds of clinician work the platform issues (Task.code under SYSTEMS.taskKind). */
export const CLINICIAN_KINDS: readonly string[] = CLINICIAN_WORK_KINDS;

const dueDate = (work: ClinicianWork, issued: Date): string =>
  work.due ??
  new Date(issued.getTime() + ((DUE_WITHIN_HOURS as Record<string, number>)[work.code] ?? 72) * 3600_000).toISOString();

/**
 * The queue as a performer type: which queue's work it is (SYSTEMS.queue, `CareTeam/<id>`: what the
 * clinician policy checks) and its kind (the queue's category: the Provider app's task board filters by
 * the first coding, so her team's work is one click away), named as the queue is.
 */
export const queueType = (queue: CareTeam): Task['performerType'] => [
  {
    coding: [
      ...(queue.category ?? []).flatMap((c) => c.coding ?? []).filter((c) => c.system === SYSTEMS.careQueue),
      { system: SYSTEMS.queue, code: `CareTeam/${queue.id}`, ...(queue.name ? { display: queue.name } : {}) },
    ],
    text: queue.name,
  },
];

/** The queue a task waits in (`CareTeam/<id>`), when it is a queue's work. */
export const queueOfTask = (task: Task): string | undefined =>
  task.performerType?.flatMap((t) => t.coding ?? []).find((c) => c.system === SYSTEMS.queue)?.code;

/** The transaction entry that issues the work (a POST the bot's transaction carries). */
export function clinicianTask(work: ClinicianWork): BundleEntry {
  const issued = new Date();
  const task: Task = {
    resourceType: 'Task',
    ...(work.tags?.length ? { meta: { tag: work.tags } } : {}),
    status: 'ready',
    intent: 'order',
    priority: work.priority ?? 'routine',
    code: { coding: [{ system: SYSTEMS.taskKind, code: work.code }], text: TITLES[work.code] ?? work.description },
    description: work.description,
    for: { reference: `Patient/${work.patient.id}` },
    authoredOn: issued.toISOString(),
    // Due when its kind's window ends: the board shows it, the reconciler marks it overdue after.
    restriction: { period: { end: dueDate(work, issued) } },
    // Waiting in the queue, owned by nobody until a clinician of the queue takes it.
    ...(work.queue ? { performerType: queueType(work.queue) } : {}),
    ...(work.form
      ? {
          focus: { reference: work.form.reference },
          reasonReference: work.focus,
          input: [formInput(work.form.reference, work.form.questionnaire?.title)],
          ...(work.form.questionnaire ? { note: [{ text: formInstructions(work.form.questionnaire) }] } : {}),
        }
      : { focus: work.focus }),
  };
  return { resource: task, request: { method: 'POST', url: 'Task' } };
}

/**
 * The prologue of a bot woken by a clinician's completed work (a Subscription on `Task?code=…&status=completed`,
 * or on the completed answers to its form, which the Provider app writes after the task: the task is then the
 * one of her completed work that hands them in, bots/lib/work-forms.ts `taskHandingIn`):
 * the delivery is re-read by id, and acted on only when it is that kind of work, completed, by the
 * Practitioner who owns it: the version that completed it was written by her (Medplum stamps
 * `meta.author` itself). The requester is that Practitioner (Medplum delivers a subscription as the
 * author of the write that fired it) or the reconciler bot re-driving a delivery that was lost.
 */
export async function completedByOwner<N extends 'eligibility' | 'compose-offer' | 'visit-review'>(
  medplum: MedplumClient,
  event: BotEvent,
  bot: N,
  codes: readonly string[],
  /** Told of the task as soon as it is read, before it is believed: to ask its work's reads with the checks'. */
  onRead?: (task: Task) => void,
): Promise<{ ok: true; task: Task; clinician: string } | ReturnType<typeof fail>> {
  const input = readInput(bot, event.input);
  if (!input.ok) {
    return input;
  }
  const refused = fail(
    403,
    'forbidden',
    `Only ${codes.join(' or ')} work completed by the clinician who owns it is acted on`,
  );
  // Woken by the answers (the Provider app completes the task before its response): the task that hands
  // them in, found by its writer and output (bots/lib/work-forms.ts), then checked as if it had woken us.
  const taskId =
    input.value.resourceType === 'Task'
      ? input.value.id
      : (await taskHandingIn(medplum, input.value.id, codes, event.requester?.reference ?? ''))?.id;
  if (!taskId) {
    return refused;
  }
  // Its history (who completed it) goes out with the task itself, since it needs only the id (fewer
  // round trips). Believed below, after the task's own checks, as before.
  ahead(medplum.readHistory('Task', taskId));
  const task = (await medplum.readResource('Task', taskId).catch(absent)) as Task | undefined;
  if (task) {
    onRead?.(task);
  }
  const clinician = task?.owner?.reference ?? '';
  if (
    !task?.code?.coding?.some((c) => c.system === SYSTEMS.taskKind && codes.includes(c.code ?? '')) ||
    task.status !== 'completed' ||
    !clinician.startsWith('Practitioner/')
  ) {
    return refused;
  }
  const requester = event.requester?.reference ?? '';
  if (requester !== clinician && !(await isReconciler(medplum, requester))) {
    return refused;
  }
  const completing = (await versionsOf(medplum, task)).find((v) => v.status === 'completed');
  return completing?.meta?.author?.reference === clinician ? { ok: true, task, clinician } : refused;
}

/** The reconciler bot (`SYSTEMS.bots|reconcile`), the one other caller that may re-drive a delivery. */
async function isReconciler(medplum: MedplumClient, requester: string): Promise<boolean> {
  const [type, id] = requester.split('/');
  if (type !== 'Bot' || !id) {
    return false;
  }
  const bot = await medplum.readResource('Bot', id).catch(absent);
  return bot?.identifier?.some((i) => i.system === SYSTEMS.bots && i.value === 'reconcile') ?? false;
}

/** Every version of a task, oldest first. */
function versionsOf(medplum: MedplumClient, task: Task): Promise<Task[]> {
  return historyOf(medplum, task);
}

/** Every version of a resource, oldest first (Medplum answers history newest first). */
export async function historyOf<T extends Resource>(medplum: MedplumClient, resource: T): Promise<T[]> {
  const history = await medplum.readHistory(resource.resourceType, resource.id as string);
  return (history.entry ?? []).flatMap((e) => (e.resource ? [e.resource as T] : [])).reverse();
}

/**
 * A finding's mitigations that `clinician` herself recorded and that still stand: each one first
 * appears in a version whose writer (`meta.author`, stamped by Medplum, never the client) is her, and
 * names her as its author. What a mitigation claims of itself (`author`) is not enough: a colleague
 * could write one in her name.
 */
export async function ownMitigations(
  medplum: MedplumClient,
  issue: DetectedIssue,
  clinician: string,
): Promise<NonNullable<DetectedIssue['mitigation']>> {
  const versions = await historyOf(medplum, issue);
  const key = (m: unknown) => JSON.stringify(m);
  const hers = new Set<string>();
  let before = new Set<string>();
  for (const version of versions) {
    const now = (version.mitigation ?? []).map(key);
    for (const added of now.filter((m) => !before.has(m))) {
      if (version.meta?.author?.reference === clinician) {
        hers.add(added);
      }
    }
    before = new Set(now);
  }
  const current = versions.at(-1);
  return (current?.mitigation ?? []).filter((m) => m.author?.reference === clinician && hers.has(key(m)));
}

/**
 * Says on completed work why the platform did nothing with it (a clinician sees it on the task: its
 * `businessStatus`, and the reason in `statusReason`), under If-Match; written once (the same mark again
 * writes nothing, so the update it makes cannot wake the bot into a loop). The bot's answer says the same.
 */
export async function markUnanswered(
  medplum: MedplumClient,
  task: Task,
  code: string,
  reason: string,
): Promise<{ ok: true; offered: false; reason: string }> {
  if (task.businessStatus?.text !== code || task.statusReason?.text !== reason) {
    await medplum
      .updateResource(
        {
          ...task,
          businessStatus: { coding: [{ system: SYSTEMS.taskKind, code }], text: code },
          statusReason: { text: reason },
        },
        { headers: { 'If-Match': `W/"${task.meta?.versionId}"` } },
      )
      .catch((err: unknown) => {
        if (!lostRace(err)) {
          throw err;
        }
      });
  }
  return { ok: true, offered: false, reason };
}

/** A reference to exactly this version of a resource (what provenance and pins name). */
export const versioned = (resource: Resource): Reference => ({
  reference: `${resource.resourceType}/${resource.id}/_history/${resource.meta?.versionId}`,
});

/** A Provenance agent: who authored it. */
export const authorAgent = (who: ProvenanceAgent['who']): ProvenanceAgent => ({
  type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/provenance-participant-type', code: 'author' }] },
  who,
});

/**
 * Clinician work as a bot issued it: the earliest `ready` version a Bot wrote (history; Medplum stamps
 * `meta.author` itself, packages/server/src/fhir/repo.ts, so only a bot's own write carries a Bot). What a
 * bot believes of a task's inputs (the options, the engine's results, the condition) comes from there: a
 * clinician may edit a task she works on (a note), and her later versions are not the platform's word.
 */
export async function issuedVersion(medplum: MedplumClient, task: Task): Promise<Task | undefined> {
  return (await versionsOf(medplum, task)).find(
    (v) => v.status === 'ready' && v.meta?.author?.reference?.startsWith('Bot/'),
  );
}
