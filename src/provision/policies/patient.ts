import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { DOCUMENT_TYPES } from '../../../contracts/attachments';
import { BOT_AUDIENCE, CATALOG, SYSTEMS } from '../../../contracts/systems';
import { OWN_PATIENT_AUDIT_TRAIL } from '../bots/audit';
import {
  CATALOG_TYPES,
  catalogReads,
  inTenant,
  JOURNEY_KEYS,
  ONLY_OWN_TENANT,
  ownCompartment,
  SERVER_OWNED_TAGS,
} from './common';

/** The patient's access policy: her own compartment, the published catalog, her tenant's directory, and the few writes she makes herself. */

/** Clinical record types a patient may read in their own compartment, never write. */
export const PATIENT_READONLY_TYPES = [
  'AllergyIntolerance',
  'Appointment',
  'CarePlan',
  'CareTeam',
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
 * Her messages (contracts/messages.ts): the Communications about her that name her as a recipient (her
 * threads and her care team's messages in them) or as the sender (her own). A clinician's comment on her
 * chart names no recipient (Medplum's Provider app writes its timeline comments so): internal, not hers
 * to read, as an internal thread between clinicians about her is not.
 */
export const HER_MESSAGES = ['recipient', 'sender'].map((role) => `Communication?subject=%patient&${role}=%patient`);

/** Her visit notes as she may read them: completed (signed and locked by her practitioner), never a draft. */
export const SIGNED_NOTES = 'ClinicalImpression?subject=%patient&status=completed';

/**
 * The tenant's staff directory and free/busy slots: no patient data (a Slot says free or busy, never for
 * whom), reached by following references from the patient's own appointments and care teams. Not
 * Schedule: a Schedule's actor may be a patient (it is then in that patient's compartment).
 */
export const TENANT_DIRECTORY_TYPES = ['Practitioner', 'PractitionerRole', 'Slot'] as const;

/**
 * Her tenant's visit Schedules (a practitioner role's calendar of a visit type): what availability is
 * computed from with her own token. Only Schedules serving a visit type (the platform's), never one whose
 * actor could be a patient.
 */
export const VISIT_SCHEDULES = `${inTenant('Schedule')}&service-type=${SYSTEMS.visitType}|`;

/**
 * Every patient reference a patient writes must be themselves (subject, author, source), also on
 * create: Medplum evaluates writeConstraint with `%before` empty then (packages/server/src/fhir/repo.ts).
 */
export const ONLY_SELF_REFERENCES = {
  language: 'text/fhirpath' as const,
  expression:
    "%after.subject.reference = '%patient' and " +
    "%after.author.all(reference = '%patient') and %after.source.all(reference = '%patient')",
};

/**
 * Her Basics are her Idempotency-Key records and nothing else: no other code rides along (a Basic that
 * also carried a webhook delivery's code would be found by the webhooks bot's search of its deliveries).
 */
export const ONLY_IDEMPOTENCY_CODE = {
  language: 'text/fhirpath' as const,
  expression: `%after.code.coding.all(system = '${SYSTEMS.idempotency}' and code = 'request')`,
};

/**
 * A patient never answers a clinician's work form (contracts/work-forms.ts): answers to one wake the
 * eligibility and compose-offer bots when completed, so a patient's would spend those bots' quota, which
 * every patient shares, for nothing (self-registration is open).
 */
export const NOT_A_WORK_FORM = {
  language: 'text/fhirpath' as const,
  expression: `%after.questionnaire.exists().not() or %after.questionnaire.startsWith('${SYSTEMS.workForm}/').not()`,
};

/**
 * Submitted answers are final (JOURNEY B): an update is allowed only while the stored version is still
 * `in-progress`. On create `%before` is empty, so any status may be created.
 */
export const ANSWERS_FROZEN_ONCE_SUBMITTED = {
  language: 'text/fhirpath' as const,
  expression: "%before.exists().not() or %before.status = 'in-progress'",
};

export function patientPolicy(): AccessPolicyResource[] {
  return [
    // Medplum's record of what she reads and changes herself, kept through her own access: entries that
    // name her only, about no other patient (her access log, bots/audit.ts); never read, changed or deleted by her.
    OWN_PATIENT_AUDIT_TRAIL,
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
    // Her own chart, read-only: what the record plane serves her; every change to it is a workflow's or a clinician's.
    ...PATIENT_READONLY_TYPES.map((type) => ({ resourceType: type, criteria: ownCompartment(type), readonly: true })),
    // Her messages with her care team, read and searched: she answers through the send-message bot. Not
    // their history: Medplum checks a history against the current version only, and an earlier version of
    // a message or comment addressed to her now may not have been.
    ...HER_MESSAGES.map((criteria) => ({
      resourceType: 'Communication',
      criteria,
      interaction: ['read', 'search'] as AccessPolicyResource['interaction'],
    })),
    // Her visits' notes once her practitioner has signed and locked them (docs/clinicians.md); never a draft,
    // so never their history (Medplum would list the drafts of a note that is locked now).
    {
      resourceType: 'ClinicalImpression',
      criteria: SIGNED_NOTES,
      interaction: ['read', 'search'] as AccessPolicyResource['interaction'],
    },
    // Her Idempotency-Key records (src/edge/idempotency.ts): hers alone, about her own calls; written
    // with her token so that every gateway instance honours her keys. What she writes here directly
    // changes only what the gateway answers her again.
    {
      resourceType: 'Basic',
      criteria: `Basic?subject=%patient&code=${SYSTEMS.idempotency}|request`,
      interaction: ['create', 'read', 'search', 'update', 'delete'],
      writeConstraint: [ONLY_SELF_REFERENCES, SERVER_OWNED_TAGS, JOURNEY_KEYS, ONLY_IDEMPOTENCY_CODE],
    },
    // The published catalog (her tenant's and the platform's): what she may start, agree to and be offered.
    ...CATALOG_TYPES.flatMap(catalogReads),
    // Her tenant's practitioners, their roles and free Slots: whom she may book, computed with her own token.
    ...TENANT_DIRECTORY_TYPES.map((type) => ({ resourceType: type, criteria: inTenant(type), readonly: true })),
    // Her tenant's visit calendars, the Slots' Schedules: availability is read through them.
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

/** An upload is a document of an accepted type (contracts/attachments.ts), never active content. */
export const DOCUMENT_TYPES_ONLY = {
  language: 'text/fhirpath' as const,
  expression: DOCUMENT_TYPES.map((type) => `%after.contentType = '${type}'`).join(' or '),
};

/** A patient's upload is hers: its security context (who may read it) is the patient herself. */
export const OWN_SECURITY_CONTEXT = {
  language: 'text/fhirpath' as const,
  expression: "%after.securityContext.reference = '%patient'",
};

/** Agreement documents as the agreement bots may read them: published catalog entries only. */
export const publishedDocuments = (): AccessPolicyResource[] =>
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
