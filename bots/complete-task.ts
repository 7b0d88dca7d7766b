import { createHash, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  Attachment,
  Bundle,
  BundleEntry,
  Coding,
  EpisodeOfCare,
  Observation,
  Patient,
  Questionnaire,
  QuestionnaireResponse,
  QuestionnaireResponseItem,
  Reference,
  Task,
} from '@medplum/fhirtypes';
import {
  attachmentProblems,
  type BinaryOrigins,
  binaryIdOf,
  DOCUMENT_MAX_BYTES,
  MAX_ATTACHMENTS_PER_ANSWER,
} from '../contracts/attachments';
import type { BotInput } from '../contracts/bot-inputs';
import {
  BOOKING_ENDPOINT,
  EXTENSIONS,
  ORDER_DECISIONS_ENDPOINT,
  STORAGE_BASE_SECRET,
  SYSTEMS,
} from '../contracts/systems';
import { conditionForm } from '../contracts/work-forms';
import { absent } from './lib/absent';
import { activeAcceptances, contextNotFound, freshCatalog, requireAgreements } from './lib/agreements';
import { answerProblems, readableItems } from './lib/answers';
import { conditionCatalogs } from './lib/catalog';
import { payloadDigest } from './lib/digest';
import { type CheckedUpload, evidenceEntries } from './lib/evidence';
import { type CompletedTask, completedTask, completionDigest, isHerTask, isPatientTask } from './lib/finished';
import {
  episodePlan,
  episodeTasks,
  readVersioned,
  taskKind,
  taskObservationDefinitions,
  taskQuestionnaire,
} from './lib/journey';
import { checkReadings, interpret, observationsFor, type Reading } from './lib/measurements';
import { offerWork } from './lib/offers';
import { clinicianTask, tenantQueue } from './lib/queues';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { edgeFacts, patientWorkflow } from './lib/trust';
import { storedForm } from './lib/work-forms';

export type CompleteTaskResult = BotResult<CompletedTask>;

/** The field that completes each kind of task this endpoint completes. */
const EXPECTED_FIELD = {
  questionnaire: 'questionnaireResponse',
  measurement: 'measurements',
  'treatment-offer': 'decision',
} as const;

/** Clinician queue work this bot issues (Task.code under SYSTEMS.taskKind, as the patient kinds). */
const REVIEW_INTAKE = 'review-intake';
const REVIEW_READING = 'review-reading';

type Refusal = ReturnType<typeof fail>;
/** What completes the task, as the contract has it (the task's id and the edge statement taken off). */
type Payload =
  BotInput<'complete-task'> extends infer I ? (I extends unknown ? Omit<I, 'task' | 'edge'> : never) : never;
type TaskPayload = Exclude<Payload, { decision: unknown }>;

/**
 * POST /v1/tasks/{id}/complete (JOURNEY C), in the order it happens:
 * 1. who asks, and what: the verified patient and her input, checked against the contract;
 * 2. what a completion reads, asked at once (each read is believed further down, where it is used: the
 *    run's client answers the later ask from this one, bots/lib/reads.ts);
 * 3. the task: hers, and its state (a completed one answers a replay of the same payload again);
 * 4. the work of its kind, checked beside the agreements gate, whose refusal comes first;
 * 5. ONE transaction: the task `completed` under If-Match (the anchor: of 20 identical calls one wins, the
 *    others re-read), what the work produced (the Observations of a measurement task...), the episode's
 *    revision bumped under If-Match (two different last tasks completing at once cannot both miss each
 *    other), and, when this was the last intake task, the clinician's review task; a critical reading also
 *    issues an urgent one. A race lost to another writer is read again and decided again, once.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<CompleteTaskResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'complete-task');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  // The edge statement is proof of the session, not part of the answer: a replay from elsewhere is the same answer.
  const { task: taskId, edge, ...rest } = { edge: undefined, ...start.input };
  const payload = rest as Payload;
  const digest = payloadDigest(payload);
  const origins = binaryOrigins(medplum, event);
  for (let attempt = 0; ; attempt++) {
    askWhatCompletionReads(medplum, patientId, payload, origins);
    const task = (await medplum.readResource('Task', taskId).catch(absent)) as Task | undefined;
    if (!isHerTask(task, patientId)) {
      return contextNotFound();
    }
    askWhatItsWorkReads(medplum, task, payload);
    const settled = answerOfState(task, payload, digest);
    if (settled) {
      return settled;
    }
    const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
    const completing =
      'decision' in payload
        ? await offerCompletion(medplum, task, patient, digest, {
            answer: payload,
            session: { loginId: start.caller.loginId, ...edgeFacts(event, start.caller, edge) },
          })
        : await taskCompletion(medplum, { task, patient, digest, payload, origins });
    if (!completing.ok) {
      return completing;
    }
    const written = await commit(medplum, completing.bundle, taskId, attempt);
    if (written) {
      return written;
    }
  }
}

/**
 * What any completion reads, asked with the task (fewer round trips): her Patient, the gate's acceptances
 * and published agreements, and the answers named with the files they attach.
 */
