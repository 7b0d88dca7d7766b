import { createReference, getReferenceString, MedplumClient, type WithId } from '@medplum/core';
import type {
  Appointment,
  CareTeam,
  Coding,
  DetectedIssue,
  Encounter,
  Practitioner,
  Provenance,
  Questionnaire,
  QuestionnaireResponse,
  QuestionnaireResponseItem,
  Reference,
  Task,
  TaskOutput,
} from '@medplum/fhirtypes';
import {
  QUEUE_STAFF_PARAMETER,
  QUEUES_PARAMETER,
  queueStaffValue,
  queuesValue,
  SYSTEMS,
  TENANT_PARAMETER,
} from '../../contracts/systems';
import {
  CONDITION_ITEM,
  formReference,
  mitigationsAsked,
  OPTION_ITEM,
  PROVIDER_APP_OUTPUT,
} from '../../contracts/work-forms';

/**
 * The clinician's side (JOURNEY J): what a clinician does in Medplum's app, as a small typed helper for
 * the tests and the demo. Every write is a plain FHIR update with the clinician's own token, under
 * If-Match, that Medplum's app could make; the clinician AccessPolicy (src/provision/definition.ts,
 * QUEUE_TRANSITIONS) is what allows or refuses it, never this helper. The checks here only turn a
 * request that policy would refuse anyway into a clear error before it is sent.
 */
/**
 * What a project admin sends to Medplum's `POST admin/projects/:projectId/invite` to add a clinician of a
 * tenant, as provisioning invites the demo clinicians: the clinician policy with her tenant as its
 * organization, the work queues she works (`queues`: what lets her take their work) and who works them
 * (`queueStaff`: whom she may hand their work to; absent, her own queues with herself alone). Her
 * colleagues' memberships name her once provisioning (or an admin) adds her to theirs.
 */
export function clinicianInvite(clinician: {
  firstName: string;
  lastName: string;
  email: string;
  password: string;
  policy: string;
  organization: string;
  queues: readonly string[];
  /** Who works her queues (each queue with each member), herself included once her id is known. */
  staff?: readonly { queue: string; member: string }[];
}) {
  return {
    resourceType: 'Practitioner' as const,
    firstName: clinician.firstName,
    lastName: clinician.lastName,
    email: clinician.email,
    password: clinician.password,
    scope: 'project' as const,
    sendEmail: false,
    membership: {
      access: [
        {
          policy: { reference: clinician.policy },
          parameter: [
            { name: TENANT_PARAMETER, valueReference: { reference: clinician.organization } },
            { name: QUEUES_PARAMETER, valueString: queuesValue(clinician.queues) },
            { name: QUEUE_STAFF_PARAMETER, valueString: queueStaffValue(clinician.staff ?? []) },
          ],
        },
      ],
    },
  };
}

export interface Clinician {
  medplum: MedplumClient;
  profile: Reference<Practitioner>;
  /** The queues she is a member of (CareTeam.participant). */
  queues(): Promise<WithId<CareTeam>[]>;
  /** The `ready` work of her queues, most urgent first, then oldest first. */
  queue(): Promise<WithId<Task>[]>;
  /** The work she has claimed and not finished (`in-progress`, owned by her). */
  claimed(): Promise<WithId<Task>[]>;
  /** Unowned queue work -> herself, ready -> in-progress. A concurrent claim that got there first: 412. */
  claim(taskId: string): Promise<WithId<Task>>;
  /** Back to its queue (no owner), in-progress -> ready. */
  unclaim(taskId: string): Promise<WithId<Task>>;
  /** Unowned queue work, or work of hers, handed to a colleague of its queue (the owner changes, nothing else). */
  handOver(taskId: string, colleague: Reference<Practitioner>): Promise<WithId<Task>>;
  /** in-progress -> completed with its outputs; she must own it. */
  complete(taskId: string, outputs: TaskOutput[]): Promise<WithId<Task>>;
  /** The stored form a task points at (contracts/work-forms.ts), as she reads it; undefined when none. */
  form(task: Task): Promise<WithId<Questionnaire> | undefined>;
  /**
   * Work she has claimed, answered as Medplum's Provider app does it (contracts/work-forms.ts): her
   * response to the task's form saved `in-progress` (its url, `source` her, no subject or author), the
   * task's output replaced by it, the task completed, and only then the response completed.
   */
  answer(taskId: string, items: QuestionnaireResponseItem[]): Promise<WithId<Task>>;
  /**
   * The review of an intake (JOURNEY D.1): claim it and answer its form with an ICD-10-CM code of the
   * tenant's condition catalog (the eligibility bot records the Condition, her as asserter).
   */
  assignCondition(reviewId: string, code: string): Promise<WithId<Task>>;
  /**
   * A selection (or the review of a declined offer, JOURNEY D.3): claim it and answer its form with the
   * option `url|version`; for an option the engine found ineligible, `mitigation` answers each finding.
   */
  select(taskId: string, option: string, mitigation?: string): Promise<WithId<Task>>;
  /** An override of an engine finding: a mitigation she authors, the only change policy allows her. */
  mitigate(issueId: string, action: string): Promise<WithId<DetectedIssue>>;
  /**
   * A visit segment she held, finished as Medplum's Provider app does it from the encounter's header
   * (its src/utils/encounter.ts): the Appointment the encounter names, as read, marked `fulfilled`; then
   * the Encounter `finished` with its `period.end`; neither under If-Match. A refused Appointment write
   * stops it there, as in the app. The platform decides from the segments what the visit is.
   */
  finishEncounter(encounterId: string): Promise<WithId<Encounter>>;
}

