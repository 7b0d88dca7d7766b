import { unchanged } from '../policies/common';
import type { PlatformBot } from '../shape';

/**
 * What the send-message bot may write: her message in a thread (`partOf` it, from her, about her), and
 * the thread itself only touched (its `sent`, which orders the Provider app's Messages); nothing else of a
 * thread, and never a thread of its own. It checks the thread is hers before writing.
 */
export const HER_MESSAGE_OR_THREAD_TOUCHED = {
  language: 'text/fhirpath' as const,
  expression:
    "(%before.exists().not() and %after.partOf.exists() and %after.sender.reference.startsWith('Patient/') and " +
    '%after.subject.reference = %after.sender.reference) or ' +
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
    description: 'POST /v1/messages/{id}: her answer in a thread with her care team.',
    accessPolicy: 'bot-send-message',
  },
};
