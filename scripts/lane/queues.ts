// QUEUE_CREATES and queue enforcement: the task kinds only bots issue, and a queue's work only its clinicians touch.
import type { CareTeam, Resource, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { clinicianInvite } from '../../src/clinician';
import { DEMO_PASSWORD } from '../../src/provision/demo';
import type { AttackKit } from './attack-kit';
import { type AttackContext, describe, medplumCall, message, type Person, row, signIn } from './common';

/**
 * The task kinds a clinician may not create, then the queue a clinician outside it may not claim, edit or
 * add to, and the one who works it claims, may not move elsewhere, and unclaims. What later checks need:
 * the Northwind intake queue and the Northwind Organization.
 */
/** The Northwind clinician the lane invites who works no queue (her access log shows her, where she read). */
export const OUTSIDER = { firstName: 'Olive', lastName: 'Outsider' };

export async function queueWork(
  ctx: AttackContext,
  kit: AttackKit,
): Promise<{ queueRef: string | undefined; northwindRef: string | undefined }> {
  const { baseUrl, projectId, progress } = ctx;
  const { people, direct, attack, control, byTag } = kit;
  const patient = progress.patient;
  const clinician = people.get('northwind-clinician');
  // QUEUE_CREATES: the platform's kinds of task (SYSTEMS.taskKind) are issued by bots only.
  const journeyPatient = patient
    ? ((await ctx.adminGet(`fhir/R4/${patient}`)).body as Resource | undefined)
    : undefined;
  const tenantAccounts = journeyPatient?.meta?.accounts;
  const taskFor = (person: Person, fields: Partial<Task> & Pick<Task, 'status'>): Task => ({
    resourceType: 'Task',
    ...(tenantAccounts?.length ? { meta: { accounts: tenantAccounts } } : {}),
    intent: 'order',
    for: { reference: patient as string },
    owner: { reference: person.profile },
    ...fields,
  });
  const reviewIntake = { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] };
  await attack(
    'the Northwind clinician creates a review-intake Task (SYSTEMS.taskKind), completed, her own, for the journey patient',
    { attacker: 'northwind-clinician', target: patient },
    (a) => direct(a, 'POST', 'Task', taskFor(a, { status: 'completed', code: reviewIntake })),
    'rejected',
  );
  await attack(
    'the Northwind clinician creates a review-intake Task (SYSTEMS.taskKind), ready, her own, for the journey patient',
    { attacker: 'northwind-clinician', target: patient },
    (a) => direct(a, 'POST', 'Task', taskFor(a, { status: 'ready', code: reviewIntake })),
    'rejected',
  );
  await control(
    'the Northwind clinician creates a plain Task (no task kind), ready, her own, for the journey patient',
    clinician,
    patient,
    () =>
      direct(
        clinician as Person,
        'POST',
        'Task',
        taskFor(clinician as Person, { status: 'ready', code: { text: 'Call the patient back (lane control)' } }),
      ),
    { status: 201 },
  );

  // QUEUE_TRANSITIONS and QUEUE_CREATES with `inMyQueues`: a queue's work is claimed, released, edited or
  // added only by a clinician whose membership's `queues` parameter lists the queue. The demo
  // Northwind clinician works the Northwind intake queue; the admin invites a second Northwind clinician
  // who works none (test/support/clinicians.ts freshClinician with `member: false`).
  const northwind = await byTag('Organization', 'org-northwind');
  const intakeQueue = await byTag('CareTeam', 'queue-northwind-intake-review');
  const clinicianPolicy = await byTag('AccessPolicy', 'policy-clinician');
  const queueRef = intakeQueue?.id ? `CareTeam/${intakeQueue.id}` : undefined;
  const northwindRef = northwind?.id ? `Organization/${northwind.id}` : undefined;
  const adminWrite = (method: string, path: string, body: unknown) =>
    medplumCall(baseUrl, ctx.adminToken, method, path, { body, waitOutQuota: true });
  /** A precondition the admin writes: a row of its own, and what was written (undefined if it was not). */
  const adminCreate = async <T extends Resource>(step: string, body: T): Promise<T | undefined> => {
    try {
      const created = await adminWrite('POST', `fhir/R4/${body.resourceType}`, body);
      row(`precondition: ${step}`, created.status === 201 ? 'ok' : 'FAILED', `${describe(created)}, by the admin`);
      return created.status === 201 ? (created.body as T) : undefined;
    } catch (err) {
      row(`precondition: ${step}`, 'FAILED', message(err));
      return undefined;
    }
  };
  const outsiderStep = 'precondition: the admin invites a second Northwind clinician who works no queue (queues {})';
  if (northwindRef && clinicianPolicy?.id) {
    const email = `lane-outsider-${Date.now()}@northwind.example`;
    try {
      const invited = await adminWrite(
        'POST',
        `admin/projects/${projectId}/invite`,
        clinicianInvite({
          firstName: OUTSIDER.firstName,
          lastName: OUTSIDER.lastName,
          email,
          password: DEMO_PASSWORD,
          policy: `AccessPolicy/${clinicianPolicy.id}`,
          organization: northwindRef,
          queues: [],
        }),
      );
      if (invited.status !== 200 && invited.status !== 201) {
        row(outsiderStep, 'FAILED', `admin/projects/:id/invite: ${describe(invited)}`);
      } else {
        const outsider = await signIn(baseUrl, projectId, 'the Northwind clinician outside the queue', email);
        people.set('outsider', outsider);
        row(outsiderStep, 'ok', `${outsider.profile}, clinician policy, organization ${northwindRef}; signed in`);
      }
    } catch (err) {
      row(outsiderStep, 'FAILED', message(err));
    }
  } else {
    row(outsiderStep, 'FAILED', 'no Northwind Organization or clinician AccessPolicy found by provisioning tag');
  }
  const queued =
    patient && queueRef
      ? await adminCreate<Task>(
          'the admin issues a ready review-intake Task in the Northwind intake queue, for the journey patient',
          {
            resourceType: 'Task',
            ...(tenantAccounts?.length ? { meta: { accounts: tenantAccounts } } : {}),
            status: 'ready',
            intent: 'order',
            priority: 'routine',
            code: reviewIntake,
            description: 'Review the completed intake (lane, made by the admin)',
            for: { reference: patient },
            authoredOn: new Date().toISOString(),
            owner: { reference: queueRef },
          },
        )
      : undefined;
  const queuedRef = queued?.id ? `Task/${queued.id}` : undefined;
  const noQueued = patient
    ? 'the admin could not issue the queue task (see the precondition row)'
    : 'the journey did not make it';
  const outsider = people.get('outsider');
  await attack(
    "the Northwind clinician outside the queue claims the admin's ready review-intake Task in the Northwind intake queue (owner herself, in-progress)",
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, owner: { reference: a.profile }, status: 'in-progress' }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue adds a note to that queue Task (owner and status unchanged)',
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, note: [{ text: 'looked at it (lane attack)' }] }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue creates a plain Task (no task kind), ready, owned by the Northwind intake queue',
    { attacker: 'outsider', target: patient && queueRef ? queueRef : undefined },
    (a, t) =>
      direct(a, 'POST', 'Task', {
        ...taskFor(a, { status: 'ready', code: { text: 'Call the patient back (lane attack)' } }),
        owner: { reference: t },
      }),
    'rejected',
  );
  // So that her refusals are the queue's: the same Task, owned by herself, is hers to create.
  await control(
    'the Northwind clinician outside the queue creates that plain Task owned by herself instead',
    outsider,
    patient,
    () =>
      direct(
        outsider as Person,
        'POST',
        'Task',
        taskFor(outsider as Person, { status: 'ready', code: { text: 'Call the patient back (lane control)' } }),
      ),
    { status: 201 },
  );
  /** The queue task as the admin reads it now, compared with what it should still be. */
  const queuedNow = async (step: string, expected: Task | undefined, owner: string | undefined, status: string) => {
    if (!queuedRef || !expected) {
      return;
    }
    const now = (await ctx.adminGet(`fhir/R4/${queuedRef}`)).body as Task | undefined;
    const same =
      now?.meta?.versionId === expected.meta?.versionId &&
      now?.owner?.reference === owner &&
      now?.status === status &&
      !now?.note;
    row(
      step,
      same ? 'ok' : 'FAILED',
      `${queuedRef}: ${now?.status}, owner ${now?.owner?.reference}, ${now?.note?.length ?? 0} note(s); version ${now?.meta?.versionId}${same ? ' as expected' : ` (expected ${expected.meta?.versionId}, ${status}, owner ${owner})`}`,
    );
  };
  if (outsider) {
    await queuedNow(
      "the refused writes of the clinician outside the queue changed nothing (the admin's version)",
      queued,
      queueRef,
      'ready',
    );
  }
  const otherQueue =
    queuedRef && northwindRef
      ? await adminCreate<CareTeam>('the admin makes another Northwind queue (a CareTeam no clinician works)', {
          resourceType: 'CareTeam',
          meta: { accounts: [{ reference: northwindRef }] },
          status: 'active',
          name: 'Another Northwind queue (lane)',
          category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }] }],
          managingOrganization: [{ reference: northwindRef }],
        })
      : undefined;
  const claim = await control(
    "the Northwind clinician, who works the queue, claims the admin's queue Task (owner herself, in-progress)",
    clinician,
    queuedRef,
    () =>
      direct(clinician as Person, 'PUT', queuedRef as string, {
        ...queued,
        owner: { reference: (clinician as Person).profile },
        status: 'in-progress',
        executionPeriod: { start: new Date().toISOString() },
      }),
    { missing: noQueued },
  );
  const claimed = claim?.status === 200 ? (claim.body as Task) : undefined;
  await attack(
    `the Northwind clinician, having claimed it, moves it to another queue of her tenant she does not work (${otherQueue?.id ? `CareTeam/${otherQueue.id}` : '?'}, ready)`,
    {
      attacker: 'northwind-clinician',
      target: claimed && otherQueue?.id ? queuedRef : undefined,
      missing: claimed ? 'the admin could not make the other queue' : 'her claim (the control above) failed',
    },
    (a, t) => direct(a, 'PUT', t, { ...claimed, owner: { reference: `CareTeam/${otherQueue?.id}` }, status: 'ready' }),
    'rejected',
  );
  if (claimed) {
    await queuedNow(
      "the refused move changed nothing (the claim's version)",
      claimed,
      clinician?.profile,
      'in-progress',
    );
  }
  const unclaim = await control(
    'the Northwind clinician unclaims it: back to the Northwind intake queue, ready',
    clinician,
    claimed ? queuedRef : undefined,
    () =>
      direct(clinician as Person, 'PUT', queuedRef as string, {
        ...claimed,
        owner: { reference: queueRef },
        status: 'ready',
      }),
    { missing: 'her claim (the control above) failed' },
  );
  if (unclaim?.status === 200) {
    await queuedNow(
      'the queue Task ends where it began: ready, owned by the Northwind intake queue',
      unclaim.body as Task,
      queueRef,
      'ready',
    );
  }
  return { queueRef, northwindRef };
}
