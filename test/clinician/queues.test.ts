import { normalizeErrorString } from '@medplum/core';
import type { Condition, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueType } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { OPTION_ITEM } from '../../contracts/work-forms';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import { changesSince, describeChange, storedResource, storeMark } from '../support/attack-store';
import type { DemoActor } from '../support/backend';
import { demoClinician, freshClinician, intakeQueue, reviewTask } from '../support/clinicians';
import { reconciler } from '../support/deliveries';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { completeTasks, startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';
import { AMLODIPINE, assigned, formOf } from '../support/spine';

/**
 * Care-team queues (issue 15 items 7 and 9, JOURNEY C, F, J): clinician work owned by the tenant's queue
 * is claimed by one member, unclaimed back, completed by its owner; every step a plain FHIR write with
 * the clinician's own token, as Medplum's app makes it, allowed or refused by the clinician policy
 * (src/provision/definition.ts QUEUE_TRANSITIONS) and nothing else.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

/** What a refused write answers, directly on Medplum: its HTTP status. */
async function refused(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    return normalizeErrorString(err);
  }
  throw new Error('the write was accepted');
}

/** A raw PUT of the task as Medplum's app could send it, with the clinician's token. */
const put = (clinician: Clinician, task: Task, ifMatch = true) =>
  direct(gw.backend, clinician.medplum.getAccessToken() as string, 'PUT', fhirPath(`Task/${task.id}`), {
    body: task,
    headers: ifMatch ? { 'if-match': `W/"${task.meta?.versionId}"` } : {},
  });

/** Versions written of a task since the mark (every write is one history row). */
const versionsSince = (mark: number, task: Task): number =>
  (
    gw.backend.db.reader
      .prepare("SELECT count(*) AS n FROM history WHERE seq > ? AND type = 'Task' AND id = ?")
      .get(mark, task.id as string) as { n: number }
  ).n;

/**
 * A fresh patient of northwind who has done the weight intake through the gateway (answers, then her
 * weight), as test/gateway/tasks.test.ts does: her last task issues the review in the intake queue.
 */
async function completedIntake(): Promise<DemoActor> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const { tasks } = await startAssessment(gw, patient, 'assessments/weight-intake');
  await completeTasks(gw, patient, tasks, { 'http://loinc.org|29463-7': 80 });
  return patient;
}

const stored = (task: Task) => storedResource(gw.backend, 'Task', task.id as string) as Task;

describe('a demo clinician works her tenant’s queue', () => {
  it('signs in through Medplum’s login, sees the intake review the patient’s last task issued, claims it, assigns a Condition and completes it', async () => {
    const patient = await completedIntake();

    const clinician = await demoClinician(gw.backend, 'northwind');
    const queue = await intakeQueue(gw.backend, 'northwind');
    expect((await clinician.queues()).map((q) => q.id)).toEqual([queue.id]);
    const review = (await clinician.queue()).find((t) => t.for?.reference === `Patient/${patient.patient.id}`);
    // Waiting in the queue (its performerType), owned by nobody until a member takes it (issue 48).
    expect(review).toMatchObject({
      status: 'ready',
      performerType: [
        {
          coding: expect.arrayContaining([
            { system: SYSTEMS.queue, code: `CareTeam/${queue.id}`, display: queue.name },
          ]),
        },
      ],
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
    });
    expect(review?.owner).toBeUndefined();
    const taskId = review?.id as string;

    const claimed = await clinician.claim(taskId);
    expect(claimed).toMatchObject({ status: 'in-progress', owner: clinician.profile });
    expect((await clinician.queue()).map((t) => t.id)).not.toContain(taskId);
    expect((await clinician.claimed()).map((t) => t.id)).toContain(taskId);

    // The review's outcome: a Condition she writes for her patient (a plain FHIR create), then the task's output.
    const condition = await clinician.medplum.createResource<Condition>({
      resourceType: 'Condition',
      subject: { reference: `Patient/${patient.patient.id}` },
      code: { coding: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'I10' }] },
      verificationStatus: {
        coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'confirmed' }],
      },
    });
    const completed = await clinician.complete(taskId, [
      { type: { text: 'condition' }, valueReference: { reference: `Condition/${condition.id}` } },
    ]);
    expect(completed).toMatchObject({
      status: 'completed',
      owner: clinician.profile,
      output: [{ valueReference: { reference: `Condition/${condition.id}` } }],
    });
    expect(stored(completed).meta?.versionId).toBe(completed.meta?.versionId);
  });

  it('unclaims: the task goes back to the queue it came from, ready, for any member to claim', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const task = await reviewTask(gw.backend, patient);
    const [me, colleague] = [
      await demoClinician(gw.backend, 'northwind'),
      await freshClinician(gw.backend, 'northwind'),
    ];
    await me.claim(task.id);
    const back = await me.unclaim(task.id);
    expect(back).toMatchObject({ status: 'ready', performerType: task.performerType });
    expect(back.owner).toBeUndefined();
    expect((await colleague.queue()).map((t) => t.id)).toContain(task.id);
    expect(await colleague.claim(task.id)).toMatchObject({ status: 'in-progress', owner: colleague.profile });
  });
});

