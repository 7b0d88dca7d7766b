import type {
  AccessPolicy,
  AccessPolicyResource,
  Practitioner,
  Project,
  Reference,
  Resource,
} from '@medplum/fhirtypes';
import { DOCUMENT_TYPES } from '../../contracts/attachments';
import {
  BOT_AUDIENCE,
  CATALOG,
  ELIGIBILITY_ENGINE_VERSION,
  EXTENSIONS,
  type FulfilmentMethod,
  MEDPLUM_R4_PROJECT,
  QUEUES_PARAMETER,
  SYSTEMS,
  TENANT_PARAMETER,
} from '../../contracts/systems';
import { WORK_FORMS } from '../../contracts/work-forms';
import type { MemberResource } from './apply';

/**
 * A declarative description of everything a Medplum project needs for this platform. Applied
 * idempotently by `applyDefinition` to any Medplum (embedded or real). Resources refer to each
 * other with `{ reference: 'key:<key>' }`, resolved to real ids as they are applied in order.
 */
export interface ProvisionDefinition {
  project: {
    features: NonNullable<Project['features']>;
    /** Key of the AccessPolicy every self-registered patient gets. */
    defaultPatientAccessPolicy: string;
  };
  accessPolicies: { key: string; policy: Omit<AccessPolicy, 'resourceType'> }[];
  bots: BotDefinition[];
  subscriptions: SubscriptionDefinition[];
  /** Organizations, client applications, catalog: created or updated in this order. */
  resources: KeyedResource[];
  /** Machine clients of the platform (provisioned ClientApplications) and the policy each signs in with. */
  integrations: { key: string; accessPolicy: string }[];
}

export interface BotDefinition {
  /** Also the bundle name (`dist/bots/<key>.js`) and the identifier value under SYSTEMS.bots. */
  key: string;
  description: string;
  accessPolicy: string;
  /** Project-admin membership: needed only by bots that must touch ProjectMembership (Medplum rule). */
  admin?: boolean;
  /** A cron bot: Medplum runs it on this schedule (Bot.cronString, UTC). */
  cronString?: string;
  /** Run once by provisioning after everything is applied (what a cron bot must have made before its first run). */
  runAfterProvisioning?: boolean;
  /**
   * Patients may run it with `$execute` (it is tagged for them and readable by them). Every other bot
   * (subscription and cron bots) is unreadable to patients, so Medplum refuses their `$execute`.
   */
  patient?: boolean;
}

export interface SubscriptionDefinition {
  key: string;
  bot: string;
  criteria: string;
  interaction: 'create' | 'update' | 'delete';
  reason: string;
}

/** Some of a resource's fields (a plain object: a Partial of the whole Resource union is too costly to type). */
export type ResourceFields = Readonly<Record<string, unknown>>;

export interface KeyedResource {
  key: string;
  resource: Resource;
  /** Published once, never changed (agreement versions): a change must be a new key and version. */
  writeOnce?: boolean;
  /**
   * Fields written only when the resource is created: what its owner edits afterwards (a patient's
   * demographics), which a later run must not overwrite. What `resource` sets stays the definition's.
   */
  seed?: ResourceFields;
  /**
   * The id a Medplum super admin gives the resource before provisioning, so that it is known in advance
   * (a demo patient app's client id, printed in the README). Only a super admin may choose an id
   * (Medplum's `canSetId`): the embedded Medplum's bootstrap does; on a real Medplum, provisioning
   * creates it with an id of Medplum's choosing unless an operator made it first with this tag.
   */
  presetId?: string;
}

/** A reference to the resource provisioned under `key`, resolved when it is applied. */
export function keyRef<T extends Resource>(key: string): Reference<T> {
  return { reference: `key:${key}` } as Reference<T>;
}

/** Clinical record types a patient may read in their own compartment, never write. */
const PATIENT_READONLY_TYPES = [
  'AllergyIntolerance',
  'Appointment',
  'CarePlan',
  'CareTeam',
  'Communication',
  'Condition',
  'Consent',
  'DiagnosticReport',
  'DocumentReference',
  'Encounter',
  'EpisodeOfCare',
  'MedicationRequest',
  'Observation',
  'RequestGroup',
  'ServiceRequest',
  'Task',
] as const;

/**
 * The catalog: definitions a patient may read only when published (a catalog tag that provisioning
 * alone writes), to their tenant or to every tenant. Agreement documents are DocumentReferences, so
 * DocumentReference is here too: a patient never reads a tenant's documents just for being in it.
 * Location: the jurisdictions an offering is restricted to (HealthcareService.coverageArea), never a
 * tenant's sites or anyone's address.
 */
export const CATALOG_TYPES = [
  'HealthcareService',
  'PlanDefinition',
  'ActivityDefinition',
  'Questionnaire',
  'ObservationDefinition',
  'Location',
  'ValueSet',
  'DocumentReference',
] as const;

/**
 * The tenant's staff directory and free/busy slots: no patient data (a Slot says free or busy, never for
 * whom), reached by following references from the patient's own appointments and care teams. Not
 * Schedule: a Schedule's actor may be a patient (it is then in that patient's compartment).
 */
const TENANT_DIRECTORY_TYPES = ['Practitioner', 'PractitionerRole', 'Slot'] as const;

/** FHIRPath: each of these fields unchanged by the write (equal, or absent before and after). */
const unchanged = (fields: readonly string[]): string =>
  fields
    .map((field) => `((%after.${field} = %before.${field}) or (%after.${field}.empty() and %before.${field}.empty()))`)
    .join(' and ');

const inTenant = (type: string): string => `${type}?_compartment=%${TENANT_PARAMETER}`;

/**
 * Her tenant's visit Schedules (a practitioner role's calendar of a visit type): what availability is
 * computed from with her own token. Only Schedules serving a visit type (the platform's), never one whose
 * actor could be a patient.
 */
const VISIT_SCHEDULES = `${inTenant('Schedule')}&service-type=${SYSTEMS.visitType}|`;

/** Published catalog entries: the tenant's own (its account and the tenant tag) and the platform's. */
function catalogReads(type: string): AccessPolicyResource[] {
  return [
    { resourceType: type, criteria: `${inTenant(type)}&_tag=${CATALOG.system}|${CATALOG.tenant}`, readonly: true },
    { resourceType: type, criteria: `${type}?_tag=${CATALOG.system}|${CATALOG.platform}`, readonly: true },
  ];
}

/**
 * Every patient reference a patient writes must be themselves (subject, author, source), also on
 * create: Medplum evaluates writeConstraint with `%before` empty then (packages/server/src/fhir/repo.ts).
 */
