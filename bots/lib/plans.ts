import { randomUUID } from 'node:crypto';
import type { MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  BundleEntry,
  CareTeam,
  Coding,
  ObservationDefinition,
  PlanDefinitionAction,
  Questionnaire,
  ServiceRequest,
  Task,
  TaskInput,
} from '@medplum/fhirtypes';
import { SYSTEMS, VISIT_TYPES } from '../../contracts/systems';
import { absent } from './absent';
import { isPublishedTo } from './agreements';
import { actionKind } from './catalog';
import { PATIENT_TASK_TAG, publishedDefinition, taskInputType } from './journey';

/**
 * What a plan's actions issue to the patient (JOURNEY B, D.4, E): one task per questionnaire or
 * measurement action, pinned to the exact definition versions published to her tenant. Shared by every
 * path that instantiates a plan (an assessment started, an accepted offer's CarePlan, an enrollment).
 */

/** The tasks a list of actions issues (unsaved), or undefined when a definition is missing or not hers. */
export async function tasksOf(
  medplum: MedplumClient,
  actions: PlanDefinitionAction[],
  organization: string | undefined,
  /** Filled with the ObservationDefinition versions read, by versioned reference (the tasks' views need them). */
  definitions?: Map<string, ObservationDefinition>,
): Promise<Task[] | undefined> {
  // Each action's definitions are read at once (fewer round trips), the tasks kept in action order.
  const tasks = await Promise.all(actions.map((action) => taskFor(medplum, action, organization, definitions)));
  return tasks.every((task) => task !== undefined) ? tasks : undefined;
}

/**
 * The monitoring commitment of a clinical protocol: every action but its treatment choice (the
 * `exactly-one` group whose options a clinician selects from, JOURNEY D.2).
 */
export const monitoringActions = (actions: PlanDefinitionAction[] | undefined): PlanDefinitionAction[] =>
  (actions ?? []).filter((a) => a.selectionBehavior !== 'exactly-one');

async function taskFor(
  medplum: MedplumClient,
  action: PlanDefinitionAction,
  organization: string | undefined,
  definitionsRead: Map<string, ObservationDefinition> | undefined,
): Promise<Task | undefined> {
  const kind = actionKind(action);
  const canonical = action.definitionCanonical;
  if (!canonical) {
    return undefined;
  }
  const base: Task = {
    resourceType: 'Task',
    status: 'ready',
    intent: 'order',
    // Titled as she is told it (`code.text`): what Medplum's apps list a task by, never "Task from <date>".
    code: { coding: [{ system: SYSTEMS.taskKind, code: kind }], text: action.title ?? action.description },
    description: action.title ?? action.description,
  };
  if (kind === 'questionnaire') {
    const questionnaire = await publishedDefinition<Questionnaire>(medplum, 'Questionnaire', canonical, organization);
    if (!questionnaire) {
      return undefined;
    }
    return {
      ...base,
      focus: { reference: `Questionnaire/${questionnaire.id}/_history/${questionnaire.meta?.versionId}` },
      input: [{ type: taskInputType('questionnaire'), valueCanonical: canonical }],
    };
  }
  if (kind === 'visit') {
    // A visit to book: the patient's schedule-visit task names the visit and its segments in order; the
    // visit's request (a ServiceRequest, intent plan) is written beside it (visitEntries).
    const activity = await publishedDefinition<ActivityDefinition>(
      medplum,
      'ActivityDefinition',
      canonical,
      organization,
    );
    const visitType = activity?.code?.coding?.find(
      (c) => c.system === SYSTEMS.visitType && c.code && c.code in VISIT_TYPES,
    );
    if (activity?.kind !== 'Appointment' || !visitType) {
      return undefined;
    }
    const team = organization ? await visitTeamOf(medplum, organization) : undefined;
    return {
      ...base,
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'schedule-visit' }], text: base.code?.text },
      input: [
        { type: taskInputType('activity-definition'), valueCanonical: canonical },
        ...(visitType ? [{ type: taskInputType('visit-type'), valueCoding: visitType }] : []),
        // Whom she books with (nothing else told her): her tenant's visit team, which she may read.
        ...(team ? [{ type: taskInputType('care-team'), valueReference: { reference: `CareTeam/${team.id}` } }] : []),
        ...(action.action ?? []).map((segment) => ({
          type: taskInputType('segment'),
          valueString: segment.title ?? segment.description ?? 'Visit',
        })),
      ],
    };
  }
  if (kind === 'measurement') {
    const activity = await publishedDefinition<ActivityDefinition>(
      medplum,
      'ActivityDefinition',
      canonical,
      organization,
    );
    const requirements = activity?.observationRequirement ?? [];
    if (!activity || requirements.length === 0) {
      return undefined;
    }
    const inputs: TaskInput[] = [{ type: taskInputType('activity-definition'), valueCanonical: canonical }];
    const definitions = await Promise.all(
      requirements.map(
        (requirement) => medplum.readReference(requirement).catch(absent) as Promise<ObservationDefinition | undefined>,
      ),
    );
    for (const definition of definitions) {
      if (!definition || !isPublishedTo(definition, organization)) {
        return undefined;
      }
      const versioned = `ObservationDefinition/${definition.id}/_history/${definition.meta?.versionId}`;
      definitionsRead?.set(versioned, definition);
      inputs.push({ type: taskInputType('observation-definition'), valueReference: { reference: versioned } });
    }
    return { ...base, input: inputs };
  }
  return undefined;
}