describe('two clinicians claim one task at once', () => {
  it('exactly one owner; the other is refused (412 when both read the ready version, else refused before writing) and nothing else changed', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    for (let round = 0; round < 5; round++) {
      const task = await reviewTask(gw.backend, patient);
      const [a, b] = [await demoClinician(gw.backend, 'northwind'), await freshClinician(gw.backend, 'northwind')];
      const mark = storeMark(gw.backend);
      const results = await Promise.allSettled([a.claim(task.id), b.claim(task.id)]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      const winner = results[0].status === 'fulfilled' ? a : b;
      expect(stored(task)).toMatchObject({ status: 'in-progress', owner: winner.profile });
      // 412 when both read the ready version; 403 or the helper's refusal when the loser read after the win.
      expect(normalizeErrorString(lost[0].reason)).toMatch(/Precondition Failed|version|Forbidden|cannot be claimed/i);
      expect(changesSince(gw.backend, mark).map((c) => `${c.type}/${c.id}`)).toEqual([`Task/${task.id}`]);
      expect(versionsSince(mark, task)).toBe(1);
    }
  });

  it('20 members claiming one task at once: one owner, the task written once', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
    const task = await reviewTask(gw.backend, patient);
    const members = await Promise.all(Array.from({ length: 20 }, () => freshClinician(gw.backend, 'southridge')));
    const mark = storeMark(gw.backend);
    const results = await Promise.allSettled(members.map((m) => m.claim(task.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const owner = stored(task).owner?.reference;
    expect(members.map((m) => m.profile.reference)).toContain(owner);
    expect(changesSince(gw.backend, mark).map((c) => `${c.type}/${c.id}`)).toEqual([`Task/${task.id}`]);
    expect(versionsSince(mark, task)).toBe(1);
  });

  it('a second claim without If-Match, after the first, is 403: the task is no longer unowned (%before is the stored version, packages/server/src/fhir/repo.ts)', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const task = await reviewTask(gw.backend, patient);
    const [a, b] = [await demoClinician(gw.backend, 'northwind'), await freshClinician(gw.backend, 'northwind')];
    const stale = await b.medplum.readResource('Task', task.id);
    await a.claim(task.id);
    const mark = storeMark(gw.backend);
    const answer = await put(b, { ...stale, owner: b.profile, status: 'in-progress' }, false);
    expect(answer.status).toBe(403);
    expect(changesSince(gw.backend, mark)).toEqual([]);
    expect(stored(task).owner).toEqual(a.profile);
  });
});

describe('what a clinician of the same tenant cannot do, directly on Medplum (QUEUE_TRANSITIONS: %before and %after bound as packages/server/src/fhir/repo.ts binds them, %profile substituted as packages/server/src/fhir/accesspolicy.ts does)', () => {
  it('claim for someone else, steal a claimed task, complete or unclaim a task she does not own, complete without claiming', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const ready = await reviewTask(gw.backend, patient);
    const [me, colleague] = [
      await demoClinician(gw.backend, 'northwind'),
      await freshClinician(gw.backend, 'northwind'),
    ];
    const claimedByColleague = await colleague.claim((await reviewTask(gw.backend, patient)).id);
    const mark = storeMark(gw.backend);
    const attempts: [string, Task][] = [
      ['claim for a colleague, started', { ...ready, owner: colleague.profile, status: 'in-progress' }],
      ['in progress while the queue holds it', { ...ready, status: 'in-progress' }],
      [
        'move it to another queue',
        { ...ready, performerType: [{ coding: [{ system: SYSTEMS.queue, code: 'CareTeam/elsewhere' }] }] },
      ],
      ['take it out of its queue', { ...ready, performerType: undefined }],
      ['hand it to someone outside its queue', { ...ready, owner: { reference: 'Practitioner/someone' } }],
      ['complete without claiming', { ...ready, status: 'completed' }],
      ['claim and complete in one write', { ...ready, owner: me.profile, status: 'completed' }],
      ['cancel queue work', { ...ready, status: 'cancelled' }],
      ['steal a claimed task', { ...claimedByColleague, owner: me.profile }],
      ['complete a colleague’s task', { ...claimedByColleague, status: 'completed' }],
      ['unclaim a colleague’s task', { ...claimedByColleague, owner: undefined, status: 'ready' }],
      ['edit a colleague’s task', { ...claimedByColleague, description: 'mine now' }],
      ['hand a colleague’s task to a third', { ...claimedByColleague, owner: { reference: 'Practitioner/someone' } }],
    ];
    for (const [why, body] of attempts) {
      const answer = await put(me, body);
      expect(answer.status, why).toBe(403);
    }
    expect(changesSince(gw.backend, mark).map(describeChange)).toEqual([]);
    // Taking it without starting it is a claim (the Provider app saves the assignee alone, then the status).
    const taken = await put(me, { ...ready, owner: me.profile });
    expect(taken.status, taken.text).toBe(200);
    const started = await put(me, { ...(taken.body as Task), status: 'in-progress' });
    expect(started.status, started.text).toBe(200);
    // The helper refuses the same before sending anything.
    expect(await refused(me.complete((await reviewTask(gw.backend, patient)).id, []))).toMatch(/cannot be completed/);
    expect(await refused(me.unclaim(claimedByColleague.id))).toMatch(/cannot be unclaimed/);
    expect(await refused(me.claim(claimedByColleague.id))).toMatch(/cannot be claimed/);
  });

  it('creates no work already in a colleague’s hands, nor in progress for a queue', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const [me, colleague] = [
      await demoClinician(gw.backend, 'northwind'),
      await freshClinician(gw.backend, 'northwind'),
    ];
    const queue = await intakeQueue(gw.backend, 'northwind');
    const base: Task = {
      resourceType: 'Task',
      intent: 'order',
      status: 'ready',
      for: { reference: `Patient/${patient.patient.id}` },
    };
    const token = me.medplum.getAccessToken() as string;
    const create = (task: Task) => direct(gw.backend, token, 'POST', fhirPath('Task'), { body: task });
    const inQueue = { ...base, performerType: queueType(queue) };
    expect((await create({ ...base, owner: colleague.profile })).status).toBe(403);
    expect((await create({ ...inQueue, status: 'in-progress' })).status).toBe(403);
    expect((await create({ ...base, status: 'completed' })).status).toBe(403);
    // A queue as owner is the old model: refused (work waits in its queue unowned).
    expect((await create({ ...base, owner: { reference: `CareTeam/${queue.id}` } })).status).toBe(403);
    // Her own, or the queue's ready work: allowed.
    expect((await create(inQueue)).status).toBe(201);
    expect((await create({ ...base, status: 'in-progress', owner: me.profile })).status).toBe(201);
  });

  it('still pauses and resumes a patient’s task (ready <-> on-hold), and cannot complete it (she does not own it)', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const me = await demoClinician(gw.backend, 'northwind');
    const task = await gw.backend.systemRepo.createResource<Task>({
      resourceType: 'Task',
      meta: {
        project: gw.backend.project.id,
        accounts: [patient.patient.managingOrganization as { reference: string }],
      },
      status: 'ready',
      intent: 'order',
      for: { reference: `Patient/${patient.patient.id}` },
      owner: { reference: `Patient/${patient.patient.id}` },
    });
    const paused = await put(me, { ...task, status: 'on-hold' });
    expect(paused.status).toBe(200);
    const resumed = await put(me, { ...(paused.body as Task), status: 'ready' });
    expect(resumed.status).toBe(200);
    expect((await put(me, { ...(resumed.body as Task), status: 'completed' })).status).toBe(403);
    expect((await put(me, { ...(resumed.body as Task), owner: me.profile, status: 'in-progress' })).status).toBe(403);
  });
});