const ONLY_SELF_REFERENCES = {
  language: 'text/fhirpath' as const,
  expression:
    "%after.subject.reference = '%patient' and " +
    "%after.author.all(reference = '%patient') and %after.source.all(reference = '%patient')",
};

/**
 * A patient never answers a clinician's work form (contracts/work-forms.ts): answers to one wake the
 * eligibility and compose-offer bots when completed, so a patient's would spend those bots' quota, which
 * every patient shares, for nothing (self-registration is open).
 */
const NOT_A_WORK_FORM = {
  language: 'text/fhirpath' as const,
  expression: `%after.questionnaire.exists().not() or %after.questionnaire.startsWith('${SYSTEMS.workForm}/').not()`,
};

/**
 * Submitted answers are final (JOURNEY B): an update is allowed only while the stored version is still
 * `in-progress`. On create `%before` is empty, so any status may be created.
 */
const ANSWERS_FROZEN_ONCE_SUBMITTED = {
  language: 'text/fhirpath' as const,
  expression: "%before.exists().not() or %before.status = 'in-progress'",
};

function patientPolicy(): AccessPolicyResource[] {
  return [
    // Own demographics: readable and updatable; tenancy and identity stay server-owned.
    {
      resourceType: 'Patient',
      criteria: 'Patient?_id=%patient.id',
      interaction: ['read', 'search', 'update', 'history', 'vread'],
      readonlyFields: ['managingOrganization', 'identifier', 'link', 'generalPractitioner'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT],
    },
    // Own answers: created and updated by the patient, never deleted, never about or by anyone else;
    // once submitted (no longer in-progress) they are frozen: a completed task points at what was answered.
    {
      resourceType: 'QuestionnaireResponse',
      criteria: 'QuestionnaireResponse?subject=%patient',
      interaction: ['read', 'search', 'create', 'update', 'history', 'vread'],
      writeConstraint: [
        ONLY_SELF_REFERENCES,
        SERVER_OWNED_TAGS,
        JOURNEY_KEYS,
        ANSWERS_FROZEN_ONCE_SUBMITTED,
        NOT_A_WORK_FORM,
        ONLY_OWN_TENANT,
      ],
    },
    ...PATIENT_READONLY_TYPES.map((type) => ({ resourceType: type, criteria: ownCompartment(type), readonly: true })),
    // Her Idempotency-Key records (src/edge/idempotency.ts): hers alone, about her own calls; written
    // with her token so that every gateway instance honours her keys. What she writes here directly
    // changes only what the gateway answers her again.
    {
      resourceType: 'Basic',
      criteria: `Basic?subject=%patient&code=${SYSTEMS.idempotency}|request`,
      interaction: ['create', 'read', 'search', 'update', 'delete'],
      writeConstraint: [ONLY_SELF_REFERENCES, SERVER_OWNED_TAGS, JOURNEY_KEYS],
    },
    ...CATALOG_TYPES.flatMap(catalogReads),
    ...TENANT_DIRECTORY_TYPES.map((type) => ({ resourceType: type, criteria: inTenant(type), readonly: true })),
    { resourceType: 'Schedule', criteria: VISIT_SCHEDULES, readonly: true },
    // Her tenant's visit teams (the team her schedule-visit tasks name, JOURNEY H): staff, no patient data.
    // Not the clinicians' work queues (care-queue CareTeams).
    {
      resourceType: 'CareTeam',
      criteria: `${inTenant('CareTeam')}&category=${SYSTEMS.careTeam}|visits`,
      readonly: true,
    },
    // Own uploads (POST /v1/documents): created, never read by id. Criteria do not apply to Binary
    // (@medplum/core satisfiedAccessPolicy matches any Binary), and Medplum 5.0.10 does not check a
    // Binary's securityContext on `GET Binary/:id` (later versions do: binary-utils.ts readAuthorizedBinary),
    // so any read grant would open every Binary of the project, other tenants' uploads and bot code
    // included. She gets her own back through GET /v1/documents/{id} (the read-document bot). The
    // context must be herself, and only a document type may be stored (no HTML, SVG or script that a
    // presigned URL would serve on Medplum's origin).
    {
      resourceType: 'Binary',
      interaction: ['create'],
      writeConstraint: [OWN_SECURITY_CONTEXT, DOCUMENT_TYPES_ONLY, ONLY_OWN_TENANT],
    },
    // Only the workflow bots meant for patients ($execute needs read access to the Bot); never their code.
    {
      resourceType: 'Bot',
      criteria: `Bot?_tag=${BOT_AUDIENCE.system}|${BOT_AUDIENCE.patient}`,
      interaction: ['read', 'search'],
      hiddenFields: ['executableCode', 'sourceCode'],
    },
  ];
}

const ownCompartment = (type: string): string => `${type}?_compartment=%patient`;

/** An upload is a document of an accepted type (contracts/attachments.ts), never active content. */
const DOCUMENT_TYPES_ONLY = {
  language: 'text/fhirpath' as const,
  expression: DOCUMENT_TYPES.map((type) => `%after.contentType = '${type}'`).join(' or '),
};

/** A patient's upload is hers: its security context (who may read it) is the patient herself. */
const OWN_SECURITY_CONTEXT = {
  language: 'text/fhirpath' as const,
  expression: "%after.securityContext.reference = '%patient'",
};

/**
 * A Consent's proof and what it pins are immutable: an update may only change `status` (and only to
 * `inactive`). Enforced as an AccessPolicy writeConstraint, so it holds for every bot client too.
 */
const CONSENT_ONLY_STATUS_CHANGES = {
  language: 'text/fhirpath' as const,
  expression:
    "%after.status = 'inactive' and %after.extension = %before.extension and %after.policy = %before.policy and " +
    '%after.patient = %before.patient and %after.dateTime = %before.dateTime and %after.identifier = %before.identifier and ' +
    '%after.category = %before.category and ' +
    // Elements an acceptance may lack: unchanged means equal, or absent before and after.
    unchanged([
      'scope',
      'provision',
      'sourceAttachment',
      'sourceReference',
      'organization',
      'performer',
      'verification',
      'policyRule',
    ]),
};

/** A bot that reads a ClientApplication (its tenant extension, its integration tag) never sees its secrets. */
const CLIENT_SECRETS = ['secret', 'retiringSecret'];

/** Agreement documents as the agreement bots may read them: published catalog entries only. */
const publishedDocuments = (): AccessPolicyResource[] =>
  [CATALOG.tenant, CATALOG.platform].map((code) => ({
    resourceType: 'DocumentReference',
    criteria: `DocumentReference?_tag=${CATALOG.system}|${code}`,
    interaction: ['read', 'search'],
  }));

