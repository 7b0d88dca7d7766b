// QUEUE_CREATES and queue enforcement: the task kinds only bots issue, and a queue's work only its clinicians touch.
import type { CareTeam, ProjectMembership, Resource, Task } from '@medplum/fhirtypes';
import { queueOfTask, queueType } from '../../bots/lib/queues';
import { QUEUE_STAFF_PARAMETER, SYSTEMS } from '../../contracts/systems';
import { clinicianInvite } from '../../src/clinician';
import { DEMO_PASSWORD } from '../../src/provision/demo';
import type { AttackKit } from './attack-kit';
import { type AttackContext, describe, entriesOf, medplumCall, message, type Person, row, signIn } from './common';

/**
 * The task kinds a clinician may not create, then the queue a clinician outside it may not take, edit or
 * add to, and the one who works it takes, may not move elsewhere, and releases (issue 48: queue work waits
 * in its queue, `performerType` SYSTEMS.queue `CareTeam/<id>`, with no owner until a clinician takes it);
 * then the hand-over: the unowned work handed to a colleague of the queue (her membership's `queueStaff`),
 * never to a clinician outside it, nor taken by the other tenant's clinician. What later checks need: the
 * Northwind intake queue and the Northwind Organization.
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
  /** Where a task waits, in a few words: its queue (performerType SYSTEMS.queue) and its owner. */
  const whereSaid = (t: Task | undefined) =>
    `queue ${t ? (queueOfTask(t) ?? 'none') : '?'}${t && queueOfTask(t) === queueRef ? ' (the Northwind intake queue)' : ''}, owner ${t?.owner?.reference ?? 'none'}`;
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
          staff: [],
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
            // Waiting in the queue, owned by nobody (as bots/lib/queues.ts clinicianTask issues it).
            performerType: queueType(intakeQueue as CareTeam),
          },
        )
      : undefined;
  const queuedRef = queued?.id ? `Task/${queued.id}` : undefined;
  const noQueued = patient
    ? 'the admin could not issue the queue task (see the precondition row)'
    : 'the journey did not make it';
  const outsider = people.get('outsider');
  await attack(
    "the Northwind clinician outside the queue takes the admin's ready review-intake Task waiting unowned in the Northwind intake queue (owner herself, in-progress)",
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, owner: { reference: a.profile }, status: 'in-progress' }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue adds a note to that queue Task (no owner, status unchanged)',
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, note: [{ text: 'looked at it (lane attack)' }] }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue creates a plain Task (no task kind), ready, waiting unowned in the Northwind intake queue (performerType the queue)',
    { attacker: 'outsider', target: patient && queueRef ? queueRef : undefined },
    (a) => {
      const { owner: _owner, ...unowned } = taskFor(a, {
        status: 'ready',
        code: { text: 'Call the patient back (lane attack)' },
      });
      return direct(a, 'POST', 'Task', { ...unowned, performerType: queueType(intakeQueue as CareTeam) });
    },
    'rejected',
  );
  // A queue as owner is the old model (before issue 48): refused even to a clinician who works the queue.
  await attack(
    'the Northwind clinician, who works the queue, creates a plain Task (no task kind), ready, owned by the Northwind intake queue (owner the CareTeam: the queue model before issue 48)',
    { attacker: 'northwind-clinician', target: patient && queueRef ? queueRef : undefined },
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
  /**
   * The queue task as the admin reads it now, compared with what it should still be: the version, still
   * in the Northwind intake queue, `owner` (undefined: no owner), `status`, no note.
   */
  const queuedNow = async (step: string, expected: Task | undefined, owner: string | undefined, status: string) => {
    if (!queuedRef || !expected) {
      return;
    }
    const now = (await ctx.adminGet(`fhir/R4/${queuedRef}`)).body as Task | undefined;
    const same =
      now?.meta?.versionId === expected.meta?.versionId &&
      now !== undefined &&
      queueOfTask(now) === queueRef &&
      now.owner?.reference === owner &&
      now.status === status &&
      !now.note;
    row(
      step,
      same ? 'ok' : 'FAILED',
      `${queuedRef}: ${now?.status}, ${whereSaid(now)}, ${now?.note?.length ?? 0} note(s); version ${now?.meta?.versionId}${same ? ' as expected' : ` (expected ${expected.meta?.versionId}, ${status}, queue ${queueRef}, owner ${owner ?? 'none'})`}`,
    );
  };
  if (outsider) {
    await queuedNow(
      "the refused writes of the clinician outside the queue changed nothing (the admin's version: ready, unowned, in the Northwind intake queue)",
      queued,
      undefined,
      'ready',
    );
  }
  const otherQueue =
    queuedRef && northwindRef
      ? await adminCreate<CareTeam>(
          'the admin makes another Northwind queue (a CareTeam no clinician works, of a kind of its own: SYSTEMS.careQueue|lane-other-queue)',
          {
            resourceType: 'CareTeam',
            meta: { accounts: [{ reference: northwindRef }] },
            status: 'active',
            name: 'Another Northwind queue (lane)',
            // A kind of its own: the bots find a tenant's queue by its kind (bots/lib/queues.ts tenantQueue), and
            // a second intake-review queue would take the work later checks expect in the provisioned one.
            category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'lane-other-queue' }] }],
            managingOrganization: [{ reference: northwindRef }],
          },
        )
      : undefined;
  const claim = await control(
    "the Northwind clinician, who works the queue, takes the admin's queue Task (owner herself, in-progress)",
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
    `the Northwind clinician, having taken it, moves it to another queue of her tenant she does not work (performerType ${otherQueue?.id ? `CareTeam/${otherQueue.id}` : '?'}, owner removed, ready)`,
    {
      attacker: 'northwind-clinician',
      target: claimed && otherQueue?.id ? queuedRef : undefined,
      missing: claimed ? 'the admin could not make the other queue' : 'her take (the control above) failed',
    },
    (a, t) => {
      const { owner: _owner, ...rest } = claimed as Task;
      return direct(a, 'PUT', t, { ...rest, performerType: queueType(otherQueue as CareTeam), status: 'ready' });
    },
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
    'the Northwind clinician releases it: owner removed, ready (it waits in the Northwind intake queue again)',
    clinician,
    claimed ? queuedRef : undefined,
    () => {
      const { owner: _owner, ...rest } = claimed as Task;
      return direct(clinician as Person, 'PUT', queuedRef as string, { ...rest, status: 'ready' });
    },
    { missing: 'her take (the control above) failed' },
  );
  const released = unclaim?.status === 200 ? (unclaim.body as Task) : undefined;
  if (released) {
    await queuedNow(
      'the queue Task ends where it began: ready, unowned, in the Northwind intake queue',
      released,
      undefined,
      'ready',
    );
  }

  // The hand-over (issue 48): unowned queue work handed to a colleague of its queue, as the Provider app
  // does it (the assignee picked, one PUT of the whole task, no If-Match). Her membership's `queueStaff`
  // names who works each of her queues: the demo colleague provisioning makes in the same queue.
  const colleague = await queueColleague(ctx, kit, queueRef);
  const handOverTo = (person: Person | undefined, owner: string) =>
    direct(person as Person, 'PUT', queuedRef as string, { ...released, owner: { reference: owner } });
  const noRelease = 'the release (the control above) failed';
  const outsiderHandOver =
    'attack: the Northwind clinician hands the unowned queue Task to a clinician of her tenant outside the queue (PUT owner her, no If-Match, status unchanged): 403';
  if (!clinician || !released || !outsider) {
    row(
      outsiderHandOver,
      'not reached',
      !clinician
        ? 'the attacker could not sign in'
        : !released
          ? noRelease
          : 'the clinician outside the queue was not invited',
    );
  } else {
    try {
      const answer = await handOverTo(clinician, outsider.profile);
      row(
        outsiderHandOver,
        answer.status === 403 ? 'held' : 'FAILED',
        `owner ${outsider.profile}: expected 403, got ${describe(answer)}`,
      );
    } catch (err) {
      row(outsiderHandOver, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  await attack(
    'the Southridge clinician takes the unowned Northwind queue Task (PUT owner herself, no If-Match)',
    { attacker: 'southridge-clinician', target: released ? queuedRef : undefined, missing: noRelease },
    (a) => handOverTo(a, a.profile),
  );
  if (released) {
    await queuedNow(
      "the refused hand-over and take changed nothing (the release's version: ready, unowned, in the Northwind intake queue)",
      released,
      undefined,
      'ready',
    );
  }
  const handOverStep =
    'control: the Northwind clinician hands the unowned queue Task to a colleague of the queue (the demo colleague of the precondition row; PUT owner her, no If-Match, as the Provider app does): 200, ready, owned by the colleague, still in the Northwind intake queue';
  if (!clinician || !released || !colleague) {
    row(
      handOverStep,
      'not reached',
      !clinician ? 'could not sign in' : !released ? noRelease : 'no colleague of the queue (the precondition row)',
    );
  } else {
    try {
      const answer = await handOverTo(clinician, colleague.profile);
      const now = (await ctx.adminGet(`fhir/R4/${queuedRef}`)).body as Task | undefined;
      const good =
        answer.status === 200 &&
        now?.owner?.reference === colleague.profile &&
        now.status === 'ready' &&
        queueOfTask(now) === queueRef;
      row(
        handOverStep,
        good ? 'ok' : 'FAILED',
        `owner ${colleague.profile}: expected 200, got ${describe(answer)}; ${queuedRef}: ${now?.status}, ${whereSaid(now)}${now?.owner?.reference === colleague.profile ? ' (the colleague)' : ''}, version ${now?.meta?.versionId}`,
      );
    } catch (err) {
      row(handOverStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  return { queueRef, northwindRef };
}

/**
 * The demo Northwind clinician's colleague in the Northwind intake queue, as provisioning makes her
 * (src/provision/demo.ts, `demo-colleague-northwind`): a participant of the queue's CareTeam, and named with
 * the queue in the demo clinician's `queueStaff` (provisioning derives both from one list, apply.ts), so
 * that the demo clinician may hand the queue's work to her. One precondition row; undefined when not so.
 */
async function queueColleague(
  ctx: AttackContext,
  kit: AttackKit,
  queueRef: string | undefined,
): Promise<{ profile: string } | undefined> {
  const demo = kit.people.get('northwind-clinician');
  const step =
    "precondition: the demo Northwind clinician's colleague (provisioned: demo-colleague-northwind) works the Northwind intake queue: a participant of its CareTeam, and named with the queue in the demo clinician's queueStaff (her membership, as provisioning wrote it)";
  try {
    const colleague = await kit.byTag('Practitioner', 'demo-colleague-northwind');
    if (!queueRef || !demo || !colleague?.id) {
      throw new Error(
        !demo
          ? 'the Northwind clinician could not sign in'
          : !queueRef
            ? 'no Northwind intake queue found by provisioning tag'
            : 'no Practitioner tagged demo-colleague-northwind',
      );
    }
    const profile = `Practitioner/${colleague.id}`;
    const team = (await ctx.adminGet(`fhir/R4/${queueRef}`)).body as CareTeam | undefined;
    const participant = team?.participant?.some((p) => p.member?.reference === profile) ?? false;
    const membership = entriesOf(
      (await ctx.adminGet(`fhir/R4/ProjectMembership?profile=${encodeURIComponent(demo.profile)}`)).body,
    )[0] as ProjectMembership | undefined;
    const staff = membership?.access
      ?.flatMap((a) => a.parameter ?? [])
      .find((p) => p.name === QUEUE_STAFF_PARAMETER)?.valueString;
    const pair = `'${queueRef} ${profile}'`;
    const named = staff?.split(' | ').includes(pair) ?? false;
    row(
      step,
      participant && named ? 'ok' : 'FAILED',
      `${profile}${participant ? ` a participant of ${queueRef}` : ` NOT a participant of ${queueRef}`}; the demo clinician's ${membership?.id ? `ProjectMembership/${membership.id}` : 'membership (not found)'} queueStaff ${staff ?? 'absent'}${named ? '' : ` (NOT naming ${pair})`}`,
    );
    return participant && named ? { profile } : undefined;
  } catch (err) {
    row(step, 'FAILED', message(err));
    return undefined;
  }
}