const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';

/** The choice of a form's item whose code is `code` (as the form offers it), or that code as given. */
function choiceOf(form: Questionnaire | undefined, linkId: string, code: string, system: string): Coding {
  const item = form?.item?.find((i) => i.linkId === linkId);
  return item?.answerOption?.find((o) => o.valueCoding?.code === code)?.valueCoding ?? { system, code };
}

export interface ClinicianSignIn {
  /** Medplum's base URL (the embedded Medplum's, or a real one's). */
  baseUrl: string;
  /** Any fetch (the embedded Medplum's in-process one, in tests). */
  fetch?: typeof fetch;
  email: string;
  password: string;
  projectId: string;
}

/**
 * Her signature of an encounter (its note), as the Provider app's *Sign* writes it: a Provenance of the
 * encounter, reason SIGN, `who` both the author agent and the signer (issue 48; the clinician policy's
 * OWN_SIGNATURE_ONLY lets her write it in her own name only).
 */
export function encounterSignature(who: string, encounter: string, when = new Date().toISOString()): Provenance {
  return {
    resourceType: 'Provenance',
    target: [{ reference: encounter }],
    recorded: when,
    reason: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'SIGN' }] }],
    agent: [{ type: { coding: [{ code: 'author' }] }, who: { reference: who } }],
    signature: [
      {
        type: [{ system: 'urn:iso-astm:E1762-95:2013', code: '1.2.840.10065.1.12.1.5' }],
        when,
        who: { reference: who },
      },
    ],
  };
}

/** Signs in through Medplum's own login (email and password, then the code for a token), as its app does. */
export async function signInClinician(signIn: ClinicianSignIn): Promise<Clinician> {
  const medplum = new MedplumClient({ baseUrl: signIn.baseUrl, fetch: signIn.fetch, cacheTime: 0 });
  const login = await medplum.startLogin({
    email: signIn.email,
    password: signIn.password,
    projectId: signIn.projectId,
  });
  if (!login.code) {
    throw new Error('Medplum asked for more than a password (MFA or a project choice): not supported here');
  }
  await medplum.processCode(login.code);
  return clinicianOf(medplum);
}