/**
 * The transaction entries that issue a plan's tasks to the patient (tagged hers and the journey's,
 * `basedOn` the plan); a schedule-visit task comes with the visit's request (a ServiceRequest, `intent`
 * plan, since no practitioner orders it; JOURNEY E), which the task focuses on.
 */
export function issueEntries(
  tasks: Task[],
  context: { patient: string; carePlan: string; tags: Coding[]; now: string },
): BundleEntry[] {
  const entries: BundleEntry[] = [];
  for (const task of tasks) {
    const issued: Task = {
      ...task,
      meta: { tag: [PATIENT_TASK_TAG, ...context.tags] },
      for: { reference: context.patient },
      owner: { reference: context.patient },
      authoredOn: context.now,
      basedOn: [{ reference: context.carePlan }],
    };
    if (task.code?.coding?.some((c) => c.code === 'schedule-visit')) {
      const requestUrl = `urn:uuid:${randomUUID()}`;
      const canonical = task.input?.[0]?.valueCanonical as string;
      const request: ServiceRequest = {
        resourceType: 'ServiceRequest',
        meta: { tag: context.tags },
        status: 'active',
        intent: 'plan',
        subject: { reference: context.patient },
        code: { coding: [visitTypeOf(task) as Coding], text: task.description },
        instantiatesCanonical: [canonical],
        basedOn: [{ reference: context.carePlan }],
        authoredOn: context.now,
      };
      entries.push({ fullUrl: requestUrl, resource: request, request: { method: 'POST', url: 'ServiceRequest' } });
      issued.focus = { reference: requestUrl };
    }
    entries.push({ fullUrl: `urn:uuid:${randomUUID()}`, resource: issued, request: { method: 'POST', url: 'Task' } });
  }
  return entries;
}

/** The visit type a schedule-visit task books (its `visit-type` input), as a Coding. */
export const visitTypeOf = (task: Task): Coding | undefined =>
  task.input?.find((i) => i.type.coding?.some((c) => c.code === 'visit-type'))?.valueCoding;

/** Her tenant's visit team (a provisioned CareTeam, category `<careTeam>|visits`): the practitioners she books. */
export async function visitTeamOf(medplum: MedplumClient, organization: string): Promise<CareTeam | undefined> {
  const teams = await medplum.searchResources('CareTeam', {
    category: `${SYSTEMS.careTeam}|visits`,
    _compartment: organization,
    status: 'active',
  });
  return teams.find((t) => t.managingOrganization?.some((o) => o.reference === organization));
}