function askWhatCompletionReads(medplum: MedplumClient, patientId: string, payload: Payload, origins: BinaryOrigins) {
  ahead(medplum.readResource('Patient', patientId));
  ahead(activeAcceptances(medplum, patientId));
  ahead(freshCatalog(medplum).published());
  if ('questionnaireResponse' in payload) {
    ahead(aheadOfAnswers(medplum, payload.questionnaireResponse, patientId, origins));
  }
}

/**
 * What the task's state answers before any work: a completed task the same answer again (or 409 for
 * another payload), anything else but a `ready` task of a kind completed here, with the field of its
 * kind, 409 or 400. Undefined: there is work to do.
 */
function answerOfState(task: Task, payload: Payload, digest: string): CompleteTaskResult | undefined {
  if (task.status === 'completed') {
    return completionDigest(task) === digest
      ? completedTask(task)
      : fail(409, 'invalid_state', 'This task is already completed, with another payload', { state: 'completed' });
  }
  if (task.status !== 'ready') {
    return fail(409, 'invalid_state', `This task is ${task.status}`, { state: task.status });
  }
  const kind = taskKind(task);
  if (kind === 'order-decisions' || kind === 'schedule-visit') {
    return fail(409, 'invalid_state', 'This task is answered at its own endpoint', {
      state: task.status,
      use: kind === 'order-decisions' ? ORDER_DECISIONS_ENDPOINT : BOOKING_ENDPOINT,
    });
  }
  if (!kind) {
    return fail(409, 'invalid_state', 'This task is not completed here', { state: task.status });
  }
  const expected = EXPECTED_FIELD[kind];
  if (!(expected in payload)) {
    return fail(400, 'invalid_request', `A ${kind} task is completed with ${expected}`, {
      issues: [{ path: expected, message: `required for a ${kind} task` }],
    });
  }
  return undefined;
}

/** Her answer to a treatment offer: the offer's own work (bots/lib/offers.ts), completed by this task. */
async function offerCompletion(
  medplum: MedplumClient,
  task: Task,
  patient: Patient & { id: string },
  digest: string,
  { answer, session }: Pick<Parameters<typeof offerWork>[1], 'answer' | 'session'>,
): Promise<{ ok: true; bundle: Bundle } | Refusal> {
  const work = await offerWork(medplum, { task, patient, answer, session });
  return work.ok
    ? {
        ok: true,
        bundle: {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [completion(task, digest, work.output), ...work.entries],
        },
      }
    : work;
}

/** A questionnaire or measurement task: its work checked beside the gate, then the completion's bundle. */
async function taskCompletion(
  medplum: MedplumClient,
  {
    task,
    patient,
    digest,
    payload,
    origins,
  }: { task: Task; patient: Patient & { id: string }; digest: string; payload: TaskPayload; origins: BinaryOrigins },
): Promise<{ ok: true; bundle: Bundle } | Refusal> {
  const episode = await episodeOf(medplum, task);
  if (episode) {
    // What the completion's bundle reads: the tenant's queue, the episode's tasks.
    ahead(tenantQueue(medplum, patient));
    ahead(episodeTasks(medplum, episode.id as string));
  }
  // The work's checks only read: they run beside the gate, whose refusal still comes first.
  const working = ahead(
    'questionnaireResponse' in payload
      ? answersWork(medplum, task, patient.id, payload.questionnaireResponse, origins)
      : readingsWork(medplum, task, patient, payload.measurements),
  );
  const gate = await requireAgreements(medplum, patient.id, {
    task: `Task/${task.id}`,
    ...(episode && episodePlan(episode) ? { protocol: episodePlan(episode) } : {}),
  });
  if (gate) {
    return gate;
  }
  const answered = await working;
  if (!answered.ok) {
    return answered;
  }
  const work = answered.answers ? { ...answered, ...(await pinAnswers(medplum, answered.answers)) } : answered;
  return { ok: true, bundle: await completionBundle(medplum, { task, patient, episode, digest, work }) };
}