/** What the agreement bots read to resolve requirements (for the requester only; the bot checks whose). */
export function agreementReads(): AccessPolicyResource[] {
  return [
    { resourceType: 'Patient', interaction: ['read', 'search'] },
    { resourceType: 'Consent', interaction: ['read', 'search'] },
    ...publishedDocuments(),
    ...['PlanDefinition', 'HealthcareService', 'CarePlan', 'Task'].map((resourceType) => ({
      resourceType,
      interaction: ['read' as const, 'search' as const],
    })),
  ];
}

/** Clinical types a clinician reads and writes, for the patients of their own tenant. */
const CLINICIAN_WRITABLE_TYPES = [
  'Patient',
  'Observation',
  'Condition',
  'Task',
  'Encounter',
  'EpisodeOfCare',
  'Communication',
  'QuestionnaireResponse',
  'DocumentReference',
] as const;

/** Chart types the platform does not use that Medplum's Provider app asks for: read-only, tenant-scoped. */
const CLINICIAN_CHART_TYPES = [
  'AllergyIntolerance',
  'Coverage',
  'Immunization',
  'Procedure',
  'Device',
  'Goal',
  'DiagnosticReport',
  'DeviceRequest',
  'Media',
  'MedicationStatement',
  'ClinicalImpression',
] as const;

/** Written only by the platform's bots: a clinician reads them in their tenant, never writes them. */
const CLINICIAN_READONLY_TYPES = [
  'CarePlan',
  'RequestGroup',
  'Consent',
  'CareTeam',
  'Slot',
  'Schedule',
  // The eligibility engine's provenance (JOURNEY D.2); its findings (DetectedIssue) below.
  'Provenance',
] as const;

/**
 * Catalog and provisioning tags are provisioning's alone, for patients and clinicians in every write:
 * - nobody publishes (a catalog tag would send their document to patients), and nobody changes what
 *   is published: a resource that carries a catalog tag is not theirs to update (else a clinician
 *   could strip the tag off a tenant's agreement and so unpublish it, or rewrite its text);
 * - nobody adds a provisioning key (provisioning would adopt that resource as the one it manages).
 * On create `%before` is empty (Medplum binds it so, packages/server/src/fhir/repo.ts).
 */
const SERVER_OWNED_TAGS = {
  language: 'text/fhirpath' as const,
  expression:
    `%after.meta.tag.where(system = '${CATALOG.system}').empty() and ` +
    `%before.meta.tag.where(system = '${CATALOG.system}').empty() and ` +
    `%after.meta.tag.where(system = '${SYSTEMS.provisioning}')` +
    `.all(%before.meta.tag.where(system = '${SYSTEMS.provisioning}').code contains $this.code)`,
};

/**
 * The journey's keys are the workflow bots' alone (JOURNEY section 0): the EpisodeOfCare's idempotency
 * key (start-assessment resumes the episode it finds under it) and the tags every bot reads a journey by
 * (the episode join tag, the patient-task tag). A patient or clinician who could add one would put their
 * own episode or task into a patient's journey, from another tenant too (the bots read project-wide);
 * one who could strip or change one would fork it. A write must keep them exactly as they were (on
 * create: none); an update that keeps them (a clinician claiming or pausing a task) is untouched.
 */
const JOURNEY_KEYS = {
  language: 'text/fhirpath' as const,
  expression: [
    unchangedCodes('meta.tag', SYSTEMS.episode, 'code'),
    unchangedCodes('meta.tag', SYSTEMS.taskAudience, 'code'),
    unchangedCodes('identifier', SYSTEMS.episodeKey, 'value'),
    unchangedCodes('identifier', SYSTEMS.eligibilityKey, 'value'),
  ].join(' and '),
};

/** `%after` and `%before` hold the same values of `path` under `system`, both ways. */
function unchangedCodes(path: string, system: string, field: 'code' | 'value'): string {
  const values = (side: string) => `%${side}.${path}.where(system = '${system}').${field}`;
  return (
    `${values('after')}.all(${values('before')} contains $this) and ` +
    `${values('before')}.all(${values('after')} contains $this)`
  );
}

/**
 * A write stays in the writer's tenant: every account it carries is theirs. For a clinician, the criteria
 * alone pass a resource that names a patient of theirs AND one of another tenant (its accounts are then
 * both tenants', and one of them matches). For a patient: Medplum keeps the accounts a non-admin SENDS
 * whenever it derives none itself (packages/server/src/fhir/repo.ts: the result's meta starts as the
 * one sent, getAccounts overrides it only with something), so a patient not yet homed (no tenant, no
 * `%organization` parameter: nothing can equal it) could otherwise choose her tenant, and an upload (no
 * patient to derive from) could be filed in any tenant.
 */
const ONLY_OWN_TENANT = {
  language: 'text/fhirpath' as const,
  expression:
    `%after.meta.accounts.all(reference = '%${TENANT_PARAMETER}') and ` +
    `%after.meta.account.all(reference = '%${TENANT_PARAMETER}')`,
};

/** A copy of a patient's upload (bots/lib/evidence.ts), as the completing bot writes it: new, and marked. */
const EVIDENCE_ONLY = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() and %after.identifier.where(system = '${SYSTEMS.evidence}').exists()`,
};

/** What a patient uploaded is evidence: a clinician neither edits a copy of it nor makes one up. */
const NOT_EVIDENCE = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.identifier.where(system = '${SYSTEMS.evidence}').empty() and ` +
    `%after.identifier.where(system = '${SYSTEMS.evidence}').empty()`,
};

