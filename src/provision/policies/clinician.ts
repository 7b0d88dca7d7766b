import type { AccessPolicyResource } from '@medplum/fhirtypes';
import {
  MEDPLUM_R4_PROJECT,
  QUEUE_STAFF_PARAMETER,
  QUEUES_PARAMETER,
  SYSTEMS,
  TENANT_PARAMETER,
} from '../../../contracts/systems';
import { OWN_AUDIT_TRAIL } from '../bots/audit';
import { BOT_CODE, NAMED_BOTS } from './bots';
import {
  CATALOG_TYPES,
  catalogReads,
  inTenant,
  JOURNEY_KEYS,
  MACHINE_CLIENTS,
  ONLY_OWN_TENANT,
  PROPOSALS_ONLY,
  SERVER_OWNED_TAGS,
  unchanged,
} from './common';

/** The clinician's access policy: her tenant's charts and queues, and each write she may make with the constraint that bounds it. */

/** Clinical types a clinician reads and writes, for the patients of their own tenant. */
export const CLINICIAN_WRITABLE_TYPES = [
  'Patient',
  'Observation',
  'Condition',
  'Task',
  'Encounter',
  'EpisodeOfCare',
  'Communication',
  'QuestionnaireResponse',
  'DocumentReference',
  // The self-pay Coverage the Provider app's Details & Billing tab makes for a patient who has none (the
  // platform keeps no insurance; a clinic may record it).
  'Coverage',
] as const;

/** Chart types the platform does not use that Medplum's Provider app asks for: read-only, tenant-scoped. */
export const CLINICIAN_CHART_TYPES = [
  'AllergyIntolerance',
  // The encounter's Details & Billing tab looks for its claim, its response and its charges (none here).
  'Claim',
  'ClaimResponse',
  'ChargeItem',
  'Immunization',
  'Procedure',
  'Device',
  'Goal',
  'DiagnosticReport',
  'DeviceRequest',
  'Media',
  'MedicationStatement',
] as const;

/** Written only by the platform's bots: a clinician reads them in their tenant, never writes them. */
export const CLINICIAN_READONLY_TYPES = [
  'CarePlan',
  'RequestGroup',
  'Consent',
  'CareTeam',
  'Slot',
  'Schedule',
] as const;

/** A copy of a patient's upload (bots/lib/evidence.ts), as the completing bot writes it: new, and marked. */
export const EVIDENCE_ONLY = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() and %after.identifier.where(system = '${SYSTEMS.evidence}').exists()`,
};

/** What a patient uploaded is evidence: a clinician neither edits a copy of it nor makes one up. */
export const NOT_EVIDENCE = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.identifier.where(system = '${SYSTEMS.evidence}').empty() and ` +
    `%after.identifier.where(system = '${SYSTEMS.evidence}').empty()`,
};