describe('nobody outside the queue’s tenant, and no patient, touches its work', () => {
  it('the clinician of the other tenant neither sees it in her queue nor reads, searches, claims or completes it', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const task = await reviewTask(gw.backend, patient);
    const other = await demoClinician(gw.backend, 'southridge');
    const token = other.medplum.getAccessToken() as string;
    expect((await other.queue()).map((t) => t.id)).not.toContain(task.id);
    expect((await direct(gw.backend, token, 'GET', fhirPath(`Task/${task.id}`))).status).toBe(404);
    const search = await direct(gw.backend, token, 'GET', fhirPath(`Task?_id=${task.id}`));
    expect((search.body as { entry?: unknown[] }).entry ?? []).toEqual([]);
    const mark = storeMark(gw.backend);
    for (const body of [
      { ...task, owner: other.profile, status: 'in-progress' },
      { ...task, status: 'completed' },
    ] as Task[]) {
      expect([403, 404]).toContain((await put(other, body)).status);
    }
    expect(await refused(other.claim(task.id))).toMatch(/not found/i);
    expect(changesSince(gw.backend, mark)).toEqual([]);
  });

  it('the patient it is about cannot claim, complete or edit it, directly on Medplum or through the gateway', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const task = await reviewTask(gw.backend, patient);
    const mark = storeMark(gw.backend);
    for (const body of [
      { ...task, owner: { reference: `Patient/${patient.patient.id}` }, status: 'in-progress' },
      { ...task, status: 'completed' },
      { ...task, description: 'done' },
    ] as Task[]) {
      const headers = { 'if-match': `W/"${task.meta?.versionId}"` };
      const around = await direct(gw.backend, patient.token, 'PUT', fhirPath(`Task/${task.id}`), { body, headers });
      expect(around.status).toBe(403);
      const viaGateway = await gw.call('PUT', `/v1/fhir/Task/${task.id}`, { token: patient.token, body, headers });
      expect(viaGateway.status).toBe(405);
    }
    expect(changesSince(gw.backend, mark)).toEqual([]);
  });
});

