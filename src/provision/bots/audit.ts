import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { ACCESS_LOG_RECORD_TYPES } from '../../../contracts/access-log-rules';
import { BOT_CODE } from '../policies/bots';
import { CLIENT_SECRETS } from '../policies/common';
import type { AccessPolicyDefinition, PlatformBot } from '../shape';

/**
 * Her access log (contracts/access-log.ts): the bot that reads it for her, and what lets Medplum keep its
 * AuditEvents of everyone who reads or changes her records.
 *
 * Medplum (with `saveAuditEvents`) writes the AuditEvent of an interaction through the caller's own
 * access: a member whose policy cannot create AuditEvents leaves no entry at all (docs/medplum-auditevents.md).
 * (5.1.29 too: it saves them on a clone of the caller's repository, under her policy; a patient's 5.1 entries
 * were refused, "Failed to save AuditEvent: Forbidden", until the application agent below was allowed.)
 * So every member who touches her records may create them, but only ones that name herself as the one who
 * did it: an entry that names someone else is refused (and the log also leaves out any entry whose author,
 * as Medplum stamps it, is not the one it names). None of them may read, change or delete one.
 */
export const OWN_AUDIT_TRAIL: AccessPolicyResource = {
  resourceType: 'AuditEvent',
  interaction: ['create'],
  // Medplum 5.1 names the ClientApplication she signed in through as a second agent, not a requestor
  // (packages/server/src/util/auditevent.ts createAuditEvent): allowed, and nothing else beside her.
  writeConstraint: [
    {
      language: 'text/fhirpath',
      expression:
        "%after.agent.first().who.reference = '%profile' and %after.agent.first().requestor = true and " +
        "%after.agent.skip(1).all(requestor = false and who.reference.startsWith('ClientApplication/'))",
    },
    // Never dated ahead (Medplum dates its own as it writes them): an entry of 2150 would head her log.
    // The log orders by when Medplum stored an entry and leaves out one dated otherwise (bots/access-log.ts).
    { language: 'text/fhirpath', expression: '%after.recorded <= now()' },
  ],
};

/**
 * A patient's own trail: also about no other patient (her entries about another's Patient would fill
 * that patient's log's searches with entries it leaves out, pushing her true ones off the page).
 */
export const OWN_PATIENT_AUDIT_TRAIL: AccessPolicyResource = {
  ...OWN_AUDIT_TRAIL,
  writeConstraint: [
    ...(OWN_AUDIT_TRAIL.writeConstraint ?? []),
    {
      language: 'text/fhirpath',
      expression: "%after.entity.all(what.reference.startsWith('Patient/').not() or what.reference = '%profile')",
    },
  ],
};

/** Every policy of a member who reads or changes her records keeps its own audit trail (bots included). */
export function withOwnAuditTrail(definition: AccessPolicyDefinition): AccessPolicyDefinition {
  const resource = definition.policy.resource ?? [];
  return resource.some((r) => r.resourceType === 'AuditEvent')
    ? definition
    : { ...definition, policy: { ...definition.policy, resource: [...resource, OWN_AUDIT_TRAIL] } };
}

export const accessLog: PlatformBot = {
  access: {
    key: 'bot-access-log',
    policy: {
      name: 'Bot: access log',
      resource: [
        // Medplum's record of every interaction: read, never written (her entries picked by the bot).
        { resourceType: 'AuditEvent', interaction: ['read', 'search'] },
        // Who each entry names: a member of staff's name, an application's name (never its secret), a
        // workflow's purpose (never its code).
        { resourceType: 'Practitioner', interaction: ['read'] },
        // The caller's own Patient, for her tenant (`meta.accounts`): a clinician's entry counts only when
        // the clinician is of it.
        { resourceType: 'Patient', interaction: ['read'] },
        { resourceType: 'ClientApplication', interaction: ['read'], hiddenFields: CLIENT_SECRETS },
        { resourceType: 'Bot', interaction: ['read'], hiddenFields: BOT_CODE },
        // The records of hers its searches go through (`entity:Observation.patient=`...): found, not read.
        ...ACCESS_LOG_RECORD_TYPES.map((resourceType) => ({ resourceType, interaction: ['search' as const] })),
      ],
    },
  },
  bot: {
    key: 'access-log',
    patient: true,
    description: 'GET /v1/patient/access-log: who opened or changed her records, from Medplum’s AuditEvents.',
    accessPolicy: 'bot-access-log',
  },
};