/** Agreements are provisioning's (their identifier tells patients' apps to ask for consent again): never hers. */
export const NOT_AN_AGREEMENT = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.identifier.where(system = '${SYSTEMS.agreement}').empty() and ` +
    `%after.identifier.where(system = '${SYSTEMS.agreement}').empty()`,
};

/** Bots that issue clinician work store its form (contracts/work-forms.ts): created once, a work form only. */
export const WORK_FORM_CREATES: AccessPolicyResource = {
  resourceType: 'Questionnaire',
  interaction: ['create'],
  writeConstraint: [
    {
      language: 'text/fhirpath',
      expression: `%before.exists().not() and %after.url.startsWith('${SYSTEMS.workForm}/')`,
    },
  ],
};

/** A Task's owner as one string ('' when it has none), so comparisons never meet an empty collection. */
export const ownerOf = (side: 'before' | 'after'): string =>
  `iif(%${side}.owner.exists(), %${side}.owner.reference, '')`;

export const ME = "'%profile'";

/** The queue a task waits in (its `performerType` coding under SYSTEMS.queue: `CareTeam/<id>`), or ''. */
export const queueOf = (side: 'before' | 'after'): string =>
  `iif(%${side}.performerType.coding.where(system = '${SYSTEMS.queue}').exists(), ` +
  `%${side}.performerType.coding.where(system = '${SYSTEMS.queue}').code.first(), '')`;

/**
 * Work of a queue she works: one of the CareTeams her membership's `queues` parameter lists (Medplum
 * substitutes `%queues` with `'CareTeam/a' | 'CareTeam/b'`, or `{}`: contracts/systems.ts QUEUES_PARAMETER).
 * A FHIRPath constraint cannot resolve the CareTeam to read its participants, so her membership carries
 * them; provisioning derives both from one list (tenantResources).
 */
export const inMyQueues = (side: 'before' | 'after'): string =>
  `(${queueOf(side)} != '' and ${queueOf(side)} in (%${QUEUES_PARAMETER}))`;

/** Claimed by another clinician (a Practitioner or PractitionerRole who is not the writer). */
export const othersClaim = (side: 'before' | 'after'): string =>
  `(${ownerOf(side)}.startsWith('Practitioner') and ${ownerOf(side)} != ${ME})`;

/** The new owner works the task's queue: her membership's `queueStaff` lists the pair (QUEUE_STAFF_PARAMETER). */
const aColleagueOfItsQueue = `((${queueOf('before')} + ' ' + ${ownerOf('after')}) in (%${QUEUE_STAFF_PARAMETER}))`;

/**
 * Care-team queues (JOURNEY C and F): clinician work waits in a queue (a CareTeam, named on the task's
 * `performerType`, never changed) with no owner while `ready`, and is owned by the one clinician who
 * takes it; the Provider app takes it by picking her as the assignee (two clicks), releases it by
 * clearing the assignee, and hands it over by picking a colleague. As writeConstraints on the
 * clinician's Task entry they hold for every write Medplum's apps can make, not only for our helper
 * (src/clinician/). Medplum evaluates them on the written result with `%before` the stored version
 * (empty on create) and `%profile` substituted with the clinician's own Practitioner
 * (packages/server/src/fhir/repo.ts, accesspolicy.ts). An update is one of:
 * - take: no owner -> herself, from `ready` to `ready` or `in-progress` (the app saves the assignee and
 *   the status as two updates). Two clinicians taking at once: the second is a 412 under If-Match, and
 *   without it a 403, since the task is no longer unowned;
 * - release: herself -> no owner, back to `ready`;
 * - hand over: no owner or herself -> a colleague who works the task's queue (her `queueStaff`), the
 *   status `ready` or `in-progress` as it was (the app changes only the assignee);
 * - her own work (owned by her before and after): any status (completing, with `output`, cancelling,
 *   pausing); completing or cancelling anything therefore requires owning it;
 * - pausing or resuming (ready <-> on-hold) a task no clinician owns and no queue holds (a patient's task);
 * - any other edit that keeps owner and status, except on a task another clinician has taken or one of
 *   a queue she does not work (the Provider app saves her answers' output this way, taken or not).
 * All of these only on work of a queue she works when the task is a queue's: a clinician outside a queue
 * cannot take, release, hand over or touch its work, on Medplum itself.
 */
export const QUEUE_TRANSITIONS = {
  language: 'text/fhirpath' as const,
  expression: [
    '%before.exists().not()',
    `(${inMyQueues('before')} and ${ownerOf('before')} = '' and ${ownerOf('after')} = ${ME} and ` +
      "%before.status = 'ready' and (%after.status = 'ready' or %after.status = 'in-progress'))",
    `(${inMyQueues('before')} and ${ownerOf('before')} = ${ME} and ${ownerOf('after')} = '' and %after.status = 'ready')`,
    `(${inMyQueues('before')} and (${ownerOf('before')} = '' or ${ownerOf('before')} = ${ME}) and ` +
      `${ownerOf('after')} != ${ME} and ${aColleagueOfItsQueue} and ` +
      "(%before.status = 'ready' or %before.status = 'in-progress') and %after.status = %before.status)",
    `(${ownerOf('before')} = ${ME} and ${ownerOf('after')} = ${ME} and (${queueOf('before')} = '' or ${inMyQueues('before')}))`,
    `(${ownerOf('after')} = ${ownerOf('before')} and (%before.status | %after.status).subsetOf('ready' | 'on-hold') and ` +
      `${queueOf('before')} = '' and ${ownerOf('before')}.startsWith('Practitioner').not())`,
    `(${ownerOf('after')} = ${ownerOf('before')} and %after.status = %before.status and ${othersClaim('before')}.not() and ` +
      `(${queueOf('before')} = '' or ${inMyQueues('before')}))`,
  ].join(' or '),
};

/**
 * A task, once issued, stays the work it was issued as: a clinician's update may change who holds it,
 * its status, her outputs and notes, never what it is (kind, subject, focus, inputs, what it is based on)
 * or what the platform recorded on it (`businessStatus`, the engine's contained results). Else she could
 * turn a patient's order-decisions task into a second offer, or unmark a composed selection so that it
 * is composed again (bots read a task's inputs from the version they issued, bots/lib/queues.ts).
 */
export const WORK_AS_ISSUED = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() or (${unchanged([
    'code',
    'for',
    'focus',
    'input',
    'basedOn',
    'partOf',
    'instantiatesCanonical',
    'performerType',
    'businessStatus',
    'contained',
    'identifier',
  ])})`,
};

/**
 * A visit's segments are the appointments bot's: a clinician may record an encounter of her own (none
 * naming an Appointment) and work on a segment (its status, period, notes), never attach an Encounter to
 * a visit nor move one to another visit, patient, request or position.
 */
export const SEGMENT_AS_BOOKED = {
  language: 'text/fhirpath' as const,
  expression:
    '(%before.exists().not() and %after.appointment.empty()) or (%before.exists() and ' +
    unchanged(['appointment', 'basedOn', 'subject', 'extension']) +
    ')',
};

/**
 * A visit's segment changes status only when its own practitioner (the visit's, named on the segment)
 * finishes one under way: `arrived` or `in-progress` -> `finished`. Starting, skipping ahead, cancelling
 * and reopening are the patient's workflow's (or nobody's): a segment finished out of order, a finished
 * one started again, or a colleague finishing another's visit is refused. Encounters of her own (none
 * naming an Appointment) are hers to run.
 */
export const SEGMENT_FINISHED_BY_ITS_PRACTITIONER = {
  language: 'text/fhirpath' as const,
  expression:
    '%before.exists().not() or %before.appointment.empty() or %after.status = %before.status or ' +
    `(%before.participant.where(individual.reference = ${ME}).exists() and ` +
    "(%before.status = 'in-progress' or %before.status = 'arrived') and %after.status = 'finished')",
};

/**
 * What Medplum's Provider app writes when a clinician finishes an encounter: the Appointment as it read
 * it, `fulfilled` (src/utils/encounter.ts). Allowed on her own visit (its practitioner) while booked or
 * under way, and nothing else of it changes: not who, when, which slot, what for. Whether the visit is
 * over is the segments' to say (bots/visit-completion.ts puts back a visit marked fulfilled too early).
 */
export const OWN_VISIT_MARKED_FULFILLED = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.exists() and %before.participant.where(actor.reference = ${ME}).exists() and ` +
    "(%before.status = 'booked' or %before.status = 'arrived' or %before.status = 'fulfilled') and " +
    "%after.status = 'fulfilled' and " +
    unchanged([
      'participant',
      'slot',
      'basedOn',
      'start',
      'end',
      'extension',
      'modifierExtension',
      'supportingInformation',
      'identifier',
      'cancelationReason',
      'serviceCategory',
      'serviceType',
      'specialty',
      'appointmentType',
      'reasonCode',
      'reasonReference',
      'priority',
      'description',
      'minutesDuration',
      'created',
      'comment',
      'patientInstruction',
      'requestedPeriod',
      'contained',
    ]),
};

/**
 * What the platform offered is not a clinician's to edit: a request composed into an offer (its
 * `groupIdentifier` names the offer) is changed only by the bots, so what the patient accepts and what
 * is placed is what was selected (she may still create and edit proposals of her own).
 */
export const NOT_AN_OFFER_ITEM = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() or %before.groupIdentifier.where(system = '${SYSTEMS.offer}').empty()`,
};

