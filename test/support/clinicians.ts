import { randomUUID } from 'node:crypto';
import type { WithId } from '@medplum/core';
import type { AccessPolicy, CareTeam, Organization, ProjectMembership, Task } from '@medplum/fhirtypes';
import { queueType } from '../../bots/lib/queues';
import { QUEUE_STAFF_PARAMETER, QUEUES_PARAMETER, queueStaffValue, SYSTEMS } from '../../contracts/systems';
import { type Clinician, clinicianInvite, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import type { DemoActor, TestBackend } from './backend';

/** Clinicians as they work in Medplum's app: signed in through Medplum's login, writing plain FHIR. */

type Tenant = 'northwind' | 'southridge';

/** The demo clinician of a tenant, signed in with the printed email and password. */
export function demoClinician(backend: TestBackend, tenant: Tenant): Promise<Clinician> {
  return signInClinician({
    baseUrl: backend.baseUrl,
    fetch: backend.fetch,
    email: demoEmail('clinician', tenant),
    password: DEMO_PASSWORD,
    projectId: backend.project.id,
  });
}

/** The tenant's intake-review queue, as provisioned (src/provision/definition.ts tenantResources). */
export async function intakeQueue(backend: TestBackend, tenant: Tenant): Promise<WithId<CareTeam>> {
  return (await backend.admin.searchOne(
    'CareTeam',
    { _tag: `${SYSTEMS.provisioning}|queue-${tenant}-intake-review` },
    { cache: 'no-cache' },
  )) as WithId<CareTeam>;
}

/**
 * A colleague of the demo clinician for one test: invited through Medplum's admin API as provisioning
 * invites the demo clinicians (clinician policy, the tenant as `organization`), and, unless `member` is
 * false, working the tenant's intake queue: its `queues` parameter names it (what lets her claim its
 * work) and a project admin adds her to the CareTeam's participants (what lists her there).
 */
export async function freshClinician(
  backend: TestBackend,
  tenant: Tenant,
  options: { member?: boolean } = {},
): Promise<Clinician> {
  const email = `clinician-${randomUUID()}@${tenant}.example`;
  const member = options.member !== false;
  const queue = await intakeQueue(backend, tenant);
  const organization = (await backend.admin.searchOne('Organization', {
    identifier: `${SYSTEMS.tenant}|${tenant}`,
  })) as WithId<Organization>;
  const policy = (await backend.admin.searchOne('AccessPolicy', {
    _tag: `${SYSTEMS.provisioning}|policy-clinician`,
  })) as WithId<AccessPolicy>;
  await backend.admin.post(
    `admin/projects/${backend.project.id}/invite`,
    clinicianInvite({
      firstName: 'Fresh',
      lastName: 'Colleague',
      email,
      password: DEMO_PASSWORD,
      policy: `AccessPolicy/${policy.id}`,
      organization: `Organization/${organization.id}`,
      queues: member ? [`CareTeam/${queue.id}`] : [],
    }),
  );
  const clinician = await signInClinician({
    baseUrl: backend.baseUrl,
    fetch: backend.fetch,
    email,
    password: DEMO_PASSWORD,
    projectId: backend.project.id,
  });
  if (member) {
    const current = await intakeQueue(backend, tenant);
    await backend.admin.updateResource<CareTeam>({
      ...current,
      participant: [...(current.participant ?? []), { member: clinician.profile }],
    });
    await syncQueueStaff(backend, `CareTeam/${queue.id}`);
  }
  return clinician;
}

/**
 * What an admin (or provisioning) does when a queue's members change: every member's `queueStaff`
 * parameter lists the queue's members as its CareTeam names them, so each may hand its work to the others.
 */
export async function syncQueueStaff(backend: TestBackend, queue: string): Promise<void> {
  const team = await backend.systemRepo.readReference<CareTeam>({ reference: queue });
  const staff = (team.participant ?? []).flatMap((p) =>
    p.member?.reference?.startsWith('Practitioner/') ? [{ queue, member: p.member.reference }] : [],
  );
  const memberships = await backend.systemRepo.searchResources<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'project', operator: 'eq', value: `Project/${backend.project.id}` }],
    count: 1000,
  });
  for (const membership of memberships) {
    const access = membership.access ?? [];
    const works = access.some((a) =>
      a.parameter?.some((p) => p.name === QUEUES_PARAMETER && p.valueString?.includes(`'${queue}'`)),
    );
    if (!works) {
      continue;
    }
    await backend.systemRepo.updateResource<ProjectMembership>({
      ...membership,
      access: access.map((a) => ({
        ...a,
        parameter: [
          ...(a.parameter ?? []).filter((p) => p.name !== QUEUE_STAFF_PARAMETER),
          { name: QUEUE_STAFF_PARAMETER, valueString: queueStaffValue(staff) },
        ],
      })),
    });
  }
}

/**
 * Review work for a patient, in the shape bots/lib/queues.ts issues it (ready, owned by the tenant's
 * queue, for her), written as a bot writes it (here by the system). Tests that need the whole intake
 * first use test/gateway/tasks.test.ts's path instead.
 */
export async function reviewTask(backend: TestBackend, patient: DemoActor): Promise<WithId<Task>> {
  const queue = await intakeQueue(backend, patient.tenant as Tenant);
  return backend.systemRepo.createResource<Task>({
    resourceType: 'Task',
    meta: { project: backend.project.id, accounts: [patient.patient.managingOrganization as { reference: string }] },
    status: 'ready',
    intent: 'order',
    priority: 'routine',
    code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
    description: 'Review the completed intake',
    for: { reference: `Patient/${patient.patient.id}` },
    authoredOn: new Date().toISOString(),
    performerType: queueType(queue),
  }) as Promise<WithId<Task>>;
}
