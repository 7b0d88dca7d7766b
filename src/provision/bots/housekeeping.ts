import { CLINICIAN_KINDS } from '../../../bots/lib/queues';
import { SYSTEMS } from '../../../contracts/systems';
import { BOT_CODE, INBOUND_SMS, MARKED_OVERDUE_ONLY, REDRIVEN_BOTS, smsOptOutAccess } from '../policies/bots';
import { CLIENT_SECRETS } from '../policies/common';
import type { AccessPolicyDefinition, PlatformBot } from '../shape';

/** The platform's upkeep: a patient homed in her tenant, SMS opt-outs, and the reconciler's re-drives. */

export const patientHome: PlatformBot = {
  access: {
    key: 'bot-patient-home',
    policy: {
      name: 'Bot: patient-home',
      resource: [
        // The self-registered patient, homed in the tenant of the app she registered with.
        { resourceType: 'Patient', interaction: ['read', 'search', 'update'] },
        // The app she registered with (never its secret): which tenant it serves.
        { resourceType: 'ClientApplication', interaction: ['read'], hiddenFields: CLIENT_SECRETS },
        // The tenant itself.
        { resourceType: 'Organization', interaction: ['read', 'search'] },
      ],
    },
  },
  bot: {
    key: 'patient-home',
    patient: true,
    description: 'Assigns a self-registered patient to the tenant of the app they registered with.',
    accessPolicy: 'bot-patient-home',
    admin: true,
  },
};

export const smsOptOut: PlatformBot = {
  access: { key: 'bot-sms-opt-out', policy: { name: 'Bot: SMS opt-out', resource: smsOptOutAccess() } },
  bot: {
    key: 'sms-opt-out',
    description: 'Inbound SMS STOP: the matching SMS Consent becomes inactive.',
    accessPolicy: 'bot-sms-opt-out',
  },
};

export const reconcile: PlatformBot = {
  access: {
    key: 'bot-reconcile',
    policy: {
      name: 'Bot: reconciler',
      // SMS opt-outs as the opt-out bot applies them; the spine's lost deliveries: it finds the work
      // left undone and executes the bot that lost it (it writes nothing of the spine itself).
      resource: [
        ...smsOptOutAccess(),
        // The spine's work left undone, found among the tasks.
        { resourceType: 'Task', interaction: ['read', 'search'] },
        // Clinician work past due: marked urgent and overdue, nothing else of it.
        {
          resourceType: 'Task',
          criteria: `Task?code=${CLINICIAN_KINDS.map((kind) => `${SYSTEMS.taskKind}|${kind}`).join(',')}`,
          interaction: ['read', 'search', 'update'],
          writeConstraint: [MARKED_OVERDUE_ONLY],
        },
        // Patients' Idempotency-Key records past their 24 hours: deleted (nothing else of theirs).
        {
          resourceType: 'Basic',
          criteria: `Basic?code=${SYSTEMS.idempotency}|request`,
          interaction: ['read', 'search', 'delete'],
        },
        // Visits whose end was lost: it finds them (their segments and requests) and executes visit-completion.
        ...['Appointment', 'Encounter', 'ServiceRequest'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const],
        })),
        // The bots whose lost deliveries it executes again (never their code).
        { resourceType: 'Bot', criteria: REDRIVEN_BOTS, interaction: ['read', 'search'], hiddenFields: BOT_CODE },
      ],
    },
  },
  bot: {
    key: 'reconcile',
    description:
      'Every 10 minutes: re-drives subscription work left undone (inbound SMS STOPs not yet applied, eligibility and offers of the clinical spine).',
    accessPolicy: 'bot-reconcile',
    cronString: '*/10 * * * *',
  },
};

/** The SMS integration's client: it writes inbound messages, nothing else. */
export const smsIntegrationAccess: AccessPolicyDefinition = {
  key: 'integration-sms',
  policy: {
    name: 'SMS integration: writes inbound messages',
    resource: [{ resourceType: 'Communication', criteria: INBOUND_SMS, interaction: ['create', 'read'] }],
  },
};