/**
 * Work a clinician creates is not already someone else's: no other clinician as owner, and a task
 * created in progress or done is her own (a queue's work starts `ready`, JOURNEY C). And it is never
 * the platform's work: a task of one of the platform's kinds (`SYSTEMS.taskKind`: reviews, selections,
 * offers...) is issued by bots only, so a clinician cannot forge one, done or not.
 */
export const QUEUE_CREATES = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.exists() or (%after.code.coding.where(system = '${SYSTEMS.taskKind}').empty() and ${othersClaim('after')}.not() and ` +
    `(${queueOf('after')} = '' or ${inMyQueues('after')}) and ${ownerOf('after')}.startsWith('CareTeam/').not() and ` +
    `(%after.status in ('draft' | 'requested' | 'received' | 'accepted' | 'ready' | 'on-hold') or ${ownerOf('after')} = ${ME}))`,
};

/**
 * A clinician changes an engine's finding only by adding mitigations of her own: the ones recorded
 * stay as they were, and each new one names her (`%profile`) as its author, never a colleague. What the
 * engine found stays. (The selection bot also reads the finding's history for who wrote each one.)
 */
export const MITIGATION_ONLY = {
  language: 'text/fhirpath' as const,
  expression: [
    '%before.exists()',
    '%after.status = %before.status',
    '%after.code = %before.code',
    '%after.severity = %before.severity',
    '%after.patient = %before.patient',
    '%after.author = %before.author',
    '%after.implicated = %before.implicated',
    '%after.detail = %before.detail',
    '%after.mitigation.count() >= %before.mitigation.count()',
    '(%before.mitigation.empty() or %after.mitigation.take(%before.mitigation.count()) = %before.mitigation)',
    `%after.mitigation.skip(%before.mitigation.count()).all(author.reference = ${ME})`,
  ].join(' and '),
};

/**
 * A clinician's answers (her work forms, contracts/work-forms.ts): hers alone (no author or source, or
 * herself: never a patient's or a colleague's name), and changed only while still `in-progress` and only
 * by their writer (`meta.author`, which Medplum stamps: the Provider app's responses name no author, only
 * their `source`); nobody else's changed, the patient's draft included. Found on a real Medplum: without
 * it she could rewrite a patient's submitted intake, or a colleague's answers, and become their writer.
 * One exception (issue 48): a colleague's unsubmitted draft of a work form (about nobody, in progress) may
 * be taken over, in her own name: Medplum's Provider app makes that draft as soon as anyone opens the task
 * (its "All Tasks" opens the first task by itself), and the task's form then names it, so whoever is handed
 * the task, or takes it after a colleague looked at it, must be able to answer it. Submitted answers stay
 * their writer's, and the bots believe only the version that completes them (written by the task's owner).
 */
export const OWN_ANSWERS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    `(%after.author.empty() or %after.author.reference = ${ME}) and ` +
    `(%after.source.empty() or %after.source.reference = ${ME}) and ` +
    `(%before.exists().not() or (%before.status = 'in-progress' and (%before.meta.author.reference = ${ME} or ` +
    `(%before.questionnaire.startsWith('${SYSTEMS.workForm}/') and %before.subject.empty() and ` +
    `%after.questionnaire = %before.questionnaire and %after.subject.empty()))))`,
};

/** What a response says: every field of it but its id and meta (FHIR R4 QuestionnaireResponse). */
const ANSWER_FIELDS = [
  'identifier',
  'basedOn',
  'partOf',
  'questionnaire',
  'status',
  'subject',
  'encounter',
  'authored',
  'author',
  'source',
  'item',
  'text',
  'contained',
  'extension',
  'modifierExtension',
  'language',
  'implicitRules',
] as const;

/**
 * Submitted answers (a `completed` QuestionnaireResponse of her tenant, anyone's) as submitted, whatever a
 * write of hers says: every field kept as stored (Medplum restores `readonlyFields` from the stored
 * version, choosing the policy entry the stored version matches: packages/server/src/fhir/repo.ts
 * restoreReadonlyFields), so the write changes nothing (200, no new version) instead of a refusal.
 * Medplum's Provider app (5.1.29) writes to answers just submitted twice, each a false alarm when refused
 * (issue 48 item 7): the draft save it still had pending when she completed quickly (1.5 s), and the save
 * of a colleague's page left on the task she handed over. The entry's constraint is checked on what the
 * write leaves (the entry the result matches): unchanged, or a submission of her own draft
 * (OWN_ANSWERS_ONLY). Never a create (Medplum blanks readonly fields on a create).
 */
export function submittedAnswersPolicy(): AccessPolicyResource {
  return {
    resourceType: 'QuestionnaireResponse',
    criteria: `${inTenant('QuestionnaireResponse')}&status=completed`,
    interaction: ['read', 'search', 'update', 'vread', 'history'] as AccessPolicyResource['interaction'],
    readonlyFields: [...ANSWER_FIELDS],
    writeConstraint: [
      SERVER_OWNED_TAGS,
      JOURNEY_KEYS,
      ONLY_OWN_TENANT,
      {
        language: 'text/fhirpath',
        expression: `(%before.exists() and ${unchanged(ANSWER_FIELDS)}) or (${OWN_ANSWERS_ONLY.expression})`,
      },
    ],
  };
}

/**
 * Her own draft (an in-progress response of her tenant whose `source` is she): its `source` stays hers
 * whatever a write of hers names (readonly, restored from the stored version). Medplum's Provider app
 * (5.1.29) completes a task's response from the copy it loaded with the task, whose answers are hers
 * (filled in place) but whose `source` still names whoever opened the task first; handed a task a colleague
 * had opened, she took the draft over in her own name (OWN_ANSWERS_ONLY), and that completion naming the
 * colleague was refused, a false "Forbidden" (issue 48 item 7). Now it is recorded in her name. A draft
 * that names someone else is not this entry's (taking it over names her: the general entry). Never a
 * create (its criteria cannot match before Medplum stores it).
 */
export function ownDraftPolicy(): AccessPolicyResource {
  return {
    resourceType: 'QuestionnaireResponse',
    criteria: `${inTenant('QuestionnaireResponse')}&status=in-progress&source=%profile`,
    interaction: ['read', 'search', 'update', 'vread', 'history'] as AccessPolicyResource['interaction'],
    readonlyFields: ['source'],
    writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, OWN_ANSWERS_ONLY],
  };
}

/** The patients a Communication is addressed to, the same before and after (none added, none removed). */
const PATIENT_RECIPIENTS = (side: 'before' | 'after') =>
  `%${side}.recipient.where(reference.startsWith('Patient/')).reference`;
const SAME_PATIENT_RECIPIENTS =
  `${PATIENT_RECIPIENTS('after')}.all(${PATIENT_RECIPIENTS('before')} contains $this) and ` +
  `${PATIENT_RECIPIENTS('before')}.all(${PATIENT_RECIPIENTS('after')} contains $this)`;

/**
 * Messages and comments are in their writer's name (issue 48): what she creates is sent by her (a thread,
 * a message, a comment on a chart; Medplum's Provider app names her as `sender`), never by a patient or a
 * colleague. Another's message she may only mark received (the app's read receipt: `received`, `status`):
 * never make it say something else, come from someone else, go to someone else or belong elsewhere.
 * Another's thread or comment she may touch as the app does (its `sent` when she writes in it, its
 * clinicians and topic, closing it), never change which patient it is addressed to: only its writer shares
 * her internal comment with the patient, or takes a patient out of a thread.
 */
export const OWN_MESSAGES_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    `(%before.exists().not() and %after.sender.reference = ${ME}) or ` +
    `(%before.exists() and %before.sender.reference = ${ME} and %after.sender.reference = ${ME}) or ` +
    `(%before.exists() and %before.partOf.exists() and ` +
    `${unchanged(['sender', 'payload', 'partOf', 'subject', 'sent', 'recipient', 'topic', 'category', 'note', 'about', 'inResponseTo', 'encounter'])}) or ` +
    `(%before.exists() and %before.partOf.empty() and ${unchanged(['sender', 'payload', 'partOf', 'subject', 'note', 'category'])} and ` +
    `${SAME_PATIENT_RECIPIENTS})`,
};

/**
 * Her visit note (issue 48 item 4): the ClinicalImpression the platform drafts for each live segment, its
 * assessor the segment's practitioner. Only she writes it (the Provider app's note box saves the whole
 * note), only while it is `in-progress`, and only its text and status: `completed` is the app's *Sign &
 * Lock*, after which it is final (an addendum is a DocumentReference). Locking never changes the text: the
 * app (5.1.29) locks the copy of the note it loaded with the page, without If-Match, so a note typed on
 * that page would be locked empty (and one cleared there locked with its old text); that lock is refused,
 * and the note stays as she wrote it, to lock once the page is reloaded. Never created by hand: the
 * platform's drafts are the notes the app finds on a visit's page.
 */
export const OWN_NOTE_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.exists() and %before.status = 'in-progress' and %before.assessor.reference = ${ME} and ` +
    `(%after.status = 'in-progress' or (%after.status = 'completed' and ${unchanged(['note'])})) and ` +
    unchanged(['subject', 'encounter', 'assessor', 'date', 'description']),
};

