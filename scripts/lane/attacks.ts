import type {
  Bot,
  Bundle,
  CareTeam,
  DetectedIssue,
  Resource,
  Task,
  ValueSet,
  ValueSetExpansionContains,
} from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { clinicianInvite } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import { asyncVisitReviewed } from './async-review';
import {
  type Answer,
  type AttackContext,
  answerOf,
  DAY,
  describe,
  entriesOf,
  gatewayDescribe,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  REFUSED,
  REJECTED,
  register,
  row,
  signIn,
} from './common';
import { conditionRevised } from './condition-revised';
import { evidence } from './evidence';
import { idempotencyKeys } from './idempotency';
import { licensureAtCare } from './licensure';
import { orderTasks } from './orders';
import { addressNeeded, patientBounds } from './patient-bounds';
import { visitCompleted } from './visit-completed';
import { workForms } from './work-forms';

export async function attacks(ctx: AttackContext): Promise<void> {
  const { baseUrl, projectId, progress } = ctx;
  const people = new Map<string, Person>();
  for (const [key, who, email] of [
    ['alice', 'alice (Northwind patient)', demoEmail('alice', 'northwind')],
    ['bob', 'bob (Northwind patient)', demoEmail('bob', 'northwind')],
    ['carol', 'carol (Southridge patient)', demoEmail('carol', 'southridge')],
    ['northwind-clinician', 'the Northwind clinician', demoEmail('clinician', 'northwind')],
    ['southridge-clinician', 'the Southridge clinician', demoEmail('clinician', 'southridge')],
  ] as const) {
    try {
      people.set(key, await signIn(baseUrl, projectId, who, email));
    } catch (err) {
      row(`sign-in: ${who}`, 'FAILED', message(err));
    }
  }
  if (progress.token && progress.patient) {
    people.set('maya', { who: 'the journey patient', token: progress.token, profile: progress.patient });
  }

  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const gateway = async (person: Person, path: string) =>
    answerOf(await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `Bearer ${person.token}` } }));
  const viaGateway = (person: Person, path: string) => gateway(person, `/v1/fhir/${path}`);

  /**
   * One attack: `attacker` does `call`; held when Medplum (or the gateway) refuses it (403/404), or, for a
   * search, when nothing of `forbidden` comes back, or, for a write a writeConstraint or the validator
   * must stop (`rejected`), when it answers 400/403. `needs.missing` says why a target may be absent.
   */
  const attack = async (
    what: string,
    needs: { attacker?: string; target?: string; missing?: string },
    call: (attacker: Person, target: string) => Promise<Answer>,
    expect: 'refused' | 'nothing' | 'rejected' = 'refused',
  ): Promise<void> => {
    const attacker = needs.attacker ? people.get(needs.attacker) : undefined;
    if (!attacker || !needs.target) {
      row(
        `attack: ${what}`,
        'not reached',
        !attacker ? 'the attacker could not sign in' : (needs.missing ?? 'the journey did not make it'),
      );
      return;
    }
    try {
      const answer = await call(attacker, needs.target);
      const targetId = needs.target.split('/').pop() as string;
      const leaked =
        expect === 'nothing' && answer.status === 200 && entriesOf(answer.body).some((r) => r.id === targetId);
      const held =
        (expect === 'rejected' ? REJECTED : REFUSED).includes(answer.status) ||
        (expect === 'nothing' && answer.status === 200 && !leaked);
      const expected = { refused: '403/404', nothing: 'nothing of it', rejected: '403/400' }[expect];
      row(`attack: ${what}`, held ? 'held' : 'FAILED', `expected ${expected}, got ${describe(answer)}`);
    } catch (err) {
      row(`attack: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  /** What must still work, so that the refusals above are refusals of something real. */
  const control = async (
    what: string,
    person: Person | undefined,
    target: string | undefined,
    call: () => Promise<Answer>,
    expected: { status?: number; missing?: string } = {},
  ): Promise<Answer | undefined> => {
    if (!person || !target) {
      row(`control: ${what}`, 'not reached', !person ? 'could not sign in' : (expected.missing ?? 'nothing to read'));
      return undefined;
    }
    const status = expected.status ?? 200;
    try {
      const answer = await call();
      row(
        `control: ${what}`,
        answer.status === status ? 'ok' : 'FAILED',
        `expected ${status}, got ${describe(answer)}`,
      );
      return answer;
    } catch (err) {
      row(`control: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };

  const binary = progress.document; // Binary/<id>
  const patient = progress.patient;
  const response = progress.questionnaireResponse || undefined;
  const observation = patient
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${patient}&_count=1`)).body)[0]
    : undefined;
  const observationRef = observation ? `Observation/${observation.id}` : undefined;
  const maya = people.get('maya');

  // The journey patient's uploaded document (Binary.securityContext = her Patient): hers through
  // GET /v1/documents/{id} alone; nobody reads a Binary by id on Medplum (5.0.10 does not check its context).
  const documentPath = `/v1/documents/${binary?.split('/')[1]}`;
  await control('the journey patient reads her own document through GET /v1/documents/{id}', maya, binary, () =>
    gateway(maya as Person, documentPath),
  );
  // The record plane honours `_summary=count` (fb45500): no page size of the gateway's own after it, which
  // Medplum would read as a request for a page.
  const countStep =
    'control: the journey patient counts her Patient through the gateway (GET /v1/fhir/Patient?_summary=count): total 1, no entries';
  if (!maya) {
    row(countStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const counted = await viaGateway(maya, 'Patient?_summary=count');
      const bundle = counted.body as Bundle | undefined;
      const entries = bundle?.entry?.length ?? 0;
      const good = counted.status === 200 && bundle?.resourceType === 'Bundle' && bundle.total === 1 && entries === 0;
      row(
        countStep,
        good ? 'ok' : 'FAILED',
        `expected 200, a Bundle with total 1 and no entry; got ${describe(counted)}${bundle?.resourceType === 'Bundle' ? `, type ${bundle.type}, total ${bundle.total ?? 'absent'}, ${entries} entr${entries === 1 ? 'y' : 'ies'}` : ''}`,
      );
    } catch (err) {
      row(countStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const attacker of ['bob', 'carol']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads the journey patient's uploaded Binary directly`, { attacker, target: binary }, (a, t) =>
      direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the journey patient's uploaded Binary through GET /v1/fhir/Binary/{id}`,
      { attacker, target: binary },
      (a, t) => viaGateway(a, t),
    );
    await attack(
      `${who} reads the journey patient's document through GET /v1/documents/{id}`,
      { attacker, target: binary },
      (a) => gateway(a, documentPath),
    );
  }
  await attack(
    "the Southridge clinician reads the journey patient's uploaded Binary directly",
    { attacker: 'southridge-clinician', target: binary },
    (a, t) => direct(a, 'GET', t),
  );

  // Another patient's record.
  for (const [attacker, target, label] of [
    ['bob', patient, "the journey patient's Patient"],
    ['carol', patient, "the journey patient's Patient"],
    ['bob', response, "the journey patient's QuestionnaireResponse"],
    ['carol', response, "the journey patient's QuestionnaireResponse"],
    ['bob', observationRef, "the journey patient's Observation"],
    ['carol', observationRef, "the journey patient's Observation"],
  ] as const) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads ${label} directly`, { attacker, target }, (a, t) => direct(a, 'GET', t));
    await attack(`${who} reads ${label} through the gateway`, { attacker, target }, (a, t) => viaGateway(a, t));
  }
  const alice = people.get('alice');
  const aliceWeight = alice
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${alice.profile}&_count=1`)).body)[0]
    : undefined;
  await attack(
    "bob (Northwind patient) reads alice's Patient directly",
    { attacker: 'bob', target: alice?.profile },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "bob (Northwind patient) searches alice's Observations (Observation?subject=)",
    { attacker: 'bob', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a) => direct(a, 'GET', `Observation?subject=${alice?.profile}`),
    'nothing',
  );
  await attack(
    "carol (Southridge patient) reads alice's body-weight Observation directly",
    { attacker: 'carol', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );

  // A clinician of the other tenant.
  await control(
    'the Northwind clinician reads the journey patient (her tenant)',
    people.get('northwind-clinician'),
    patient,
    () => direct(people.get('northwind-clinician') as Person, 'GET', patient as string),
  );
  await attack(
    'the Southridge clinician reads the journey patient directly',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'the Southridge clinician searches the journey patient (Patient?_id=)',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', `Patient?_id=${t.split('/')[1]}`),
    'nothing',
  );
  await attack(
    "the Southridge clinician searches the journey patient's Observations",
    { attacker: 'southridge-clinician', target: observationRef },
    () => direct(people.get('southridge-clinician') as Person, 'GET', `Observation?subject=${patient}`),
    'nothing',
  );

  // The clinician's writes the policy narrows (src/provision/definition.ts, clinician policy).
  // MITIGATION_ONLY: a finding (DetectedIssue) changes only by appending mitigations, each authored by the
  // writer herself (`%profile`); the recorded ones stay. The lane has one clinician per tenant, so "a
  // colleague" is the visit practitioner of the journey's first free slot (a practitioner of her tenant's
  // visit team), else the Southridge clinician.
  const clinician = people.get('northwind-clinician');
  const findings = patient
    ? (entriesOf((await ctx.adminGet(`fhir/R4/DetectedIssue?patient=${patient}&_count=20`)).body) as DetectedIssue[])
    : [];
  const finding =
    findings.find((f) => f.code?.coding?.some((c) => c.code === 'potassium-sparing-diuretic')) ?? findings[0];
  const findingRef = finding ? `DetectedIssue/${finding.id}` : undefined;
  const noFinding = patient
    ? 'no DetectedIssue for the journey patient (see the precondition row)'
    : 'the journey did not make it';
  const colleague = progress.practitioner ?? people.get('southridge-clinician')?.profile;
  const mitigationBy = (author: string, text: string) => ({
    action: { text },
    date: new Date().toISOString(),
    author: { reference: author },
  });
  /** The finding as the clinician reads it now, with `change` applied to its mitigations, PUT back. */
  const mitigate = async (
    person: Person,
    target: string,
    change: (recorded: NonNullable<DetectedIssue['mitigation']>) => DetectedIssue['mitigation'],
  ): Promise<Answer> => {
    const current = await direct(person, 'GET', target);
    if (current.status !== 200) {
      // Not a refusal of the write: the row is FAILED ("the call threw"), never held.
      throw new Error(`she could not read ${target} to write it: ${describe(current)}`);
    }
    const issue = current.body as DetectedIssue;
    return direct(person, 'PUT', target, { ...issue, mitigation: change(issue.mitigation ?? []) });
  };
  await attack(
    `the Northwind clinician records a mitigation in a colleague's name (author ${colleague ?? '?'}) on the journey patient's finding`,
    { attacker: 'northwind-clinician', target: colleague ? findingRef : undefined, missing: noFinding },
    (a, t) => mitigate(a, t, (recorded) => [...recorded, mitigationBy(colleague as string, 'reviewed, proceed')]),
    'rejected',
  );
  const own = await control(
    "the Northwind clinician appends a mitigation of her own to the journey patient's finding",
    clinician,
    findingRef,
    () =>
      mitigate(clinician as Person, findingRef as string, (recorded) => [
        ...recorded,
        mitigationBy((clinician as Person).profile, 'Potassium monitored (lane control)'),
      ]),
    { missing: noFinding },
  );
  const ownVersion = own?.status === 200 ? (own.body as DetectedIssue) : undefined;
  const recorded = ownVersion?.mitigation;
  await attack(
    'the Northwind clinician rewrites the mitigation she recorded (action and author changed)',
    { attacker: 'northwind-clinician', target: recorded?.length ? findingRef : undefined, missing: noFinding },
    (a, t) =>
      mitigate(a, t, (now) =>
        now.map((m, i) =>
          i === now.length - 1 ? { ...m, action: { text: 'reviewed, proceed' }, author: { reference: colleague } } : m,
        ),
      ),
    'rejected',
  );
  if (findingRef && recorded) {
    const after = (await ctx.adminGet(`fhir/R4/${findingRef}`)).body as DetectedIssue | undefined;
    const same =
      after?.meta?.versionId === ownVersion?.meta?.versionId &&
      JSON.stringify(after?.mitigation) === JSON.stringify(recorded);
    row(
      'the refused mitigation writes changed nothing',
      same ? 'ok' : 'FAILED',
      `${findingRef}: ${after?.mitigation?.length ?? 0} mitigation(s), by ${after?.mitigation?.map((m) => m.author?.reference).join(', ') || 'nobody'}; version ${after?.meta?.versionId}${same ? ", the control's" : " (NOT the control's)"}`,
    );
  }

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
  const byTag = async (type: string, key: string): Promise<Resource | undefined> =>
    entriesOf(
      (await ctx.adminGet(`fhir/R4/${type}?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|${key}`)}`)).body,
    )[0];
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
          firstName: 'Olive',
          lastName: 'Outsider',
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

  // Clinician work as forms: who answers an intake review's form decides what eligibility does.
  await workForms(ctx, people, queueRef);

  // Terminology: the clinician policy reads, read-only, the ValueSets and CodeSystems Medplum
  // keeps in its R4 project (MEDPLUM_R4_PROJECT), so that Medplum's app can `ValueSet/$expand` a coded
  // field's binding; her own tenant's catalog stays hers (catalogReads), the other tenant's out of reach,
  // and a patient gains nothing of FHIR's own terminology.
  const TASK_STATUS_VS = 'http://hl7.org/fhir/ValueSet/task-status';
  const TASK_STATUS_CS = 'http://hl7.org/fhir/task-status';
  const expand = (person: Person, url: string, filter?: string) =>
    direct(
      person,
      'GET',
      `ValueSet/$expand?url=${encodeURIComponent(url)}${filter ? `&filter=${encodeURIComponent(filter)}` : ''}`,
    );
  /** The codes of an expansion, nested `contains` included. */
  const codesOf = (answer: Answer): string[] => {
    const codes: string[] = [];
    const walk = (list: ValueSetExpansionContains[] | undefined) => {
      for (const c of list ?? []) {
        if (c.code) {
          codes.push(c.code);
        }
        walk(c.contains);
      }
    };
    const body = answer.body as ValueSet | undefined;
    if (answer.status === 200 && body?.resourceType === 'ValueSet') {
      walk(body.expansion?.contains);
    }
    return codes;
  };
  /** An expansion in a few words: its total and its codes; anything else as `describe` says it. */
  const expansion = (answer: Answer): string => {
    const body = answer.body as ValueSet | undefined;
    if (answer.status !== 200 || body?.resourceType !== 'ValueSet') {
      return describe(answer);
    }
    const codes = codesOf(answer);
    const total = body.expansion?.total === undefined ? '' : `, total ${body.expansion.total}`;
    return `200, an expansion of ${codes.length} code(s)${total}: ${codes.slice(0, 15).join(', ') || 'none'}${codes.length > 15 ? ', …' : ''}`;
  };
  /** A row judged on what came back (not only its status): `judge` says whether it is as it must be. */
  const judged = async (
    kind: 'control' | 'attack',
    what: string,
    person: Person | undefined,
    call: (person: Person) => Promise<Answer>,
    expected: string,
    judge: (answer: Answer) => boolean | Promise<boolean>,
    note: (answer: Answer, pass: boolean) => string | Promise<string> = () => '',
  ): Promise<void> => {
    if (!person) {
      row(`${kind}: ${what}`, 'not reached', 'could not sign in');
      return;
    }
    try {
      const answer = await call(person);
      const pass = await judge(answer);
      const good = kind === 'control' ? 'ok' : 'held';
      row(
        `${kind}: ${what}`,
        pass ? good : 'FAILED',
        `expected ${expected}, got ${expansion(answer)}${await note(answer, pass)}`,
      );
    } catch (err) {
      row(`${kind}: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  const hasAll = (answer: Answer, codes: string[]) => codes.every((c) => codesOf(answer).includes(c));
  await judged(
    'control',
    `the Northwind clinician expands FHIR's ${TASK_STATUS_VS} (ValueSet/$expand)`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS),
    '200 with ready, in-progress, completed',
    (a) => hasAll(a, ['ready', 'in-progress', 'completed']),
  );
  await judged(
    'control',
    `the Northwind clinician expands ${TASK_STATUS_VS} with filter=prog`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS, 'prog'),
    '200 with in-progress',
    (a) => hasAll(a, ['in-progress']),
  );
  // The tenants' condition catalogs (src/provision/catalog.ts conditionCatalog), found by provisioning tag.
  const northwindCatalog = (await byTag('ValueSet', 'catalog-northwind-conditions')) as ValueSet | undefined;
  const southridgeCatalog = (await byTag('ValueSet', 'catalog-southridge-conditions')) as ValueSet | undefined;
  if (northwindCatalog?.url) {
    const url = northwindCatalog.url;
    // Medplum checks a ValueSet's listed codes against their code system (expand.ts computeExpansion):
    // provisioning writes the catalogs' ICD-10-CM codes as a CodeSystem (catalog.ts catalogCodeSystem,
    // content `example`), which the clinician policy reads (catalogReads('CodeSystem')).
    await judged(
      'control',
      `the Northwind clinician expands her tenant's condition catalog (${url}, version ${northwindCatalog.version})`,
      clinician,
      (p) => expand(p, url),
      '200 with I10',
      (a) => a.status === 200 && hasAll(a, ['I10']),
      // Whether a refusal is the policy's: the project admin's answer to the same expansion.
      async (_a, pass) =>
        pass
          ? ''
          : `; the project admin's same expansion: ${expansion(await medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/ValueSet/$expand?url=${encodeURIComponent(url)}`, { waitOutQuota: true }))}`,
    );
  } else {
    row(
      "control: the Northwind clinician expands her tenant's condition catalog",
      'not reached',
      'no ValueSet tagged catalog-northwind-conditions',
    );
  }
  if (southridgeCatalog?.url) {
    const url = southridgeCatalog.url;
    await judged(
      'attack',
      `the Northwind clinician expands the Southridge condition catalog (${url})`,
      clinician,
      (p) => expand(p, url),
      '400/403/404, or no codes',
      (a) => [400, 403, 404].includes(a.status) || (a.status >= 200 && a.status < 300 && codesOf(a).length === 0),
    );
  } else {
    row(
      'attack: the Northwind clinician expands the Southridge condition catalog',
      'not reached',
      'no ValueSet tagged catalog-southridge-conditions',
    );
  }
  const patientTerm = people.get('bob');
  await judged(
    'attack',
    `bob (Northwind patient) expands FHIR's ${TASK_STATUS_VS}`,
    patientTerm,
    (p) => expand(p, TASK_STATUS_VS),
    'not 2xx, or no codes',
    (a) => a.status < 200 || a.status >= 300 || codesOf(a).length === 0,
  );
  await judged(
    'attack',
    `bob (Northwind patient) searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    patientTerm,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '403/404, or an empty Bundle',
    (a) => REFUSED.includes(a.status) || (a.status === 200 && entriesOf(a.body).length === 0),
  );
  await judged(
    'control',
    `the Northwind clinician searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    clinician,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '200, a Bundle of 1',
    (a) => a.status === 200 && entriesOf(a.body).length === 1,
  );

  // Her own tenant's Organization (a patient's managingOrganization, which Medplum's app reads): the
  // clinician policy's read-only `Organization?_id=%organization.id`; the other tenant's stays out of reach.
  const southridgeOrg = await byTag('Organization', 'org-southridge');
  const southridgeRef = southridgeOrg?.id ? `Organization/${southridgeOrg.id}` : undefined;
  await control(
    "the Northwind clinician reads her own tenant's Organization (Northwind)",
    clinician,
    northwindRef,
    () => direct(clinician as Person, 'GET', northwindRef as string),
    { missing: 'no Organization tagged org-northwind' },
  );
  await attack(
    'the Northwind clinician reads the Southridge Organization',
    { attacker: 'northwind-clinician', target: southridgeRef, missing: 'no Organization tagged org-southridge' },
    (a, t) => direct(a, 'GET', t),
  );
  const orgBefore = northwindRef ? ((await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource) : undefined;
  const orgName = (org: Resource | undefined) => (org as { name?: string } | undefined)?.name;
  await attack(
    "the Northwind clinician renames her own tenant's Organization (PUT, name changed)",
    {
      attacker: 'northwind-clinician',
      target: orgBefore?.id ? northwindRef : undefined,
      missing: 'the admin could not read the Northwind Organization',
    },
    (a, t) => direct(a, 'PUT', t, { ...orgBefore, name: `${orgName(orgBefore)} (renamed by the lane)` }),
    'rejected',
  );
  if (northwindRef && orgBefore?.id) {
    const orgAfter = (await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource | undefined;
    const same = orgAfter?.meta?.versionId === orgBefore.meta?.versionId && orgName(orgAfter) === orgName(orgBefore);
    row(
      'the refused rename changed nothing (the Northwind Organization, read back by the admin)',
      same ? 'ok' : 'FAILED',
      `${northwindRef}: name "${orgName(orgAfter)}", version ${orgAfter?.meta?.versionId}${same ? ' as before' : ` (expected "${orgName(orgBefore)}", version ${orgBefore.meta?.versionId})`}`,
    );
  }

  // Bots: their code, and $execute of a bot patients may not run.
  const botOf = async (key: string): Promise<Bot | undefined> =>
    entriesOf((await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${key}`)}`)).body)[0] as
      | Bot
      | undefined;
  // A real Medplum answers a Bot's code as a presigned storage URL (`<base>storage/<id>/<version>?...`).
  const binaryOf = (url: string | undefined): string | undefined => {
    const id = url?.startsWith('Binary/') ? url.slice(7) : /\/storage\/([\w-]+)\//.exec(url ?? '')?.[1];
    return id ? `Binary/${id.split('/')[0]}` : undefined;
  };
  const completeTask = await botOf('complete-task');
  const code = binaryOf(completeTask?.executableCode?.url);
  const source = binaryOf(completeTask?.sourceCode?.url);
  await control(
    "the admin reads a bot's code Binary (Bot.executableCode.url)",
    { who: 'admin', token: ctx.adminToken, profile: '' },
    code,
    () => medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/${code}`),
  );
  for (const attacker of ['bob', 'northwind-clinician']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(
      `${who} reads the complete-task bot's code Binary (executableCode)`,
      { attacker, target: code },
      (a, t) => direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the complete-task bot's source Binary (sourceCode)`,
      { attacker, target: source },
      (a, t) => direct(a, 'GET', t),
    );
  }
  // A patient may read the bots she runs, but not where their code is (reads.test.ts).
  const patientBot = people.get('bob');
  if (patientBot && completeTask?.id) {
    const answer = await direct(patientBot, 'GET', `Bot/${completeTask.id}`);
    const shows = /executableCode|sourceCode/.test(answer.text);
    row(
      'attack: bob (Northwind patient) reads the complete-task Bot: where its code is',
      shows ? 'FAILED' : 'held',
      `expected no executableCode/sourceCode, got ${describe(answer)}${shows ? ' showing them' : ''}`,
    );
  }
  // GET /v1/agreements/requirements is a read the gateway computes with her own token (082b830): the
  // journey's step 4 and each form case's intake ask it through the gateway; no bot of it is provisioned.
  const requirementsBot = await botOf('agreement-requirements');
  row(
    'no agreement-requirements bot is provisioned (the gateway computes GET /v1/agreements/requirements)',
    requirementsBot ? 'FAILED' : 'ok',
    requirementsBot
      ? `Bot/${requirementsBot.id} has the identifier ${SYSTEMS.bots}|agreement-requirements (a project provisioned before 082b830?)`
      : `no Bot with the identifier ${SYSTEMS.bots}|agreement-requirements`,
  );
  for (const key of ['eligibility', 'compose-offer', 'reconcile', 'materialize-slots', 'sms-opt-out']) {
    const bot = await botOf(key);
    await attack(
      `bob (Northwind patient) runs the ${key} bot ($execute), not a patient's`,
      { attacker: 'bob', target: bot?.id ? `Bot/${bot.id}` : undefined },
      (a, t) => direct(a, 'POST', `${t}/$execute`, {}),
    );
  }

  // Bot-only writes.
  const bob = people.get('bob');
  await attack(
    'bob (Northwind patient) creates a CarePlan for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'CarePlan', {
        resourceType: 'CarePlan',
        status: 'active',
        intent: 'plan',
        subject: { reference: a.profile },
      }),
  );
  await attack(
    'bob (Northwind patient) creates a Consent for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'Consent', {
        resourceType: 'Consent',
        status: 'active',
        scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'treatment' }] },
        category: [{ coding: [{ system: 'http://loinc.org', code: '59284-0' }] }],
        patient: { reference: a.profile },
        dateTime: new Date().toISOString(),
      }),
  );
  // Nobody chooses a tenant by sending meta.accounts: Medplum keeps what a non-admin sends whenever it
  // derives none itself (a patient not yet homed, an upload naming no patient).
  const southridge = entriesOf(
    (await ctx.adminGet(`fhir/R4/Organization?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|org-southridge`)}`))
      .body,
  )[0];
  const elsewhere = southridge?.id ? [{ reference: `Organization/${southridge.id}` }] : undefined;
  try {
    const newcomer = await register(baseUrl, projectId, ctx.appIdOf('northwind'));
    people.set('newcomer', newcomer);
  } catch (err) {
    row('sign-up: a new Northwind patient, not yet homed', 'FAILED', message(err));
  }
  await attack(
    'a new patient, not yet homed, puts herself in Southridge (her Patient with meta.accounts)',
    { attacker: 'newcomer', target: elsewhere ? people.get('newcomer')?.profile : undefined },
    async (a, t) => {
      const own = await direct(a, 'GET', t);
      return direct(a, 'PUT', t, { ...(own.body as object), meta: { accounts: elsewhere } });
    },
  );
  await attack(
    'bob (Northwind patient) files an upload in Southridge (a Binary with meta.accounts)',
    { attacker: 'bob', target: elsewhere ? bob?.profile : undefined },
    (a) =>
      direct(a, 'POST', 'Binary', {
        resourceType: 'Binary',
        contentType: 'application/pdf',
        data: btoa('%PDF-1.7 filed elsewhere'),
        securityContext: { reference: a.profile },
        meta: { accounts: elsewhere },
      }),
  );
  await attack(
    'bob (Northwind patient) reads the Project (its secrets hold the edge key)',
    { attacker: 'bob', target: `Project/${projectId}` },
    (a, t) => direct(a, 'GET', t),
  );
  for (const key of ['bob', 'northwind-clinician']) {
    const person = people.get(key);
    if (!person) {
      continue;
    }
    const answer = await medplumCall(baseUrl, person.token, 'GET', 'auth/me');
    const shows = answer.text.includes(ctx.edgeStatementKey);
    row(
      `attack: ${person.who} reads auth/me: the Project's secrets`,
      answer.status === 200 && !shows ? 'held' : 'FAILED',
      `expected 200 without the edge-statement key, got ${answer.status}${shows ? ' WITH the key' : ''}`,
    );
  }

  await patientBounds(ctx, people);

  // Whom she books with: a schedule-visit task names her tenant's visit team
  // (input `care-team` under SYSTEMS.taskKind), and her policy reads her tenant's visit teams (CareTeam
  // category SYSTEMS.careTeam|visits, in her tenant), never a clinicians' work queue (SYSTEMS.careQueue)
  // nor another tenant's visit team.
  const northwindTeam = await byTag('CareTeam', 'visit-team-northwind');
  const northwindTeamRef = northwindTeam?.id ? `CareTeam/${northwindTeam.id}` : undefined;
  const teamStep =
    "control: the journey patient's schedule-visit task (GET /v1/fhir/Task?code=…|schedule-visit through the gateway) names a care-team (input 'care-team' under SYSTEMS.taskKind): her tenant's visit team";
  let visitTeam: string | undefined;
  if (!maya) {
    row(teamStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const found = await viaGateway(
        maya,
        `Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|schedule-visit`)}&_count=20`,
      );
      const tasks = entriesOf(found.body) as Task[];
      const named = tasks.map((t) => ({
        task: t,
        team: t.input?.find((i) => i.type?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'care-team'))
          ?.valueReference?.reference,
      }));
      visitTeam = named.find((n) => n.team)?.team;
      const teams = [...new Set(named.map((n) => n.team ?? 'none'))];
      const stored = visitTeam
        ? ((await ctx.adminGet(`fhir/R4/${visitTeam}`)).body as CareTeam | undefined)
        : undefined;
      const categories = (stored?.category ?? []).flatMap((c) => c.coding ?? []).map((c) => `${c.system}|${c.code}`);
      const good =
        found.status === 200 &&
        tasks.length > 0 &&
        named.every((n) => n.team !== undefined) &&
        teams.length === 1 &&
        visitTeam !== undefined &&
        visitTeam === northwindTeamRef &&
        categories.includes(`${SYSTEMS.careTeam}|visits`);
      row(
        teamStep,
        good ? 'ok' : 'FAILED',
        `expected each of her schedule-visit Tasks to name ${northwindTeamRef ?? 'the CareTeam tagged visit-team-northwind (none found)'}; got ${gatewayDescribe(found)}: ${named.map((n) => `Task/${n.task.id} ${n.task.status} -> ${n.team ?? 'no care-team input'}`).join(', ') || 'no schedule-visit Task'}${stored ? `; ${visitTeam} is "${stored.name}", category ${categories.join(', ') || 'none'}` : ''}`,
      );
    } catch (err) {
      row(teamStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noTeam = maya ? 'her schedule-visit task names no care-team (the row above)' : 'the journey did not make it';
  await control(
    'the journey patient reads the visit team her task names, directly on Medplum (her token)',
    maya,
    visitTeam,
    () => direct(maya as Person, 'GET', visitTeam as string),
    { missing: noTeam },
  );
  await control(
    'the journey patient reads the visit team her task names through the gateway (GET /v1/fhir/CareTeam/{id})',
    maya,
    visitTeam,
    () => viaGateway(maya as Person, visitTeam as string),
    { missing: noTeam },
  );
  const availabilityStep =
    'control: the journey patient asks for the free slots of the visit team her task names (GET /v1/availability?careTeam=…, the next 7 days, through the gateway)';
  if (!maya || !visitTeam) {
    row(availabilityStep, 'not reached', noTeam);
  } else {
    try {
      const now = Date.now();
      const served = await gateway(
        maya,
        `/v1/availability?${new URLSearchParams({
          careTeam: visitTeam,
          start: new Date(now).toISOString(),
          end: new Date(now + 7 * DAY).toISOString(),
        })}`,
      );
      const slots = (served.body as { slots?: unknown[] } | undefined)?.slots;
      row(
        availabilityStep,
        served.status === 200 ? 'ok' : 'FAILED',
        `expected 200, got ${gatewayDescribe(served)}${slots ? `, ${slots.length} slot(s)` : ''}`,
      );
    } catch (err) {
      row(availabilityStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noQueue = 'no CareTeam tagged queue-northwind-intake-review';
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam (a clinicians' work queue) directly",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam through the gateway",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => viaGateway(a, t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team directly',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team through the gateway',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => viaGateway(a, t),
  );
  // Her search: whatever it lists, no work queue (the provisioned one, and the other the admin made above).
  const searchStep =
    'attack: the journey patient searches CareTeam directly on Medplum (CareTeam?_count=100): no work queue (category SYSTEMS.careQueue) in the Bundle';
  if (!maya) {
    row(searchStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const searched = await direct(maya, 'GET', 'CareTeam?_count=100');
      const listed = entriesOf(searched.body) as CareTeam[];
      const isQueue = (t: CareTeam) =>
        (t.category ?? []).some((c) => c.coding?.some((k) => k.system === SYSTEMS.careQueue));
      const queues = listed.filter(isQueue);
      const held = REFUSED.includes(searched.status) || (searched.status === 200 && queues.length === 0);
      row(
        searchStep,
        held ? 'held' : 'FAILED',
        `expected 403/404, or a Bundle without a queue; got ${describe(searched)}${
          listed.length
            ? `: ${listed
                .map(
                  (t) =>
                    `CareTeam/${t.id} (${
                      (t.category ?? [])
                        .flatMap((c) => c.coding ?? [])
                        .map((k) => k.code)
                        .join(', ') || 'no category'
                    }${isQueue(t) ? ', A QUEUE' : ''})`,
                )
                .join(', ')}`
            : ''
        }`,
      );
    } catch (err) {
      row(searchStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  await addressNeeded(ctx);
  await orderTasks(ctx, people);
  await evidence(ctx, people);
  await licensureAtCare(ctx);
  await conditionRevised(ctx, people, queueRef);
  await asyncVisitReviewed(ctx, people, queueRef);
  await visitCompleted(ctx, people);
  await idempotencyKeys(ctx, people);
}