/**
 * The one transaction. Its answer, or undefined when a race was lost for the first time: someone else
 * completed the task (same payload: their result is ours) or moved the episode on (another task completed
 * at the same moment), so the caller reads again and decides again. Lost twice: 409.
 */
async function commit(
  medplum: MedplumClient,
  bundle: Bundle,
  taskId: string,
  attempt: number,
): Promise<CompleteTaskResult | undefined> {
  try {
    const response = await medplum.executeBatch(bundle);
    const saved = response.entry?.[0]?.resource as Task | undefined;
    return completedTask(saved ?? (await medplum.readResource('Task', taskId)));
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    return attempt > 0
      ? fail(409, 'invalid_state', 'This task changed while it was being completed; try again', { state: 'conflict' })
      : undefined;
  }
}

/**
 * Her answers, asked now, and the files they attach once they are read: her own answers only, and no more
 * files than answersWork will read (it reads each again through the run's reads, bots/lib/reads.ts).
 */
async function aheadOfAnswers(
  medplum: MedplumClient,
  reference: string,
  patientId: string,
  origins: BinaryOrigins,
): Promise<void> {
  const answers = (await medplum.readResource(
    'QuestionnaireResponse',
    reference.split('/')[1],
  )) as QuestionnaireResponse;
  const files = attachmentsOf(answers.item ?? []);
  if (answers.subject?.reference !== `Patient/${patientId}` || files.length > MAX_ATTACHMENTS_PER_ANSWER) {
    return;
  }
  for (const { attachment } of files) {
    const id = binaryIdOf(attachment.url, origins);
    if (id) {
      ahead(medplum.readResource('Binary', id));
    }
  }
}

/** Reads the task's own work will make, asked now: its episode, and its pinned Questionnaire or definitions. */
function askWhatItsWorkReads(medplum: MedplumClient, task: Task, payload: Payload): void {
  if (!isPatientTask(task) || task.status !== 'ready') {
    return;
  }
  ahead(episodeOf(medplum, task));
  const pinned = taskQuestionnaire(task);
  if ('questionnaireResponse' in payload && pinned) {
    const [url, version] = pinned.split('|');
    ahead(medplum.searchOne('Questionnaire', { url, ...(version ? { version } : {}) }));
  }
  if ('measurements' in payload) {
    for (const reference of taskObservationDefinitions(task)) {
      ahead(readVersioned(medplum, reference));
    }
  }
}

type Work =
  | {
      ok: true;
      output: Task['output'];
      entries: BundleEntry[];
      critical: Reference<Observation>[];
      /** A questionnaire task's answers, to be pinned (pinAnswers) once the gate has let the completion through. */
      answers?: {
        response: QuestionnaireResponse;
        items: QuestionnaireResponseItem[];
        uploads: CheckedUpload[];
        tags: Coding[];
      };
    }
  | ReturnType<typeof fail>;