/**
 * Her signature (issue 48 item 4): a Provenance as the Provider app's *Sign* writes it, of one encounter,
 * its agent and signer herself; nothing else (the eligibility engine's provenance is the platform's).
 */
export const OWN_SIGNATURE_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists().not() and %after.target.count() = 1 and %after.target.reference.startsWith('Encounter/') and " +
    `%after.agent.exists() and %after.agent.all(who.reference = ${ME}) and %after.signature.all(who.reference = ${ME})`,
};

/**
 * Live updates in Medplum's Provider app (issue 48): its chat and its counters ask Medplum for WebSocket
 * Subscriptions on messages and tasks, and show an error over the chat when refused. Only `websocket`
 * ones: Medplum checks the author's read access before each WebSocket notification
 * (packages/server/src/workers/subscription.ts satisfiesAccessPolicy), which it does not for a rest-hook;
 * and only on the types the app asks for.
 */
export const LIVE_UPDATES_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists().not() and %after.channel.type = 'websocket' and %after.channel.endpoint.empty() and " +
    "(%after.criteria.startsWith('Communication?') or %after.criteria.startsWith('Task?'))",
};

/**
 * Clinicians (Medplum's app): their tenant only, in EVERY entry (`%organization`); what they create
 * about a patient inherits that patient's tenant, so a write for another tenant's patient fails the
 * criteria (Medplum checks the result of a write against them, packages/server/src/fhir/repo.ts).
 * Orders stay proposals: only bots place them (JOURNEY section 0).
 */