/** Bots that issue clinician work store its form (contracts/work-forms.ts): created once, a work form only. */
const WORK_FORM_CREATES: AccessPolicyResource = {
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
const ownerOf = (side: 'before' | 'after'): string => `iif(%${side}.owner.exists(), %${side}.owner.reference, '')`;
const ME = "'%profile'";
/**
 * Owned by a queue she works: one of the CareTeams her membership's `queues` parameter lists (Medplum
 * substitutes `%queues` with `'CareTeam/a' | 'CareTeam/b'`, or `{}`: contracts/systems.ts QUEUES_PARAMETER).
 * A FHIRPath constraint cannot resolve the CareTeam to read its participants, so her membership carries
 * them; provisioning derives both from one list (tenantResources).
 */
const inMyQueues = (side: 'before' | 'after'): string =>
  `(${ownerOf(side)}.startsWith('CareTeam/') and ${ownerOf(side)} in (%${QUEUES_PARAMETER}))`;
/** Claimed by another clinician (a Practitioner or PractitionerRole who is not the writer). */
const othersClaim = (side: 'before' | 'after'): string =>
  `(${ownerOf(side)}.startsWith('Practitioner') and ${ownerOf(side)} != ${ME})`;

/**
 * Care-team queues (JOURNEY C and F): clinician work is owned by a queue (a CareTeam) while `ready`, and
 * by the one clinician who claimed it once she takes it. As writeConstraints on the clinician's Task
 * entry they hold for every write Medplum's apps can make, not only for our helper (src/clinician/).
 * Medplum evaluates them on the written result with `%before` the stored version (empty on create)
 * and `%profile` substituted with the clinician's own Practitioner (packages/server/src/fhir/repo.ts,
 * accesspolicy.ts). An update is one of:
 * - claim: owner a queue she works -> herself, from `ready` to `ready` or `in-progress` (the Provider
 *   app saves the assignee and the status as two updates: the assignee first; work in progress is
 *   always someone's, so a status changed while a queue owns it is refused). Two clinicians claiming
 *   at once: the second is a 412 under If-Match, and without it a 403, since `%before.owner` is no
 *   longer a team;
 * - unclaim: owner herself -> a queue she works, back to `ready`;
 * - her own work (owned by her before and after): any status (completing, with `output`, cancelling,
 *   pausing); completing or cancelling anything therefore requires owning it, and owning queue work
 *   requires having claimed it from a queue she works;
 * - pausing or resuming (ready <-> on-hold) a task no clinician or queue owns (a patient's task);
 * - any other edit that keeps owner and status, except on a task another clinician has claimed or one
 *   in a queue she does not work (the Provider app saves her answers' output this way, claimed or not).
 * "A queue she works" is one her membership's `queues` parameter lists (`inMyQueues`): a clinician
 * outside a queue cannot take, release or touch its work, on Medplum itself.
 */
const QUEUE_TRANSITIONS = {
  language: 'text/fhirpath' as const,
  expression: [
    '%before.exists().not()',
    `(${inMyQueues('before')} and ${ownerOf('after')} = ${ME} and ` +
      "%before.status = 'ready' and (%after.status = 'ready' or %after.status = 'in-progress'))",
    `(${ownerOf('before')} = ${ME} and ${inMyQueues('after')} and %after.status = 'ready')`,
    `(${ownerOf('before')} = ${ME} and ${ownerOf('after')} = ${ME})`,
    `(${ownerOf('after')} = ${ownerOf('before')} and (%before.status | %after.status).subsetOf('ready' | 'on-hold') and ` +
      `${ownerOf('before')}.startsWith('CareTeam/').not() and ${ownerOf('before')}.startsWith('Practitioner').not())`,
    `(${ownerOf('after')} = ${ownerOf('before')} and %after.status = %before.status and ${othersClaim('before')}.not() and ` +
      `(${ownerOf('before')}.startsWith('CareTeam/').not() or ${inMyQueues('before')}))`,
  ].join(' or '),
};

/**
 * A task, once issued, stays the work it was issued as: a clinician's update may change who holds it,
 * its status, her outputs and notes, never what it is (kind, subject, focus, inputs, what it is based on)
 * or what the platform recorded on it (`businessStatus`, the engine's contained results). Else she could
 * turn a patient's order-decisions task into a second offer, or unmark a composed selection so that it
 * is composed again (bots read a task's inputs from the version they issued, bots/lib/queues.ts).
 */
const WORK_AS_ISSUED = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() or (${unchanged([
    'code',
    'for',
    'focus',
    'input',
    'basedOn',
    'partOf',
    'instantiatesCanonical',
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
const SEGMENT_AS_BOOKED = {
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
const SEGMENT_FINISHED_BY_ITS_PRACTITIONER = {
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
const OWN_VISIT_MARKED_FULFILLED = {
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
const NOT_AN_OFFER_ITEM = {
  language: 'text/fhirpath' as const,
  expression: `%before.exists().not() or %before.groupIdentifier.where(system = '${SYSTEMS.offer}').empty()`,
};

/**
 * Work a clinician creates is not already someone else's: no other clinician as owner, and a task
 * created in progress or done is her own (a queue's work starts `ready`, JOURNEY C). And it is never
 * the platform's work: a task of one of the platform's kinds (`SYSTEMS.taskKind`: reviews, selections,
 * offers...) is issued by bots only, so a clinician cannot forge one, done or not.
 */
const QUEUE_CREATES = {
  language: 'text/fhirpath' as const,
  expression:
    `%before.exists() or (%after.code.coding.where(system = '${SYSTEMS.taskKind}').empty() and ${othersClaim('after')}.not() and ` +
    `(${ownerOf('after')}.startsWith('CareTeam/').not() or ${inMyQueues('after')}) and ` +
    `(%after.status in ('draft' | 'requested' | 'received' | 'accepted' | 'ready' | 'on-hold') or ${ownerOf('after')} = ${ME}))`,
};

/**
 * A clinician changes an engine's finding only by adding mitigations of her own: the ones recorded
 * stay as they were, and each new one names her (`%profile`) as its author, never a colleague. What the
 * engine found stays. (The selection bot also reads the finding's history for who wrote each one.)
 */
const MITIGATION_ONLY = {
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
 */
const OWN_ANSWERS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    `(%after.author.empty() or %after.author.reference = ${ME}) and ` +
    `(%after.source.empty() or %after.source.reference = ${ME}) and ` +
    `(%before.exists().not() or (%before.status = 'in-progress' and %before.meta.author.reference = ${ME}))`,
};

/**
 * Clinicians (Medplum's app): their tenant only, in EVERY entry (`%organization`); what they create
 * about a patient inherits that patient's tenant, so a write for another tenant's patient fails the
 * criteria (Medplum checks the result of a write against them, packages/server/src/fhir/repo.ts).
 * Orders stay proposals: only bots place them (JOURNEY section 0).
 */
function clinicianPolicy(): AccessPolicyResource[] {
  return [
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
        ...(resourceType === 'DocumentReference' ? [NOT_EVIDENCE] : []),
      ],
      ...(resourceType === 'Patient' ? { readonlyFields: ['managingOrganization', 'link'] } : {}),
    })),
    ...['MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      interaction: ['create', 'read', 'search', 'update', 'vread', 'history'] as AccessPolicyResource['interaction'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, PROPOSALS_ONLY, NOT_AN_OFFER_ITEM],
    })),
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
    // The engine's findings: read, and overridden only by recording a mitigation (JOURNEY D.2).
    {
      resourceType: 'DetectedIssue',
      criteria: inTenant('DetectedIssue'),
      interaction: ['read', 'search', 'update', 'vread', 'history'],
      writeConstraint: [SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_OWN_TENANT, MITIGATION_ONLY],
    },
    ...['Practitioner', 'PractitionerRole'].map((resourceType) => ({
      resourceType,
      criteria: inTenant(resourceType),
      readonly: true,
    })),
    // Her own tenant's Organization (a patient's managingOrganization, which Medplum's app reads), read-only.
    { resourceType: 'Organization', criteria: `Organization?_id=%${TENANT_PARAMETER}.id`, readonly: true },
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
    // No Binary: on Medplum 5.0.10 a read grant opens every Binary of the project by id, whatever its
    // securityContext (see the patient policy). Patients' uploads stay out of clinicians' direct reach.
  ];
}

/** A plan's visit request (JOURNEY E): `intent` plan, since no practitioner orders it; never an order. */
const VISIT_PLANS_ONLY = { language: 'text/fhirpath' as const, expression: "%after.intent = 'plan'" };

/** A visit reviewed: an Appointment fulfilled, a segment finished; who and what it was for unchanged. */
const FULFILMENT_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'fulfilled' or %after.status = 'finished') and " +
    unchanged(['participant', 'subject', 'appointment', 'basedOn']),
};

