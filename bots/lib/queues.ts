import type { MedplumClient } from '@medplum/core';
import type { BundleEntry, CareTeam, Coding, Patient, Reference, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';

/**
 * Clinicians' work (JOURNEY C, F): a Task for the tenant's queue, a CareTeam of the patient's
 * organization, `ready` and owned by the team until a clinician claims it. Every bot that hands work to
 * clinicians issues it here, so the queue's conventions live in one place.
 */

/** The tenant's queue (a provisioned CareTeam of the patient's organization, by its category). */
export async function tenantQueue(
  medplum: MedplumClient,
  patient: Patient,
  category = 'intake-review',
): Promise<CareTeam | undefined> {
  const organization = patient.managingOrganization?.reference;
  if (!organization) {
    return undefined;
  }
  const teams = await medplum.searchResources(
    'CareTeam',
    { category: `${SYSTEMS.careQueue}|${category}`, _compartment: organization },
    { cache: 'no-cache' },
  );
  return teams.find((t) => t.managingOrganization?.some((o) => o.reference === organization));
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
}

/** The transaction entry that issues the work (a POST the bot's transaction carries). */
export function clinicianTask(work: ClinicianWork): BundleEntry {
  const task: Task = {
    resourceType: 'Task',
    ...(work.tags?.length ? { meta: { tag: work.tags } } : {}),
    status: 'ready',
    intent: 'order',
    priority: work.priority ?? 'routine',
    code: { coding: [{ system: SYSTEMS.taskKind, code: work.code }] },
    description: work.description,
    for: { reference: `Patient/${work.patient.id}` },
    focus: work.focus,
    authoredOn: new Date().toISOString(),
    ...(work.queue ? { owner: { reference: `CareTeam/${work.queue.id}` } } : {}),
  };
  return { resource: task, request: { method: 'POST', url: 'Task' } };
}
