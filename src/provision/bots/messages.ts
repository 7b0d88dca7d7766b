import { unchanged } from '../policies/common';
import type { PlatformBot } from '../shape';

/**
 * What the send-message bot may write: her message in a thread (`partOf` it, from her, about her); a thread
 * she opens (from her, about her, to her among others); and another's thread only touched (its `sent`, which
 * orders the Provider app's Messages), nothing else of it. It checks a thread is hers before writing in it.
 */
export const HER_MESSAGE_OR_THREAD_TOUCHED = {
  language: 'text/fhirpath' as const,
  expression:
    "(%before.exists().not() and %after.sender.reference.startsWith('Patient/') and " +
    '%after.subject.reference = %after.sender.reference and ' +
    '(%after.partOf.exists() or %after.recipient.where(reference = %after.sender.reference).exists())) or ' +
    '(%before.exists() and %before.partOf.empty() and %after.partOf.empty() and ' +
    unchanged(['status', 'subject', 'sender', 'recipient', 'topic', 'payload', 'category']) +
    ')',
};

export const sendMessage: PlatformBot = {
  access: {
    key: 'bot-send-message',
    policy: {
      name: 'Bot: send a message',
      resource: [
        // Her name, as the Provider app shows a sender.
        { resourceType: 'Patient', interaction: ['read'] },
        // Her care provider's care team (its intake queue), whom a thread she opens is addressed to.
        { resourceType: 'CareTeam', interaction: ['read', 'search'] },
        // The thread she answers (checked hers), her messages of the last hour (her cap), her message.
        {
          resourceType: 'Communication',
          interaction: ['create', 'read', 'search', 'update'],
          writeConstraint: [HER_MESSAGE_OR_THREAD_TOUCHED],
        },
      ],
    },
  },
  bot: {
    key: 'send-message',
    patient: true,
    description: 'POST /v1/messages and /v1/messages/{id}: she writes to her care team, or answers in a thread.',
    accessPolicy: 'bot-send-message',
  },
};
