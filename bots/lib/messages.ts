import type { Communication, Reference } from '@medplum/fhirtypes';

/**
 * Her message threads (contracts/messages.ts) as Medplum's Provider app keeps them: a thread is a
 * Communication with no `partOf`, about her (`subject`), that names her among its participants
 * (`recipient`); a message is a Communication `partOf` it with a `sender` and a `sent` instant. What the
 * gateway reads with her token and what the send-message bot writes are read the same way here.
 */

/** A Communication that is one of her threads (a header, not a message, about her and to her). */
export function isHerThread(header: Communication, patientId: string): boolean {
  const her = `Patient/${patientId}`;
  return (
    !header.partOf?.length &&
    header.subject?.reference === her &&
    (header.recipient ?? []).some((r) => r.reference === her) &&
    (header.status === 'in-progress' || header.status === 'completed')
  );
}

/** A message of thread `threadId` (its `partOf`), sent (the app lists no message without `sent`). */
export const isMessageOf = (message: Communication, threadId: string): boolean =>
  (message.partOf ?? []).some((p) => p.reference === `Communication/${threadId}`) && Boolean(message.sent);

const PARTICIPANT = /^(Patient|Practitioner|PractitionerRole|CareTeam|Organization)\/[A-Za-z0-9\-.]{1,64}$/;

function participant(reference: Reference | undefined): { reference: string; display?: string } | undefined {
  return reference?.reference && PARTICIPANT.test(reference.reference)
    ? { reference: reference.reference, ...(reference.display ? { display: reference.display } : {}) }
    : undefined;
}

export interface MessageView {
  message: string;
  from: { reference: string; display?: string };
  fromMe: boolean;
  text: string;
  attachments: number;
  sentAt: string;
}

/** A message as she reads it; undefined for what is not a readable message (no sender, no `sent`). */
export function messageView(message: Communication, patientId: string): MessageView | undefined {
  const from = participant(message.sender);
  if (!message.id || !from || !message.sent) {
    return undefined;
  }
  const payload = message.payload ?? [];
  return {
    message: `Communication/${message.id}`,
    from,
    fromMe: from.reference === `Patient/${patientId}`,
    text: payload
      .map((p) => p.contentString)
      .filter((t): t is string => typeof t === 'string')
      .join('\n'),
    attachments: payload.filter((p) => p.contentAttachment || p.contentReference).length,
    sentAt: message.sent,
  };
}

/** A thread as she reads it, with its last message when there is one. */
export function threadView(header: Communication & { id: string }, patientId: string, last?: Communication) {
  const lastMessage = last ? messageView(last, patientId) : undefined;
  return {
    thread: `Communication/${header.id}`,
    ...(header.topic?.text ? { topic: header.topic.text } : {}),
    status: header.status === 'in-progress' ? ('open' as const) : ('closed' as const),
    participants: (header.recipient ?? []).flatMap((r) => participant(r) ?? []),
    ...(lastMessage ? { lastMessage } : {}),
    updatedAt: header.meta?.lastUpdated ?? lastMessage?.sentAt ?? '',
  };
}