describe('taking and handing over work as the Provider app does it (issue 48): the assignee, one PUT of the whole task, no If-Match', () => {
  it('takes unowned queue work by picking herself, releases it by clearing the assignee, hands it to a colleague of the queue', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const colleague = await freshClinician(gw.backend, 'northwind');
    const me = await demoClinician(gw.backend, 'northwind');
    const task = await reviewTask(gw.backend, patient);
    // Take: the assignee set to herself, nothing else.
    const taken = await put(me, { ...task, owner: me.profile }, false);
    expect(taken.status, taken.text).toBe(200);
    // Release: the assignee cleared.
    const { owner: _owner, ...released } = taken.body as Task;
    const back = await put(me, released, false);
    expect(back.status, back.text).toBe(200);
    expect(stored(task).owner).toBeUndefined();
    // Hand over unowned work, and work of her own (in progress), to a colleague who works the queue.
    const handed = await put(me, { ...(back.body as Task), owner: colleague.profile }, false);
    expect(handed.status, handed.text).toBe(200);
    expect(stored(task)).toMatchObject({ owner: colleague.profile, status: 'ready' });
    const second = await reviewTask(gw.backend, patient);
    await me.claim(second.id);
    expect(await me.handOver(second.id, colleague.profile)).toMatchObject({
      owner: colleague.profile,
      status: 'in-progress',
    });
    // The colleague now works it: completes it as her own.
    expect(await colleague.complete(second.id, [])).toMatchObject({ status: 'completed', owner: colleague.profile });
  });

  it('Mark as Completed on a selection: the app’s second save of the task, from its copy from before the platform marked it composed, changes nothing (200, no new version) instead of erasing the mark (403)', async () => {
    // Medplum's Provider app (5.1.29 TaskInputNote handleMarkAsCompleted) saves {...task, status: completed}
    // at once, then the same copy again 500 ms later (useDebouncedUpdateResource); compose-offer, woken by
    // the completed answers, may mark the selection in between (at once on the embedded Medplum; 1.3 s
    // later on a real Medplum 5.1.29, where the second save came first). Both servers judge the second
    // save the same way (packages/server/src/fhir/repo.ts updateResourceImpl: readonly fields restored
    // from the stored version, then isNotModified, then isResourceWriteable).
    const me = await demoClinician(gw.backend, 'northwind');
    const { selection } = await assigned(gw, me);
    const form = await formOf(gw, selection);
    const option = form?.item
      ?.find((i) => i.linkId === OPTION_ITEM)
      ?.answerOption?.find((o) => o.valueCoding?.code === AMLODIPINE);
    const response = await me.medplum.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      questionnaire: form?.url,
      status: 'in-progress',
      authored: new Date().toISOString(),
      source: me.profile,
      item: [{ linkId: OPTION_ITEM, answer: [{ valueCoding: option?.valueCoding }] }],
    });
    const output = [
      {
        type: { text: 'QuestionnaireResponse' },
        valueReference: { reference: `QuestionnaireResponse/${response.id}` },
      },
    ];
    const opened = await put(me, { ...selection, output }, false);
    expect(opened.status, opened.text).toBe(200);
    const taken = await put(me, { ...(opened.body as Task), owner: me.profile }, false);
    expect(taken.status, taken.text).toBe(200);
    // Mark as Completed: the task, then her answers; the platform composes the offer and marks the task.
    const completed = { ...(taken.body as Task), status: 'completed' as const };
    const first = await put(me, completed, false);
    expect(first.status, first.text).toBe(200);
    await me.medplum.updateResource<QuestionnaireResponse>({ ...response, status: 'completed' });
    await gw.backend.subscriptions.idle();
    const marked = stored(selection);
    expect(marked.businessStatus?.text).toBe('offer-composed');
    // The debounced second save: the copy she completed, without the mark.
    const mark = storeMark(gw.backend);
    const second = await put(me, completed, false);
    expect(second.status, second.text).toBe(200);
    expect(versionsSince(mark, selection)).toBe(0);
    expect(stored(selection)).toEqual(marked);
    // She still cannot change the mark itself: whatever she sends, the stored mark is kept.
    const rewritten = await put(me, { ...marked, businessStatus: { text: 'override-required' } }, false);
    expect((rewritten.body as Task).businessStatus).toEqual(marked.businessStatus);
    expect(stored(selection).businessStatus).toEqual(marked.businessStatus);
  });

  it('refuses a hand-over to anyone who does not work the queue, by anyone who does not hold the work, and across tenants', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const outsider = await freshClinician(gw.backend, 'northwind', { member: false });
    const colleague = await freshClinician(gw.backend, 'northwind');
    const me = await demoClinician(gw.backend, 'northwind');
    const southridge = await demoClinician(gw.backend, 'southridge');
    const task = await reviewTask(gw.backend, patient);
    const heldByColleague = await colleague.claim((await reviewTask(gw.backend, patient)).id);
    const mark = storeMark(gw.backend);
    for (const [why, who, body] of [
      ['to a clinician of her tenant outside the queue', me, { ...task, owner: outsider.profile }],
      ['to the other tenant’s clinician', me, { ...task, owner: southridge.profile }],
      ['a colleague’s work, handed on by someone else', me, { ...heldByColleague, owner: outsider.profile }],
      ['by a clinician outside the queue, to herself', outsider, { ...task, owner: outsider.profile }],
      ['by the other tenant’s clinician, to herself', southridge, { ...task, owner: southridge.profile }],
    ] as const) {
      const answer = await put(who, body as Task, false);
      expect([403, 404], `${why}: ${answer.status} ${answer.text}`).toContain(answer.status);
    }
    expect(changesSince(gw.backend, mark).map(describeChange)).toEqual([]);
    // The other tenant's clinician does not even see it.
    expect(
      (await direct(gw.backend, southridge.medplum.getAccessToken() as string, 'GET', fhirPath(`Task/${task.id}`)))
        .status,
    ).toBe(404);
  });
});

