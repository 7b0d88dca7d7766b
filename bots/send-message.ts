import { randomUUID } from 'node:crypto';
import { type BotEvent, formatHumanName, type MedplumClient } from '@medplum/core';
import type { Communication, Patient } from '@medplum/fhirtypes';
import { MESSAGES_PER_HOUR, THREADS_PER_DAY } from '../contracts/message-rules';
import { SYSTEMS } from '../contracts/systems';
import { absent } from './lib/absent';
import { isHerThread, type MessageView, messageView, threadView } from './lib/messages';
import { tenantQueue } from './lib/queues';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type SendMessageResult = BotResult<MessageView> | BotResult<ReturnType<typeof threadView>>;

const HOUR_MS = 60 * 60_000;
/** The category of the message that opens a thread of hers (what her daily count of threads counts). */
const OPENING_CODE = 'patient-opened-thread';
const OPENING = `${SYSTEMS.communicationCategory}|${OPENING_CODE}`;

/**
 * POST /v1/messages/{id} (issue 48): she answers in one of her threads with her care team. The thread is
 * read by the bot itself and must be hers (about her, naming her, a thread and not a message) and open;
 * her message goes from her to the thread's other participants, `partOf` the thread, as Medplum's Provider
 * app writes its own, so her care team reads it in the app's Messages. She never writes a Communication
 * herself: a direct write could name any thread (another patient's, whose id she guessed) as its `partOf`,
 * which no access policy can check.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<SendMessageResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'send-message');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  if (!('thread' in start.input)) {
    return startThread(medplum, patientId, start.input);
  }
  const { thread, text } = start.input;
  const header = await medplum.readResource('Communication', thread).catch(absent);
  if (!header || !isHerThread(header, patientId)) {
    return fail(404, 'not_found', 'No thread of yours has this id');
  }
  if (header.status !== 'in-progress') {
    return fail(409, 'invalid_state', 'Your care team closed this thread; it takes no more answers', {
      state: 'closed',
    });
  }
  const capped = await overHourlyCap(medplum, patientId);
  if (capped) {
    return capped;
  }
  const patient = (await medplum.readResource('Patient', patientId)) as Patient;
  const her = { reference: `Patient/${patientId}`, display: nameOf(patient) };
  const sent = new Date().toISOString();
  const message = await medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    partOf: [{ reference: `Communication/${header.id}` }],
    subject: her,
    sender: her,
    recipient: (header.recipient ?? []).filter((r) => r.reference !== her.reference),
    sent,
    payload: [{ contentString: text }],
  });
  // The app lists threads by when their header last changed: its own sends touch the header's `sent`,
  // and so does hers, so her answer brings the thread up in her care team's Messages. Best effort: a
  // clinician's edit of the thread at this moment (409) loses only that ordering, never her message.
  await medplum
    .updateResource({ ...header, sent }, { headers: { 'If-Match': `W/"${header.meta?.versionId}"` } })
    .catch(() => undefined);
  const view = messageView(message, patientId) as MessageView;
  return { ok: true, ...view };
}

function nameOf(patient: Patient): string | undefined {
  const name = patient.name?.[0];
  return name ? formatHumanName(name) || undefined : undefined;
}

/**
 * The 429 once she has sent `limit` of these (messages, or threads she opened) within `windowMs`, with the
 * seconds until the oldest of them leaves the window; undefined while she is under it. Counted before
 * writing: sends at the same moment may pass it by a few (docs/messages.md), it bounds a flood.
 */
async function overCap(
  medplum: MedplumClient,
  patientId: string,
  kind: { threads: boolean; limit: number; windowMs: number; what: string },
): Promise<ReturnType<typeof fail> | undefined> {
  const now = Date.now();
  // Threads are counted by the message that opened each (its `sent` never changes; a thread's own `sent`
  // moves with every message in it, as the Provider app orders its list by it).
  const mine = await medplum.searchResources('Communication', {
    sender: `Patient/${patientId}`,
    sent: `ge${new Date(now - kind.windowMs).toISOString()}`,
    'part-of:missing': 'false',
    ...(kind.threads ? { category: OPENING } : {}),
    _count: String(kind.limit),
    _sort: 'sent',
  });
  if (mine.length < kind.limit) {
    return undefined;
  }
  const oldest = Date.parse(mine[0]?.sent ?? '') || now;
  const retryAfter = Math.max(1, Math.ceil((oldest + kind.windowMs - now) / 1000));
  return fail(429, 'rate_limited', `At most ${kind.limit} ${kind.what}; try again later`, {
    retryAfter,
    limit: kind.limit,
  });
}

const overHourlyCap = (medplum: MedplumClient, patientId: string) =>
  overCap(medplum, patientId, {
    threads: false,
    limit: MESSAGES_PER_HOUR,
    windowMs: HOUR_MS,
    what: 'messages can be sent in an hour',
  });

/**
 * POST /v1/messages: she writes to her care team. A thread about her, from her, to her and her care
 * provider's care team (its intake queue: the clinicians of her tenant read it in the Provider app's
 * Messages), and her first message in it, in one transaction: a thread is never listed without it.
 */
async function startThread(
  medplum: MedplumClient,
  patientId: string,
  input: { topic?: string; text: string },
): Promise<BotResult<ReturnType<typeof threadView>>> {
  const capped =
    (await overCap(medplum, patientId, {
      threads: true,
      limit: THREADS_PER_DAY,
      windowMs: 24 * HOUR_MS,
      what: 'threads can be opened in a day',
    })) ?? (await overHourlyCap(medplum, patientId));
  if (capped) {
    return capped;
  }
  const patient = (await medplum.readResource('Patient', patientId)) as Patient;
  const team = await tenantQueue(medplum, patient);
  if (!team?.id) {
    return fail(409, 'invalid_state', 'Your care provider has no care team to write to yet', { state: 'no-care-team' });
  }
  const her = { reference: `Patient/${patientId}`, display: nameOf(patient) };
  const careTeam = { reference: `CareTeam/${team.id}`, ...(team.name ? { display: team.name } : {}) };
  const sent = new Date().toISOString();
  const headerUrl = `urn:uuid:${randomUUID()}`;
  const response = await medplum.executeBatch({
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        fullUrl: headerUrl,
        resource: {
          resourceType: 'Communication',
          status: 'in-progress',
          subject: her,
          sender: her,
          recipient: [her, careTeam],
          ...(input.topic ? { topic: { text: input.topic } } : {}),
          sent,
        },
        request: { method: 'POST', url: 'Communication' },
      },
      {
        resource: {
          resourceType: 'Communication',
          status: 'in-progress',
          partOf: [{ reference: headerUrl }],
          subject: her,
          sender: her,
          recipient: [careTeam],
          sent,
          category: [{ coding: [{ system: SYSTEMS.communicationCategory, code: OPENING_CODE }] }],
          payload: [{ contentString: input.text }],
        },
        request: { method: 'POST', url: 'Communication' },
      },
    ],
  });
  const [header, message] = (response.entry ?? []).map((e) => e.resource as Communication);
  return { ok: true, ...threadView(header as Communication & { id: string }, patientId, message) };
}