/** A questionnaire task: her own completed answers to exactly the pinned Questionnaire. */
async function answersWork(
  medplum: MedplumClient,
  task: Task,
  patientId: string,
  reference: string,
  origins: BinaryOrigins,
): Promise<Work> {
  const id = reference.split('/')[1];
  const answers = (await medplum.readResource('QuestionnaireResponse', id).catch(absent)) as
    | QuestionnaireResponse
    | undefined;
  const own = `Patient/${patientId}`;
  if (!answers || answers.subject?.reference !== own) {
    return fail(400, 'invalid_request', 'These answers are not yours, or do not exist', {
      issues: [{ path: 'questionnaireResponse', message: 'not found' }],
    });
  }
  const problems: { path: string; message: string }[] = [];
  if (answers.status !== 'completed') {
    problems.push({ path: 'questionnaireResponse', message: `status is ${answers.status}, not completed` });
  }
  const pinned = taskQuestionnaire(task);
  if (!pinned || answers.questionnaire !== pinned) {
    problems.push({ path: 'questionnaireResponse', message: `must answer ${pinned}, not ${answers.questionnaire}` });
  }
  if (problems.length > 0) {
    return fail(400, 'invalid_request', 'These answers cannot complete this task', { issues: problems });
  }
  // Answers and uploads can be written straight to Medplum: every attachment is checked again here, and
  // their number is bounded first (each is read with this bot's quota, which every patient shares).
  const attached = attachmentsOf(answers.item ?? []);
  if (attached.length > MAX_ATTACHMENTS_PER_ANSWER) {
    return fail(422, 'invalid_attachment', `These answers attach more than ${MAX_ATTACHMENTS_PER_ANSWER} files`, {
      issues: [
        { path: 'questionnaireResponse', message: `${attached.length} files; at most ${MAX_ATTACHMENTS_PER_ANSWER}` },
      ],
    });
  }
  // The answers as the pinned Questionnaire asks for them: its items, required ones answered, each value
  // of its item's type (bots/lib/answers.ts).
  const [url, version] = (pinned as string).split('|');
  const questionnaire = (await medplum.searchOne('Questionnaire', { url, ...(version ? { version } : {}) })) as
    | Questionnaire
    | undefined;
  if (!questionnaire) {
    throw new Error('the pinned Questionnaire of a task cannot be read');
  }
  const misfits = answerProblems(questionnaire, answers.item ?? []);
  if (misfits.length > 0) {
    return fail(400, 'invalid_request', 'These answers do not fit the questionnaire', {
      issues: misfits.map((m) => ({ path: `questionnaireResponse.${m.path}`, message: m.message })),
    });
  }
  const attachments: { linkId: string; url?: string; problems: string[] }[] = [];
  // Every file checked at once (fewer round trips), reported in the answers' order.
  const checked = await Promise.all(
    attached.map(async (a) => ({ ...a, found: await attachmentProblemsOf(medplum, a.attachment, own, origins) })),
  );
  for (const { linkId, attachment, found } of checked) {
    if (found.problems.length > 0) {
      // Named as `Binary/<id>`, never as the presigned URL this bot's own read got: that would hand her
      // a download link for a file that may be someone else's.
      const id = binaryIdOf(attachment.url, origins);
      attachments.push({ linkId, url: id ? `Binary/${id}` : undefined, problems: found.problems });
    }
  }
  if (attachments.length > 0) {
    return fail(422, 'invalid_attachment', 'These answers use files that are not your own uploads as they were', {
      issues: attachments,
    });
  }
  // What she uploaded, shown to her tenant's clinicians in their apps (bots/lib/evidence.ts).
  const uploads = checked.flatMap(({ attachment, found }) =>
    found.bytes && found.binary ? [{ attachment, bytes: found.bytes, binary: found.binary }] : [],
  );
  // Her answers as clinicians read them: written (after the gate) before the completion pins them.
  const files = new Map(
    uploads.map(({ attachment, bytes, binary }): [string, Attachment] => [
      attachment.url as string,
      {
        contentType: attachment.contentType,
        url: binary,
        size: bytes.byteLength,
        title: attachment.title ?? 'Upload',
        ...(attachment.hash ? { hash: attachment.hash } : {}),
        ...(attachment.creation ? { creation: attachment.creation } : {}),
      },
    ]),
  );
  const items = readableItems(questionnaire, answers.item ?? [], files);
  return {
    ok: true,
    output: [],
    entries: [],
    critical: [],
    answers: { response: answers, items, uploads, tags: tagsOf(task) },
  };
}

/**
 * Her answers made readable (each question's text, her files as the uploads they are) when they are not
 * yet, under If-Match on the version she completed; then the completion's output and her evidence, pinned to
 * the version that now stands. Another run that made them readable first is taken as it stands.
 */
async function pinAnswers(
  medplum: MedplumClient,
  { response, items, uploads, tags }: NonNullable<Extract<Work, { ok: true }>['answers']>,
): Promise<Pick<Extract<Work, { ok: true }>, 'output' | 'entries'>> {
  let pinned = response;
  if (!isDeepStrictEqual(response.item ?? [], items)) {
    try {
      const written = await medplum.executeBatch({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            resource: { ...response, item: items },
            request: {
              method: 'PUT',
              url: `QuestionnaireResponse/${response.id}`,
              ifMatch: `W/"${response.meta?.versionId}"`,
            },
          },
        ],
      });
      pinned = written.entry?.[0]?.resource as QuestionnaireResponse;
    } catch (err) {
      if (!lostRace(err)) {
        throw err;
      }
      pinned = (await medplum.readResource('QuestionnaireResponse', response.id as string, {
        cache: 'no-cache',
      })) as QuestionnaireResponse;
    }
  }
  const reference = `QuestionnaireResponse/${pinned.id}/_history/${pinned.meta?.versionId}`;
  return {
    output: [{ type: { text: 'questionnaire-response' }, valueReference: { reference } }],
    // Her own answers (answersWork checked the subject), so the evidence is about her.
    entries: evidenceEntries(uploads, response.subject?.reference as string, reference, tags, new Date().toISOString()),
  };
}