describe('due work first (issue 48)', () => {
  it('every piece of clinician work carries its due date and priority; an intake review past due is marked urgent and overdue, once, and comes first on the board', async () => {
    const patient = await completedIntake();
    const clinician = await demoClinician(gw.backend, 'northwind');
    const review = (await clinician.queue()).find(
      (t) => t.for?.reference === `Patient/${patient.patient.id}`,
    ) as Task & { id: string };
    // Due 48 hours after it was issued (DUE_WITHIN_HOURS), routine.
    const issued = Date.parse(review.authoredOn as string);
    expect(Date.parse(review.restriction?.period?.end as string) - issued).toBe(48 * 3600_000);
    expect(review.priority).toBe('routine');
    const reconcile = reconciler(gw.backend);
    await reconcile();
    expect(stored(review).businessStatus).toBeUndefined();
    // Time passes: the review is past its due date.
    const due = new Date(Date.now() - 60_000).toISOString();
    await gw.backend.systemRepo.updateResource<Task>({ ...stored(review), restriction: { period: { end: due } } });
    await reconcile();
    const marked = stored(review);
    expect(marked).toMatchObject({ status: 'ready', priority: 'urgent', businessStatus: { text: 'overdue' } });
    expect(marked.owner).toBeUndefined();
    await reconcile();
    expect(stored(review).meta?.versionId).toBe(marked.meta?.versionId);
    // The Provider app's board: the latest changed first (Task?_sort=-_lastUpdated): the overdue mark is its latest change.
    const board = await clinician.medplum.searchResources(
      'Task',
      { status: 'ready', _sort: '-_lastUpdated', _count: '20' },
      { cache: 'no-cache' },
    );
    expect(board[0]?.id).toBe(review.id);
  });
});