/** A visit's status decided from its segments: booked, arrived or fulfilled; who, when and what for unchanged. */
const VISIT_STATUS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'booked' or %after.status = 'arrived' or %after.status = 'fulfilled') and " +
    unchanged(['participant', 'slot', 'basedOn', 'start', 'end']),
};

/** A task past due marked so (priority urgent, business status overdue): who owns it and its state unchanged. */
const MARKED_OVERDUE_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and %after.priority = 'urgent' and %after.businessStatus.text = 'overdue' and " +
    unchanged(['status', 'owner', 'for', 'focus', 'code', 'output', 'restriction']),
};

/** A Slot filed in its tenant (its accounts): its status, time and schedule unchanged; creating one is free. */
const SLOT_FILED_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    '%before.exists().not() or (%after.status = %before.status and %after.start = %before.start and ' +
    '%after.end = %before.end and %after.schedule = %before.schedule)',
};

/** Booking changes a Slot's status between free and busy, and nothing else of it. */
const SLOT_STATUS_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and (%after.status = 'busy' or %after.status = 'free') and %after.start = %before.start and " +
    '%after.end = %before.end and %after.schedule = %before.schedule',
};

/** A request written as a proposal, never an order: placing orders is the order-decisions bot's alone. */
const PROPOSALS_ONLY = { language: 'text/fhirpath' as const, expression: "%after.intent = 'proposal'" };

/**
 * Placing an order changes an accepted proposal in place (JOURNEY G): intent proposal -> order, or it is
 * cancelled; who it is for and who requested it stay as they were.
 */
const PLACEMENT_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists() and %before.intent = 'proposal' and (%after.intent = 'order' or %after.status = 'cancelled' or %after.status = 'revoked') and " +
    '%after.subject = %before.subject and ' +
    // A request has a requester, a RequestGroup an author: unchanged means equal, or absent before and after.
    unchanged(['requester', 'author']),
};

