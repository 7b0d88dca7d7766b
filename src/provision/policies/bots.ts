import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { BOT_AUDIENCE, SYSTEMS } from '../../../contracts/systems';
import { CLIENT_SECRETS, CONSENT_ONLY_STATUS_CHANGES, unchanged } from './common';

/** What the bots' own access policies add to the shared constraints (each bot's policy is in platform.ts, with the bot). */

/** A plan's visit request (JOURNEY E): `intent` plan, since no practitioner orders it; never an order. */
export const VISIT_PLANS_ONLY = { language: 'text/fhirpath' as const, expression: "%after.intent = 'plan'" };

/**
 * Her completed answers made readable (issue 48: each question's text, her files as the uploads they are):
 * completed before and after, about and by the same people, answering the same form, the same items.
 */
export const READABLE_ANSWERS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and %before.status = 'completed' and %after.status = 'completed' and " +
    '%after.item.linkId = %before.item.linkId and ' +
    unchanged(['subject', 'questionnaire', 'authored', 'author', 'source', 'basedOn', 'partOf', 'encounter']),
};

/** A visit reviewed: an Appointment fulfilled, a segment finished; who and what it was for unchanged. */
export const FULFILMENT_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'fulfilled' or %after.status = 'finished') and " +
    unchanged(['participant', 'subject', 'appointment', 'basedOn']),
};

/** A visit's status decided from its segments: booked, arrived or fulfilled; who, when and what for unchanged. */
export const VISIT_STATUS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'booked' or %after.status = 'arrived' or %after.status = 'fulfilled') and " +
    unchanged(['participant', 'slot', 'basedOn', 'start', 'end']),
};

/** A task past due marked so (priority urgent, business status overdue): who owns it and its state unchanged. */
export const MARKED_OVERDUE_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and %after.priority = 'urgent' and %after.businessStatus.text = 'overdue' and " +
    unchanged(['status', 'owner', 'for', 'focus', 'code', 'output', 'restriction']),
};

/**
 * A Slot filed in its tenant (its accounts), withdrawn (`free -> busy-unavailable`: no longer in her hours,
 * a day she is away) or offered again (`busy-unavailable -> free`): its time and schedule unchanged, and a
 * booked Slot never touched; creating one is free.
 */
export const SLOT_FILED_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    '%before.exists().not() or (%after.start = %before.start and %after.end = %before.end and ' +
    '%after.schedule = %before.schedule and (%after.status = %before.status or ' +
    "(%before.status = 'free' and %after.status = 'busy-unavailable') or " +
    "(%before.status = 'busy-unavailable' and %after.status = 'free')))",
};

/** Booking changes a Slot's status between free and busy, and nothing else of it. */
export const SLOT_STATUS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'busy' or %after.status = 'free') and %after.start = %before.start and " +
    '%after.end = %before.end and %after.schedule = %before.schedule',
};

/**
 * Placing an order changes an accepted proposal in place (JOURNEY G): intent proposal -> order, or it is
 * cancelled; who it is for and who requested it stay as they were.
 */
export const PLACEMENT_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and %before.intent = 'proposal' and (%after.intent = 'order' or %after.status = 'cancelled' or %after.status = 'revoked') and " +
    '%after.subject = %before.subject and ' +
    // A request has a requester, a RequestGroup an author: unchanged means equal, or absent before and after.
    unchanged(['requester', 'author']),
};

/** What applying an inbound SMS STOP takes: the message, its integration's client, the SMS Consents. */
export function smsOptOutAccess(): AccessPolicyResource[] {
  return [
    { resourceType: 'Communication', criteria: INBOUND_SMS, interaction: ['read', 'search'] },
    {
      resourceType: 'ClientApplication',
      criteria: SMS_INTEGRATION,
      interaction: ['read'],
      hiddenFields: CLIENT_SECRETS,
    },
    {
      resourceType: 'Consent',
      interaction: ['read', 'search', 'update'],
      writeConstraint: [CONSENT_ONLY_STATUS_CHANGES],
    },
  ];
}

export const BOT_CODE = ['executableCode', 'sourceCode'];

/** The subscription bots whose lost deliveries the reconciler re-drives. */
export const REDRIVEN_BOTS = `Bot?identifier=${SYSTEMS.bots}|eligibility,${SYSTEMS.bots}|compose-offer,${SYSTEMS.bots}|visit-completion`;

/**
 * The platform's bots whose names clinicians see as the authors of what they wrote (Medplum's app reads
 * `meta.author` to name it; a Bot it may not read shows as "[Forbidden]"). Reading a Bot is also leave
 * to `$execute` it (packages/server/src/fhir/operations/execute.ts reads it as the caller), so only bots
 * that answer a clinician's run with a refusal or a replay of what Medplum delivered them anyway: every
 * patient-facing bot (it runs for a verified patient only), the spine's and visits' subscription bots
 * (a clinician's run is a redelivery: they act only for the owner who completed the work, idempotently,
 * from their own reads), the reconciler and the slot maker (a person's run refused) and the SMS opt-out
 * (the integration's messages only). Never the webhooks bot (a delivery of her choosing).
 */
export const NAMED_BOTS = [
  `Bot?_tag=${BOT_AUDIENCE.system}|${BOT_AUDIENCE.patient}`,
  `Bot?identifier=${[
    'eligibility',
    'compose-offer',
    'visit-review',
    'visit-completion',
    'reconcile',
    'sms-opt-out',
    'materialize-slots',
  ]
    .map((key) => `${SYSTEMS.bots}|${key}`)
    .join(',')}`,
];

/** Read by a subscription bot to recognise the reconciler as the one other caller it acts for. */
export const RECONCILER: AccessPolicyResource = {
  resourceType: 'Bot',
  criteria: `Bot?identifier=${SYSTEMS.bots}|reconcile`,
  interaction: ['read'],
  hiddenFields: BOT_CODE,
};

/** Inbound SMS, as the SMS integration writes them. */
export const INBOUND_SMS = `Communication?category=${SYSTEMS.communicationCategory}|inbound-sms`;

/** The SMS integration's client: the only author whose inbound SMS the opt-out bot believes. */
export const SMS_INTEGRATION = `ClientApplication?_tag=${SYSTEMS.integration}|sms`;