/** The helper over a MedplumClient already signed in as a practitioner (e.g. from a token). */
export async function clinicianOf(medplum: MedplumClient): Promise<Clinician> {
  const me = await medplum.getProfileAsync();
  if (me?.resourceType !== 'Practitioner') {
    throw new Error(`Signed in as ${me ? getReferenceString(me) : 'nobody'}, not a practitioner`);
  }
  const profile = createReference(me as WithId<Practitioner>);
  const mine = getReferenceString(me);
  const fresh = { cache: 'no-cache' } as const;

  const read = (taskId: string) => medplum.readResource('Task', taskId, fresh);

  /** One If-Match PUT: the version she read is the one she changes, or nothing changes (412). */
  const write = (task: WithId<Task>, change: Partial<Task>) =>
    medplum.updateResource<Task>(
      { ...task, ...change, lastModified: new Date().toISOString() },
      { headers: { 'If-Match': `W/"${task.meta?.versionId}"` } },
    ) as Promise<WithId<Task>>;

  const expectState = (task: Task, status: Task['status'], owner: (reference: string) => boolean, what: string) => {
    const current = task.owner?.reference ?? '';
    if (task.status !== status || !owner(current)) {
      throw new Error(`Task/${task.id} cannot be ${what}: it is ${task.status}, owned by ${current || 'nobody'}`);
    }
  };
  const unowned = (reference: string) => reference === '';

  const queues = () => medplum.searchResources('CareTeam', { participant: mine, status: 'active' }, fresh);

  const clinician: Clinician = {
    medplum,
    profile,
    queues,
    async queue() {
      const teams = await queues();
      if (teams.length === 0) {
        return [];
      }
      const waiting = await medplum.searchResources(
        'Task',
        {
          performer: teams.map((team) => `${SYSTEMS.queue}|${getReferenceString(team)}`).join(','),
          status: 'ready',
          _count: '100',
        },
        fresh,
      );
      // Waiting means taken by nobody yet.
      const tasks = waiting.filter((t) => !t.owner);
      return tasks.sort(
        (a, b) =>
          PRIORITY.indexOf(a.priority ?? 'routine') - PRIORITY.indexOf(b.priority ?? 'routine') ||
          (a.authoredOn ?? '').localeCompare(b.authoredOn ?? ''),
      );
    },
    claimed: () => medplum.searchResources('Task', { owner: mine, status: 'in-progress', _count: '100' }, fresh),
    async claim(taskId) {
      const task = await read(taskId);
      expectState(task, 'ready', unowned, 'claimed');
      return write(task, {
        owner: profile,
        status: 'in-progress',
        executionPeriod: { ...task.executionPeriod, start: new Date().toISOString() },
      });
    },
    async unclaim(taskId) {
      const task = await read(taskId);
      expectState(task, 'in-progress', (owner) => owner === mine, 'unclaimed');
      const { owner: _owner, ...rest } = task;
      return medplum.updateResource<Task>(
        { ...rest, status: 'ready', lastModified: new Date().toISOString() },
        { headers: { 'If-Match': `W/"${task.meta?.versionId}"` } },
      ) as Promise<WithId<Task>>;
    },
    async handOver(taskId, colleague) {
      const task = await read(taskId);
      const owner = task.owner?.reference ?? '';
      if (!['ready', 'in-progress'].includes(task.status) || !(owner === '' || owner === mine)) {
        throw new Error(`Task/${taskId} cannot be handed over: it is ${task.status}, owned by ${owner || 'nobody'}`);
      }
      return write(task, { owner: colleague });
    },
    async complete(taskId, outputs) {
      const task = await read(taskId);
      expectState(task, 'in-progress', (owner) => owner === mine, 'completed');
      return write(task, {
        status: 'completed',
        output: [...(task.output ?? []), ...outputs],
        executionPeriod: { ...task.executionPeriod, end: new Date().toISOString() },
      });
    },
    async form(task) {
      const [, id] = (formReference(task) ?? '').split('/');
      return id ? medplum.readResource('Questionnaire', id, fresh) : undefined;
    },
    async answer(taskId, items) {
      const task = await read(taskId);
      expectState(task, 'in-progress', (owner) => owner === mine, 'answered');
      const form = await clinician.form(task);
      if (!form) {
        throw new Error(`Task/${taskId} carries no form to answer`);
      }
      const response = (await medplum.createResource<QuestionnaireResponse>({
        resourceType: 'QuestionnaireResponse',
        questionnaire: form.url,
        status: 'in-progress',
        authored: new Date().toISOString(),
        source: profile,
        item: items,
      })) as WithId<QuestionnaireResponse>;
      const handed = await write(task, {
        output: [{ type: { text: PROVIDER_APP_OUTPUT }, valueReference: { reference: getReferenceString(response) } }],
      });
      const done = await write(handed, {
        status: 'completed',
        executionPeriod: { ...task.executionPeriod, end: new Date().toISOString() },
      });
      await medplum.updateResource<QuestionnaireResponse>(
        { ...response, status: 'completed' },
        { headers: { 'If-Match': `W/"${response.meta?.versionId}"` } },
      );
      return done;
    },
    async assignCondition(reviewId, code) {
      const review = await clinician.claim(reviewId);
      const valueCoding = choiceOf(await clinician.form(review), CONDITION_ITEM, code, ICD10CM);
      return clinician.answer(reviewId, [{ linkId: CONDITION_ITEM, answer: [{ valueCoding }] }]);
    },
    async select(taskId, option, mitigation) {
      const task = await clinician.claim(taskId);
      const form = await clinician.form(task);
      const valueCoding = choiceOf(form, OPTION_ITEM, option, SYSTEMS.treatmentOption);
      // The findings her choice asks her to mitigate.
      const asked = mitigationsAsked(form, option);
      return clinician.answer(taskId, [
        { linkId: OPTION_ITEM, answer: [{ valueCoding }] },
        ...(mitigation ? asked.map((item) => ({ linkId: item.linkId, answer: [{ valueString: mitigation }] })) : []),
      ]);
    },
    async mitigate(issueId, action) {
      const issue = await medplum.readResource('DetectedIssue', issueId, fresh);
      return medplum.updateResource<DetectedIssue>(
        {
          ...issue,
          mitigation: [
            ...(issue.mitigation ?? []),
            { action: { text: action }, date: new Date().toISOString(), author: profile },
          ],
        },
        { headers: { 'If-Match': `W/"${issue.meta?.versionId}"` } },
      ) as Promise<WithId<DetectedIssue>>;
    },
    async finishEncounter(encounterId) {
      const encounter = await medplum.readResource('Encounter', encounterId, fresh);
      const appointment = encounter.appointment?.at(-1);
      if (appointment) {
        const read = (await medplum.readReference(appointment, fresh)) as WithId<Appointment>;
        await medplum.updateResource<Appointment>({ ...read, status: 'fulfilled' });
      }
      return medplum.updateResource<Encounter>({
        ...encounter,
        status: 'finished',
        period: { ...encounter.period, end: encounter.period?.end ?? new Date().toISOString() },
      }) as Promise<WithId<Encounter>>;
    },
  };
  return clinician;
}

/** Task.priority, most urgent first. */
const PRIORITY: NonNullable<Task['priority']>[] = ['stat', 'asap', 'urgent', 'routine'];
