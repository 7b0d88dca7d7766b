import { CONSENT_ONLY_STATUS_CHANGES } from '../policies/common';
import { agreementReads } from '../policies/patient';
import type { PlatformBot } from '../shape';

/** The bots of her agreements: accepting and withdrawing them, and reading one of her own uploads. */

export const acceptAgreements: PlatformBot = {
  access: {
    key: 'bot-accept-agreements',
    policy: {
      name: 'Bot: accept agreements',
      resource: [
        // The published agreements and her acceptances, to know what she has still to accept.
        ...agreementReads(),
        // Create only: an acceptance, once written, is never changed by this bot.
        { resourceType: 'Consent', interaction: ['create', 'read', 'search'] },
      ],
    },
  },
  bot: {
    key: 'accept-agreements',
    patient: true,
    description: 'POST /v1/agreements/acceptances: one Consent per agreement with clickwrap proof.',
    accessPolicy: 'bot-accept-agreements',
  },
};

export const withdrawAgreement: PlatformBot = {
  access: {
    key: 'bot-withdraw-agreement',
    policy: {
      name: 'Bot: withdraw agreement',
      resource: [
        // The agreement she withdraws from, and her acceptance of it.
        ...agreementReads(),
        // Her acceptance made inactive: its status, nothing else of it.
        {
          resourceType: 'Consent',
          interaction: ['read', 'search', 'update'],
          writeConstraint: [CONSENT_ONLY_STATUS_CHANGES],
        },
      ],
    },
  },
  bot: {
    key: 'withdraw-agreement',
    patient: true,
    description: 'POST /v1/agreements/withdrawals: the Consent becomes inactive.',
    accessPolicy: 'bot-withdraw-agreement',
  },
};

export const readDocument: PlatformBot = {
  access: {
    key: 'bot-read-document',
    policy: {
      name: 'Bot: read a document',
      resource: [
        // Any Binary by id: it checks the security context is the requester before handing anything over.
        { resourceType: 'Binary', interaction: ['read'] },
        // The Patients that are their contexts (a Medplum that checks securityContext reads it too).
        { resourceType: 'Patient', interaction: ['read'] },
      ],
    },
  },
  bot: {
    key: 'read-document',
    patient: true,
    description: 'GET /v1/documents/{id}: one of her own uploads.',
    accessPolicy: 'bot-read-document',
  },
};