/** What applying an inbound SMS STOP takes: the message, its integration's client, the SMS Consents. */
function smsOptOutAccess(): AccessPolicyResource[] {
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

const BOT_CODE = ['executableCode', 'sourceCode'];
/** The subscription bots whose lost deliveries the reconciler re-drives. */
const REDRIVEN_BOTS = `Bot?identifier=${SYSTEMS.bots}|eligibility,${SYSTEMS.bots}|compose-offer,${SYSTEMS.bots}|visit-completion`;
/** Read by a subscription bot to recognise the reconciler as the one other caller it acts for. */
const RECONCILER: AccessPolicyResource = {
  resourceType: 'Bot',
  criteria: `Bot?identifier=${SYSTEMS.bots}|reconcile`,
  interaction: ['read'],
  hiddenFields: BOT_CODE,
};

/** Inbound SMS, as the SMS integration writes them. */
const INBOUND_SMS = `Communication?category=${SYSTEMS.communicationCategory}|inbound-sms`;
/** The SMS integration's client: the only author whose inbound SMS the opt-out bot believes. */
const SMS_INTEGRATION = `ClientApplication?_tag=${SYSTEMS.integration}|sms`;

/** The platform's project: access policies, bots, tenants and their apps. Demo data lives in demo.ts. */
export const platformDefinition: ProvisionDefinition = {
  project: {
    features: ['bots', 'transaction-bundles', 'cron'],
    defaultPatientAccessPolicy: 'patient',
  },
  accessPolicies: [
    { key: 'patient', policy: { name: 'Patient (default)', resource: patientPolicy() } },
    {
      key: 'clinician',
      policy: {
        name: 'Clinician',
        // What she creates about nobody (the Provider app's answers to a work form name no patient) is
        // filed in her tenant: Medplum stamps the policy's compartment as the account of what a member
        // creates (packages/server/src/fhir/repo.ts getAccounts), beside the accounts of the patients it names.
        compartment: { reference: `%${TENANT_PARAMETER}` },
        resource: clinicianPolicy(),
      },
    },
    {
      key: 'bot-read-document',
      // Any Binary by id (it checks the security context is the requester before handing anything over),
      // and the Patients that are their contexts (a Medplum that checks securityContext reads it too).
      policy: {
        name: 'Bot: read a document',
        resource: [
          { resourceType: 'Binary', interaction: ['read'] },
          { resourceType: 'Patient', interaction: ['read'] },
        ],
      },
    },
    {
      key: 'bot-accept-agreements',
      policy: {
        name: 'Bot: accept agreements',
        // Create only: an acceptance, once written, is never changed by this bot.
        resource: [...agreementReads(), { resourceType: 'Consent', interaction: ['create', 'read', 'search'] }],
      },
    },
    { key: 'bot-sms-opt-out', policy: { name: 'Bot: SMS opt-out', resource: smsOptOutAccess() } },
    {
      key: 'bot-reconcile',
      policy: {
        name: 'Bot: reconciler',
        // SMS opt-outs as the opt-out bot applies them; the spine's lost deliveries: it finds the work
        // left undone and executes the bot that lost it (it writes nothing of the spine itself).
        resource: [
          ...smsOptOutAccess(),
          { resourceType: 'Task', interaction: ['read', 'search'] },
          // An asynchronous review past due: marked urgent and overdue, nothing else of it.
          {
            resourceType: 'Task',
            criteria: `Task?code=${SYSTEMS.taskKind}|review-async-visit`,
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
          { resourceType: 'Bot', criteria: REDRIVEN_BOTS, interaction: ['read', 'search'], hiddenFields: BOT_CODE },
        ],
      },
    },
    {
      key: 'bot-withdraw-agreement',
      policy: {
        name: 'Bot: withdraw agreement',
        resource: [
          ...agreementReads(),
          {
            resourceType: 'Consent',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [CONSENT_ONLY_STATUS_CHANGES],
          },
        ],
      },
    },
    {
      key: 'bot-patient-home',
      policy: {
        name: 'Bot: patient-home',
        resource: [
          { resourceType: 'Patient', interaction: ['read', 'search', 'update'] },
          { resourceType: 'ClientApplication', interaction: ['read'], hiddenFields: CLIENT_SECRETS },
          { resourceType: 'Organization', interaction: ['read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-start-assessment',
      policy: {
        name: 'Bot: start an assessment',
        // It reads what the patient may start (it checks publication and tenant itself) and writes only
        // the journey it starts: the EpisodeOfCare and its tasks, never anything else.
        resource: [
          ...agreementReads(),
          ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-complete-task',
      policy: {
        name: 'Bot: complete a task',
        // It checks that the task, answers and uploads are the requester's own; it writes the task, the
        // Observations of readings, the episode's revision and the clinician's review tasks. An answer to
        // an offer: the treatment Consent and the CarePlan on acceptance, else the offer revoked (it never
        // places an order: offers and her counter stay proposals).
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update', 'history'] },
          { resourceType: 'QuestionnaireResponse', interaction: ['read'] },
          // The tenant's condition catalogs: the choices of the intake review's form.
          ...['ObservationDefinition', 'ActivityDefinition', 'Questionnaire', 'Condition', 'ValueSet'].map(
            (resourceType) => ({
              resourceType,
              interaction: ['read' as const, 'search' as const, 'vread' as const],
            }),
          ),
          { resourceType: 'Observation', interaction: ['create', 'read'] },
          // The intake review's form, stored with the review (contracts/work-forms.ts).
          WORK_FORM_CREATES,
          // Her uploads as her tenant's clinicians see them (bots/lib/evidence.ts): created once, never changed.
          ...['Media', 'DocumentReference'].map(
            (resourceType): AccessPolicyResource => ({
              resourceType,
              interaction: ['create'],
              writeConstraint: [EVIDENCE_ONLY],
            }),
          ),
          // Her tenant's fulfilment policy, for the order-decisions task it issues on acceptance.
          { resourceType: 'Organization', interaction: ['read'] },
          { resourceType: 'EpisodeOfCare', interaction: ['read', 'update'] },
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          { resourceType: 'Binary', interaction: ['read'] },
          { resourceType: 'Consent', interaction: ['create', 'read', 'search'] },
          { resourceType: 'CarePlan', interaction: ['create', 'read', 'search'] },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
        ],
      },
    },
    {
      key: 'bot-request-review',
      policy: {
        name: 'Bot: a patient request for review',
        // It reads what the patient may ask for (it checks publication and tenant itself) and writes only
        // her proposal and the review task for the queue.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          ...['PlanDefinition', 'ActivityDefinition', 'HealthcareService', 'Location', 'CareTeam'].map(
            (resourceType) => ({ resourceType, interaction: ['read' as const, 'search' as const] }),
          ),
          ...['MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-eligibility',
      policy: {
        name: 'Bot: treatment eligibility',
        // Woken by a completed intake review: it reads her answers, the patient's record and the catalog,
        // and writes the Condition she assigned, the clinician's selection task with its advisory findings
        // and their provenance.
        resource: [
          ...[
            'Task',
            'QuestionnaireResponse',
            'Patient',
            'Observation',
            'MedicationRequest',
            'AllergyIntolerance',
            'PlanDefinition',
            'ActivityDefinition',
            'ValueSet',
            'Device',
            'CareTeam',
          ].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
          { resourceType: 'Condition', interaction: ['create', 'read', 'search', 'vread'] },
          { resourceType: 'DetectedIssue', interaction: ['create', 'read'] },
          { resourceType: 'Provenance', interaction: ['create', 'read'] },
          // The review's form (read), and the selection's (stored with it).
          { resourceType: 'Questionnaire', interaction: ['read'] },
          WORK_FORM_CREATES,
          // A clinical revision of the Condition withdraws what was offered for its older version (revoked,
          // cancelled: bots/lib/conditions.ts), never more.
          {
            resourceType: 'RequestGroup',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [
              { language: 'text/fhirpath', expression: "%after.status = 'revoked' and %after.intent = 'proposal'" },
            ],
          },
          {
            resourceType: 'MedicationRequest',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [
              { language: 'text/fhirpath', expression: "%after.status = 'cancelled' and %after.intent = 'proposal'" },
            ],
          },
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-compose-offer',
      policy: {
        name: 'Bot: compose the consent bundle',
        // Woken by a completed selection: it reads the pinned definitions and the findings, and writes the
        // offer (proposals only), its provenance and the patient's offer task.
        resource: [
          ...['PlanDefinition', 'ActivityDefinition', 'Condition', 'QuestionnaireResponse', 'Questionnaire'].map(
            (resourceType) => ({
              resourceType,
              interaction: ['read' as const, 'search' as const, 'vread' as const],
            }),
          ),
          // A finding's history says who recorded each mitigation (bots/lib/queues.ts ownMitigations).
          { resourceType: 'DetectedIssue', interaction: ['read', 'search', 'vread', 'history'] },
          { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
          ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
          { resourceType: 'Provenance', interaction: ['create', 'read'] },
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-enrollment',
      policy: {
        name: 'Bot: enrollment',
        // It reads what the patient may enroll in (it checks publication and tenant itself), and writes
        // only her journey: the episode, the plan, its tasks; unenrolling, a review task for her team.
        resource: [
          ...agreementReads(),
          ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'CarePlan', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search', 'update'] },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          { resourceType: 'MedicationRequest', interaction: ['read'] },
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          // Unenrolling cancels the plan's future visits: the Appointment, its segments, its Slot's status.
          ...['Appointment', 'Encounter'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'update' as const],
          })),
          { resourceType: 'Slot', interaction: ['read', 'update'], writeConstraint: [SLOT_STATUS_ONLY] },
        ],
      },
    },
    {
      key: 'bot-materialize-slots',
      policy: {
        name: 'Bot: free slots',
        // It reads the Schedules and their actors' working hours and creates free Slots; it never
        // changes a Slot once made (booking is another bot's).
        resource: [
          { resourceType: 'Schedule', interaction: ['read', 'search'] },
          { resourceType: 'PractitionerRole', interaction: ['read'] },
          // It files the Slots made before they carried their tenant: their accounts, nothing else.
          {
            resourceType: 'Slot',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [SLOT_FILED_ONLY],
          },
        ],
      },
    },
    {
      key: 'bot-availability',
      policy: {
        name: 'Bot: availability',
        // Read only: her Patient (tenant, state), her tenant's visit teams and practitioners' roles, their
        // licences (jurisdiction Locations), Schedules and free Slots. It checks the tenant itself.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          ...['CareTeam', 'PractitionerRole', 'Location', 'Schedule', 'Slot'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-appointments',
      policy: {
        name: 'Bot: visits',
        // It books, moves and cancels a patient's visits and starts their segments: it writes Appointments,
        // their Encounters, her schedule-visit tasks, and a Slot's status (nothing else of it).
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update'] },
          ...['ServiceRequest', 'Schedule', 'PractitionerRole', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const],
          })),
          { resourceType: 'Slot', interaction: ['read', 'search', 'update'], writeConstraint: [SLOT_STATUS_ONLY] },
          // Her tenant's queue, for the care team's review of an asynchronous visit.
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          ...['Appointment', 'Encounter'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-visit-review',
      policy: {
        name: 'Bot: an asynchronous visit reviewed',
        // Woken by the care team's completed review of an asynchronous visit: it reads the review and the
        // visit, and fulfils the visit (the Appointment and its segments), nothing else.
        resource: [
          { resourceType: 'Task', interaction: ['read', 'search', 'history'] },
          ...['Appointment', 'Encounter'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'update' as const],
            writeConstraint: [FULFILMENT_ONLY],
          })),
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-visit-completion',
      policy: {
        name: 'Bot: a visit completed',
        // Woken by a finished segment or a visit marked fulfilled: it reads the visit, its segments, its
        // request and plan (and the definitions a repeating visit is issued again from); it sets the
        // Appointment's status, completes the request, notes the outcome on the plan and issues the next
        // visit to book (a request, intent plan, and her schedule-visit task). Nothing else.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          { resourceType: 'Encounter', interaction: ['read', 'search'] },
          {
            resourceType: 'Appointment',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [VISIT_STATUS_ONLY],
          },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          { resourceType: 'CarePlan', interaction: ['read', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          ...['PlanDefinition', 'ActivityDefinition', 'Questionnaire', 'ObservationDefinition'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-decide-order',
      policy: {
        name: 'Bot: order decisions',
        // It checks the order is the requester's and accepted; it places the items she accepts (intent
        // proposal -> order, requester and subject unchanged) and cancels those she declines. It never
        // creates a request.
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'update', 'history'] },
          { resourceType: 'Organization', interaction: ['read'] },
          ...['RequestGroup', 'MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'update' as const],
            writeConstraint: [PLACEMENT_ONLY],
          })),
        ],
      },
    },
    {
      key: 'integration-sms',
      policy: {
        name: 'SMS integration: writes inbound messages',
        resource: [{ resourceType: 'Communication', criteria: INBOUND_SMS, interaction: ['create', 'read'] }],
      },
    },
  ],
  bots: [
    {
      key: 'accept-agreements',
      patient: true,
      description: 'POST /v1/agreements/acceptances: one Consent per agreement with clickwrap proof.',
      accessPolicy: 'bot-accept-agreements',
    },
    {
      key: 'read-document',
      patient: true,
      description: 'GET /v1/documents/{id}: one of her own uploads.',
      accessPolicy: 'bot-read-document',
    },
    {
      key: 'withdraw-agreement',
      patient: true,
      description: 'POST /v1/agreements/withdrawals: the Consent becomes inactive.',
      accessPolicy: 'bot-withdraw-agreement',
    },
    {
      key: 'start-assessment',
      patient: true,
      description: 'POST /v1/assessments: starts or resumes an assessment (EpisodeOfCare and intake tasks).',
      accessPolicy: 'bot-start-assessment',
    },
    {
      key: 'complete-task',
      patient: true,
      description: 'POST /v1/tasks/{id}/complete: completes a questionnaire or measurement task, or answers an offer.',
      accessPolicy: 'bot-complete-task',
    },
    {
      key: 'request-review',
      patient: true,
      description: 'POST /v1/requests: a patient proposes a medication, protocol or treatment option for review.',
      accessPolicy: 'bot-request-review',
    },
    {
      key: 'enrollment',
      patient: true,
      description: 'POST /v1/enrollments, /activate, DELETE: a program enrollment (a CarePlan) and its tasks.',
      accessPolicy: 'bot-enrollment',
    },
    {
      key: 'visit-review',
      description: 'Subscription: the care team completed the review of an asynchronous visit; the visit is fulfilled.',
      accessPolicy: 'bot-visit-review',
    },
    {
      key: 'visit-completion',
      description:
        'Subscription: a visit segment finished (or a visit marked fulfilled); the visit is fulfilled once every segment is, and the plan issues the next.',
      accessPolicy: 'bot-visit-completion',
    },
    {
      key: 'appointments',
      patient: true,
      description: 'POST /v1/appointments, /reschedule, /cancel, /encounter: a patient books and runs her visits.',
      accessPolicy: 'bot-appointments',
    },
    {
      key: 'availability',
      patient: true,
      description: 'GET /v1/availability: free visit slots of licensed practitioners, or per-day counts.',
      accessPolicy: 'bot-availability',
    },
    {
      key: 'decide-order',
      patient: true,
      description: 'POST /v1/orders/{id}/decisions: places the items of an accepted treatment with their fulfilment.',
      accessPolicy: 'bot-decide-order',
    },
    {
      key: 'eligibility',
      description: 'A completed intake review: eligibility of each treatment option, offered for selection.',
      accessPolicy: 'bot-eligibility',
    },
    {
      key: 'compose-offer',
      description: 'A completed selection: the pinned consent bundle offered to the patient as a task.',
      accessPolicy: 'bot-compose-offer',
    },
    {
      key: 'sms-opt-out',
      description: 'Inbound SMS STOP: the matching SMS Consent becomes inactive.',
      accessPolicy: 'bot-sms-opt-out',
    },
    {
      key: 'reconcile',
      description:
        'Every 10 minutes: re-drives subscription work left undone (inbound SMS STOPs not yet applied, eligibility and offers of the clinical spine).',
      accessPolicy: 'bot-reconcile',
      cronString: '*/10 * * * *',
    },
    {
      key: 'materialize-slots',
      description:
        'Hourly (and once after provisioning): the free Slots of every active Schedule for the next three weeks, at most 350 a run (its FHIR quota), soonest first.',
      accessPolicy: 'bot-materialize-slots',
      cronString: '0 * * * *',
      runAfterProvisioning: true,
    },
    {
      key: 'patient-home',
      patient: true,
      description: 'Assigns a self-registered patient to the tenant of the app they registered with.',
      accessPolicy: 'bot-patient-home',
      admin: true,
    },
  ],
  subscriptions: [
    {
      key: 'review-intake-completed',
      bot: 'eligibility',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-intake&status=completed`,
      interaction: 'update',
      reason: 'Eligibility after a clinician assigns a condition (JOURNEY D.1)',
    },
    {
      key: 'select-treatment-completed',
      bot: 'compose-offer',
      criteria: `Task?code=${SYSTEMS.taskKind}|select-treatment&status=completed`,
      interaction: 'update',
      reason: 'The consent bundle after a clinician selects a treatment (JOURNEY D.3)',
    },
    {
      key: 'review-response-completed',
      bot: 'compose-offer',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-response&status=completed`,
      interaction: 'update',
      reason: 'A new consent bundle after a declined or countered offer is reviewed (JOURNEY D.4)',
    },
    {
      key: 'async-review-completed',
      bot: 'visit-review',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-async-visit&status=completed`,
      interaction: 'update',
      reason: 'An asynchronous visit fulfilled when the care team completes its review (JOURNEY H)',
    },
    // Medplum's Provider app marks the Appointment fulfilled before it finishes the encounter, whatever
    // segments remain: both wake the bot that decides from the segments (bots/visit-completion.ts).
    {
      key: 'segment-finished',
      bot: 'visit-completion',
      criteria: 'Encounter?status=finished',
      interaction: 'update',
      reason: 'A visit fulfilled when its last segment is finished, and the next visit issued (JOURNEY H)',
    },
    {
      key: 'visit-marked-fulfilled',
      bot: 'visit-completion',
      criteria: 'Appointment?status=fulfilled',
      interaction: 'update',
      reason: 'A visit marked fulfilled with segments still to come goes back to what its segments say (JOURNEY H)',
    },
    {
      key: 'condition-revised',
      bot: 'eligibility',
      criteria: 'Condition',
      interaction: 'update',
      reason:
        'A clinical revision of a Condition the platform recorded withdraws older offers and re-runs eligibility (JOURNEY D.1)',
    },
    // The Provider app completes the task BEFORE her answers (contracts/work-forms.ts): their completion
    // wakes the same bots, which find the task they hand in.
    {
      key: 'review-intake-answers-completed',
      bot: 'eligibility',
      criteria: `QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.assignCondition}`,
      interaction: 'update',
      reason: 'Eligibility when the answers to an intake review are completed after the review',
    },
    {
      key: 'selection-answers-completed',
      bot: 'compose-offer',
      criteria: `QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.selectTreatment}`,
      interaction: 'update',
      reason: 'The consent bundle when the answers to a selection are completed after the selection',
    },
    {
      key: 'inbound-sms',
      bot: 'sms-opt-out',
      criteria: `Communication?category=${SYSTEMS.communicationCategory}|inbound-sms`,
      interaction: 'create',
      reason: 'SMS opt-out (STOP replies)',
    },
  ],
  resources: [
    {
      key: 'device-eligibility-engine',
      resource: {
        resourceType: 'Device',
        identifier: [{ system: SYSTEMS.device, value: 'eligibility-engine' }],
        status: 'active',
        deviceName: [{ name: 'Patient Care eligibility engine', type: 'user-friendly-name' }],
        version: [{ value: ELIGIBILITY_ENGINE_VERSION }],
      },
    },
    {
      key: 'integration-sms',
      resource: {
        resourceType: 'ClientApplication',
        name: 'SMS integration',
        description: 'Writes inbound SMS as Communications (category inbound-sms); its STOP replies opt patients out.',
        meta: { tag: [{ system: SYSTEMS.integration, code: 'sms' }] },
      },
    },
  ],
  integrations: [{ key: 'integration-sms', accessPolicy: 'integration-sms' }],
};

/**
 * How a tenant's patients may receive what they are prescribed, by country and kind of item (JOURNEY G):
 * medicines delivered or picked up in the US, picked up in Canada; tests in a clinic, or a home kit in
 * the US. A country not listed has no method: an order there cannot be placed (422 `invalid_fulfilment`).
 */
const FULFILMENT_POLICY: { country: string; kind: string; methods: FulfilmentMethod[] }[] = [
  { country: 'US', kind: 'MedicationRequest', methods: ['delivery', 'pickup'] },
  { country: 'US', kind: 'ServiceRequest', methods: ['in-clinic', 'at-home-kit'] },
  { country: 'CA', kind: 'MedicationRequest', methods: ['pickup'] },
  { country: 'CA', kind: 'ServiceRequest', methods: ['in-clinic'] },
];

/**
 * A tenant: its Organization, its staff (people who sign in: applied after the Organization they belong
 * to and before the queues they are members of), its work queues (CareTeams: `participant` are the
 * queue's members, JOURNEY F) and its patient app (whose extension names the tenant).
 */
export function tenantResources(
  key: string,
  name: string,
  appId?: string,
  staff: KeyedResource[] = [],
): KeyedResource[] {
  return [
    {
      key: `org-${key}`,
      resource: {
        resourceType: 'Organization',
        name,
        identifier: [{ system: SYSTEMS.tenant, value: key }],
        active: true,
        extension: FULFILMENT_POLICY.map(({ country, kind, methods }) => ({
          url: EXTENSIONS.fulfilmentPolicy,
          extension: [
            { url: 'country', valueCode: country },
            { url: 'kind', valueCode: kind },
            ...methods.map((method) => ({ url: 'method', valueCode: method })),
          ],
        })),
      },
    },
    // Each member of staff works the queue: its participant, and its `queues` policy parameter.
    ...staff.map((member) =>
      'member' in member
        ? {
            ...member,
            member: {
              ...(member as MemberResource).member,
              queues: [...((member as MemberResource).member.queues ?? []), `queue-${key}-intake-review`],
            },
          }
        : member,
    ),
    {
      key: `queue-${key}-intake-review`,
      resource: {
        resourceType: 'CareTeam',
        meta: { accounts: [keyRef(`org-${key}`)] },
        status: 'active',
        name: `${name} intake review`,
        category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }] }],
        managingOrganization: [keyRef(`org-${key}`)],
        ...(staff.length > 0
          ? { participant: staff.map((member) => ({ member: keyRef<Practitioner>(member.key) })) }
          : {}),
      },
    },
    {
      key: `app-${key}`,
      presetId: appId,
      resource: {
        resourceType: 'ClientApplication',
        name: `${name} patient app`,
        description: `Patient app of ${name}; patients who register through it belong to ${name}.`,
        extension: [{ url: EXTENSIONS.tenantOrganization, valueReference: keyRef(`org-${key}`) }],
      },
    },
  ];
}