export function clinicianPolicy(): AccessPolicyResource[] {
  return [
    // Medplum's record of what she reads and changes, kept through her own access: entries that name her
    // and are filed in her tenant only (her patients' access logs, bots/audit.ts); never read or changed.
    { ...OWN_AUDIT_TRAIL, writeConstraint: [...(OWN_AUDIT_TRAIL.writeConstraint ?? []), ONLY_OWN_TENANT] },
    // Submitted answers stay as submitted (first: Medplum uses the first entry a resource matches).
    submittedAnswersPolicy(),
    // Her own drafts keep her name as their source (then every other response of her tenant: below).
    ownDraftPolicy(),
    // Her tenant's charts and work: she records and works them, each write bounded by its constraints
    // (tenancy and journey keys server-owned; queue work as issued; a segment by its practitioner).
    ...CLINICIAN_WRITABLE_TYPES.map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      interaction: ['create', 'read', 'search', 'update', 'vread', 'history'] as AccessPolicyResource['interaction'],
      writeConstraint: [
        SERVER_OWNED_TAGS,
        JOURNEY_KEYS,
        ONLY_OWN_TENANT,
        ...(resourceType === 'Task' ? [QUEUE_TRANSITIONS, QUEUE_CREATES, WORK_AS_ISSUED] : []),
        ...(resourceType === 'Encounter' ? [SEGMENT_AS_BOOKED, SEGMENT_FINISHED_BY_ITS_PRACTITIONER] : []),
        ...(resourceType === 'QuestionnaireResponse' ? [OWN_ANSWERS_ONLY] : []),
        ...(resourceType === 'DocumentReference' ? [NOT_EVIDENCE, NOT_AN_AGREEMENT] : []),
        ...(resourceType === 'Communication' ? [OWN_MESSAGES_ONLY] : []),
      ],
      ...(resourceType === 'Patient' ? { readonlyFields: ['managingOrganization', 'link'] } : {}),
      // What the platform recorded on her work (a selection's `offer-composed`, `overdue`...) is kept as
      // stored whatever her copy says: Medplum's Provider app (5.1.29, TaskInputNote) saves the completed
      // task a second time, 500 ms later, from the copy it had before the bot marked it; kept, that save
      // changes nothing (200) instead of erasing the mark (403). WORK_AS_ISSUED still holds on the result.
      ...(resourceType === 'Task' ? { readonlyFields: ['businessStatus'] } : {}),
    })),
    // Orders she may propose, never place: placing is the patient's decision through the decide-order bot.
    ...['MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      interaction: ['create', 'read', 'search', 'update', 'vread', 'history'] as AccessPolicyResource['interaction'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, PROPOSALS_ONLY, NOT_AN_OFFER_ITEM],
    })),
    // Plans, offers, consents, teams, calendars and the engine's provenance: she reads them; bots and provisioning write them.
    ...CLINICIAN_READONLY_TYPES.map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
    // Visits are booked, moved and cancelled by the appointments bot alone (a Slot is freed only for the
    // Appointment that holds it). Her one write: marking her own visit fulfilled, as the Provider app does
    // before it finishes an encounter; the visit-completion bot decides from the segments what it is.
    {
      resourceType: 'Appointment',
      criteria: inTenant('Appointment'),
      interaction: ['read', 'search', 'update', 'vread', 'history'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, OWN_VISIT_MARKED_FULFILLED],
    },
    // Her visit notes: written and signed by the segment's practitioner only (OWN_NOTE_ONLY).
    {
      resourceType: 'ClinicalImpression',
      criteria: inTenant('ClinicalImpression'),
      interaction: ['read', 'search', 'update', 'vread', 'history'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, OWN_NOTE_ONLY],
    },
    // Provenance: the eligibility engine's, read (JOURNEY D.2); her own signature of an encounter, written.
    {
      resourceType: 'Provenance',
      criteria: inTenant('Provenance'),
      interaction: ['create', 'read', 'search', 'vread', 'history'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, OWN_SIGNATURE_ONLY],
    },
    // Live updates of her chat and counters in the Provider app: WebSocket subscriptions, nothing else.
    {
      resourceType: 'Subscription',
      criteria: inTenant('Subscription'),
      interaction: ['create', 'read'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, LIVE_UPDATES_ONLY],
    },
    // The engine's findings: read, and overridden only by recording a mitigation (JOURNEY D.2).
    {
      resourceType: 'DetectedIssue',
      criteria: inTenant('DetectedIssue'),
      interaction: ['read', 'search', 'update', 'vread', 'history'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, MITIGATION_ONLY],
    },
    // Her colleagues and their roles in the tenant (the Provider app names who did what), read-only.
    ...['Practitioner', 'PractitionerRole'].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
    // Her own tenant's Organization (a patient's managingOrganization, which Medplum's app reads), read-only.
    { resourceType: 'Organization', criteria: `Organization?_id=%${TENANT_PARAMETER}.id`, readonly: true },
    // The published catalog she selects treatments from (not the agreement documents, which are DocumentReferences).
    ...CATALOG_TYPES.filter((type) => type !== 'DocumentReference').flatMap(catalogReads),
    // The forms of her tenant's work (contracts/work-forms.ts): stored by the bots that issue it, read-only.
    { resourceType: 'Questionnaire', criteria: inTenant('Questionnaire'), readonly: true },
    // What Medplum's Provider app shows of a patient (its summary asks for these in one batch, where one
    // refusal empties the panel): read-only in her tenant; the platform writes none of them, so they are empty.
    ...CLINICIAN_CHART_TYPES.map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
    // The catalogs' code systems (the ICD-10-CM codes the condition catalogs list), to expand them.
    ...catalogReads('CodeSystem'),
    // FHIR's own terminology, read-only, for the forms of Medplum's app (`ValueSet/$expand` of a field's
    // binding): the definitions Medplum keeps in its R4 project, never a tenant's.
    ...['ValueSet', 'CodeSystem'].map((resourceType) => ({
      resourceType,
      criteria: `${resourceType}?_project=${MEDPLUM_R4_PROJECT}`,
      readonly: true,
    })),
    // Her uploads at full size, where her chart points at them (bots/lib/evidence.ts): a Binary read by id
    // and by version. Policy criteria do not apply to Binary (@medplum/core satisfiedAccessPolicy); Medplum
    // (>= 5.1.18, which provisioning requires) lets a Binary be read only by whoever may read its
    // `securityContext` (packages/server/src/fhir/repo.ts authorizeBinarySecurityContext, on read, vread and
    // readReferences): a patient's upload is hers (the patient policy's OWN_SECURITY_CONTEXT), so only her
    // tenant's clinicians read it, and bot code (the Project's) nobody. Never search (not checked) and never
    // history (a deleted Binary's versions are listed unchecked).
    { resourceType: 'Binary', interaction: ['read', 'vread'] },
    // The platform's bots, by name, as the authors of what they wrote (NAMED_BOTS: the ones whose `$execute`
    // by her, which a read allows, is refused or a replay); never their code. Bots belong to no tenant.
    ...NAMED_BOTS.map((criteria) => ({
      resourceType: 'Bot',
      criteria,
      interaction: ['read'] as AccessPolicyResource['interaction'],
      hiddenFields: BOT_CODE,
    })),
    // The platform's machine clients by name, as the authors of what they wrote; never their secrets.
    { resourceType: 'ClientApplication', interaction: ['read'], ...MACHINE_CLIENTS },
  ];
}