/** A measurement task: every reading valid against its definition, or 422 with each problem. */
async function readingsWork(
  medplum: MedplumClient,
  task: Task,
  patient: Patient & { id: string },
  readings: Reading[],
): Promise<Work> {
  const definitions = await Promise.all(taskObservationDefinitions(task).map((r) => readVersioned(medplum, r)));
  const checked = checkReadings(readings, definitions, new Date());
  if (!checked.ok) {
    return fail(422, 'invalid_measurement', 'These readings cannot be recorded', { issues: checked.issues });
  }
  const entries: BundleEntry[] = [];
  const critical: Reference<Observation>[] = [];
  // Vital signs as FHIR records them: a blood pressure one panel (bots/lib/measurements.ts).
  const recorded = observationsFor(checked.readings, patient, (r) => interpret(r.definition, patient, r.value));
  for (const { observation, critical: urgent } of recorded) {
    const fullUrl = `urn:uuid:${randomUUID()}`;
    entries.push({
      fullUrl,
      resource: { ...observation, meta: { ...observation.meta, tag: tagsOf(task) } },
      request: { method: 'POST', url: 'Observation' },
    });
    if (urgent) {
      critical.push({ reference: fullUrl });
    }
  }
  return {
    ok: true,
    output: entries.map((e) => ({ type: { text: 'observation' }, valueReference: { reference: e.fullUrl } })),
    entries,
    critical,
  };
}

/** The one transaction: the task (anchor), what it produced, the episode bump, the clinician's work. */
async function completionBundle(
  medplum: MedplumClient,
  {
    task,
    patient,
    episode,
    digest,
    work,
  }: {
    task: Task;
    patient: Patient & { id: string };
    episode: EpisodeOfCare | undefined;
    digest: string;
    work: Extract<Work, { ok: true }>;
  },
): Promise<Bundle> {
  const entries: BundleEntry[] = [completion(task, digest, work.output), ...work.entries];
  const readingsQueue = work.critical.length > 0 ? await tenantQueue(medplum, patient, REVIEW_READING) : undefined;
  const tags = tagsOf(task);
  for (const observation of work.critical) {
    entries.push(
      clinicianTask({
        code: REVIEW_READING,
        description: 'A critical reading to review',
        patient,
        queue: readingsQueue,
        focus: observation,
        priority: 'urgent',
        tags,
      }),
    );
  }
  if (episode) {
    entries.push({
      resource: {
        ...episode,
        extension: [
          ...(episode.extension ?? []).filter((e) => e.url !== EXTENSIONS.journeyRevision),
          { url: EXTENSIONS.journeyRevision, valueInteger: revisionOf(episode) + 1 },
        ],
      },
      request: { method: 'PUT', url: `EpisodeOfCare/${episode.id}`, ifMatch: `W/"${episode.meta?.versionId}"` },
    });
    // Only what was issued for her counts (a tag is data): her tasks, and a review issued about her.
    const mine = (await episodeTasks(medplum, episode.id as string)).filter(
      (t) => t.for?.reference === `Patient/${patient.id}`,
    );
    const lastOpen = mine.filter(isPatientTask).every((t) => t.id === task.id || t.status === 'completed');
    const reviewIssued = mine.some((t) =>
      t.code?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === REVIEW_INTAKE),
    );
    if (lastOpen && !reviewIssued) {
      const tenant = patient.managingOrganization?.reference;
      const questionnaire = conditionForm(await conditionCatalogs(medplum, tenant));
      const form = storedForm(questionnaire, tenant);
      entries.push(
        form.entry,
        clinicianTask({
          code: REVIEW_INTAKE,
          description: 'Review the completed intake and assign a condition from the catalog',
          patient,
          queue: await tenantQueue(medplum, patient, REVIEW_INTAKE),
          focus: { reference: `EpisodeOfCare/${episode.id}` },
          tags,
          form: { reference: form.reference, questionnaire },
        }),
      );
    }
  }
  return { resourceType: 'Bundle', type: 'transaction', entry: entries };
}

