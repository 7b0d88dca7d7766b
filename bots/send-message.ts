import { type BotEvent, formatHumanName, type MedplumClient } from '@medplum/core';
import type { Communication, Patient } from '@medplum/fhirtypes';
import { absent } from './lib/absent';
import { isHerThread, MESSAGES_PER_HOUR, type MessageView, messageView } from './lib/messages';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type SendMessageResult = BotResult<MessageView>;

const HOUR_MS = 60 * 60_000;

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
  const wait = await overHourlyCap(medplum, patientId);
  if (wait !== undefined) {
    return fail(429, 'rate_limited', `At most ${MESSAGES_PER_HOUR} messages can be sent in an hour; try again later`, {
      retryAfter: wait,
      limit: MESSAGES_PER_HOUR,
    });
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

/** Seconds until she may send again, or undefined while she is under the cap. */
async function overHourlyCap(medplum: MedplumClient, patientId: string): Promise<number | undefined> {
  const now = Date.now();
  const mine = await medplum.searchResources('Communication', {
    sender: `Patient/${patientId}`,
    sent: `ge${new Date(now - HOUR_MS).toISOString()}`,
    'part-of:missing': 'false',
    _count: String(MESSAGES_PER_HOUR),
    _sort: 'sent',
  });
  if (mine.length < MESSAGES_PER_HOUR) {
    return undefined;
  }
  const oldest = Date.parse(mine[0]?.sent ?? '') || now;
  return Math.max(1, Math.ceil((oldest + HOUR_MS - now) / 1000));
}