/** The anchor of every completion: the task `completed` with its outputs and payload digest, under If-Match. */
function completion(task: Task, digest: string, output: Task['output']): BundleEntry {
  const now = new Date().toISOString();
  return {
    resource: {
      ...task,
      status: 'completed',
      lastModified: now,
      executionPeriod: { ...task.executionPeriod, end: now },
      output,
      extension: [
        ...(task.extension ?? []).filter((e) => e.url !== EXTENSIONS.completionDigest),
        { url: EXTENSIONS.completionDigest, valueString: digest },
      ],
    },
    request: { method: 'PUT', url: `Task/${task.id}`, ifMatch: `W/"${task.meta?.versionId}"` },
  };
}

async function episodeOf(medplum: MedplumClient, task: Task): Promise<EpisodeOfCare | undefined> {
  const code = task.meta?.tag?.find((t) => t.system === SYSTEMS.episode)?.code;
  const id = code?.startsWith('EpisodeOfCare/') ? code.slice('EpisodeOfCare/'.length) : undefined;
  const episode = id
    ? ((await medplum.readResource('EpisodeOfCare', id).catch(absent)) as EpisodeOfCare | undefined)
    : undefined;
  // Only the patient's own episode counts (a tag is data; the episode's patient is the check).
  return episode?.patient?.reference === task.for?.reference ? episode : undefined;
}

const tagsOf = (task: Task) => (task.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);

const revisionOf = (episode: EpisodeOfCare): number =>
  episode.extension?.find((e) => e.url === EXTENSIONS.journeyRevision)?.valueInteger ?? 0;

/** Every `valueAttachment` in the answers, with the item it answers, nested items included. */
function attachmentsOf(
  items: NonNullable<QuestionnaireResponse['item']>,
): { linkId: string; attachment: Attachment }[] {
  return items.flatMap((item) => [
    ...(item.answer ?? []).flatMap((a) => [
      ...(a.valueAttachment ? [{ linkId: item.linkId, attachment: a.valueAttachment }] : []),
      ...attachmentsOf(a.item ?? []),
    ]),
    ...attachmentsOf(item.item ?? []),
  ]);
}

/** Medplum's own URLs for a Binary: its base, and its storage base (the Project secret `storage-base-url`
 * where Medplum's `storageBaseUrl` is not the default `<base>storage/`, e.g. a hosted Medplum). */
function binaryOrigins(medplum: MedplumClient, event: BotEvent): BinaryOrigins {
  const storageBaseUrl = event.secrets?.[STORAGE_BASE_SECRET]?.valueString;
  return { baseUrl: medplum.getBaseUrl(), ...(storageBaseUrl ? { storageBaseUrl } : {}) };
}

/**
 * Why an attachment may not stand in her answer (contracts/attachments.ts): it must name a Binary of
 * this Medplum (`Binary/<id>`, or the presigned URL Medplum serves in its place) that is her own upload, of an accepted type whose bytes carry its signature, and be
 * what the attachment claims (type, size, hash). The bytes are read and hashed here.
 */
async function attachmentProblemsOf(
  medplum: MedplumClient,
  attachment: Attachment,
  patient: string,
  origins: BinaryOrigins,
): Promise<{ problems: string[]; bytes?: Uint8Array; binary?: string }> {
  const id = binaryIdOf(attachment.url, origins);
  const binary = id ? await medplum.readResource('Binary', id).catch(absent) : undefined;
  if (binary?.securityContext?.reference !== patient) {
    // Not hers (or not there): nothing more is read, and nothing more said of it.
    return { problems: ['not_own_document'] };
  }
  if (attachment.size !== undefined && attachment.size > DOCUMENT_MAX_BYTES) {
    return { problems: ['size_out_of_bounds'] };
  }
  const bytes = new Uint8Array(
    await (await medplum.download(medplum.fhirUrl('Binary', binary.id as string))).arrayBuffer(),
  );
  const problems = attachmentProblems(
    attachment,
    {
      contentType: binary.contentType,
      securityContext: binary.securityContext?.reference,
      bytes,
      sha1: createHash('sha1').update(bytes).digest('base64'),
    },
    patient,
  );
  return { problems, bytes, binary: `Binary/${binary.id}` };
}
