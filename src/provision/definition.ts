import type { AccessPolicy, AccessPolicyResource, Project, Reference, Resource } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';

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
}

export interface BotDefinition {
  /** Also the bundle name (`dist/bots/<key>.js`) and the identifier value under SYSTEMS.bots. */
  key: string;
  description: string;
  accessPolicy: string;
  /** Project-admin membership: needed only by bots that must touch ProjectMembership (Medplum rule). */
  admin?: boolean;
}

export interface SubscriptionDefinition {
  key: string;
  bot: string;
  criteria: string;
  interaction: 'create' | 'update' | 'delete';
  reason: string;
}

export interface KeyedResource {
  key: string;
  resource: Resource;
  /** Published once, never changed (agreement versions): a change must be a new key and version. */
  writeOnce?: boolean;
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

/** Catalog types a patient may read when they belong to the tenant (or are platform-wide). */
const TENANT_CATALOG_TYPES = [
  'HealthcareService',
  'PlanDefinition',
  'ActivityDefinition',
  'Questionnaire',
  'ObservationDefinition',
  'Practitioner',
  'PractitionerRole',
  'Schedule',
  'Slot',
  // Agreement documents (write-once; see agreements.ts) sit beside the patient's own documents.
  'DocumentReference',
] as const;

const ownCompartment = (type: string): string => `${type}?_compartment=%patient`;

function patientPolicy(): AccessPolicyResource[] {
  return [
    // Own demographics: readable and updatable; tenancy and identity stay server-owned.
    {
      resourceType: 'Patient',
      criteria: ownCompartment('Patient'),
      interaction: ['read', 'search', 'update', 'history', 'vread'],
      readonlyFields: ['managingOrganization', 'identifier', 'link'],
    },
    // Own answers: created and updated by the patient, never deleted.
    {
      resourceType: 'QuestionnaireResponse',
      criteria: ownCompartment('QuestionnaireResponse'),
      interaction: ['read', 'search', 'create', 'update', 'history', 'vread'],
    },
    ...PATIENT_READONLY_TYPES.map((type) => ({ resourceType: type, criteria: ownCompartment(type), readonly: true })),
    ...TENANT_CATALOG_TYPES.flatMap((type) => [
      { resourceType: type, criteria: `${type}?_compartment=%${TENANT_PARAMETER}`, readonly: true },
      { resourceType: type, criteria: `${type}?_tag=${SYSTEMS.provisioning}|platform-catalog`, readonly: true },
    ]),
    // The workflow bots a patient may $execute (reading the Bot is what Medplum checks).
    { resourceType: 'Bot', criteria: `Bot?identifier=${SYSTEMS.bots}|`, interaction: ['read', 'search'] },
  ];
}

/**
 * A Consent's proof and what it pins are immutable: an update may only change `status` (and only to
 * `inactive`). Enforced as an AccessPolicy writeConstraint, so it holds for every bot client too.
 */
const CONSENT_ONLY_STATUS_CHANGES = {
  language: 'text/fhirpath' as const,
  expression:
    "%after.status = 'inactive' and %after.extension = %before.extension and %after.policy = %before.policy and " +
    '%after.patient = %before.patient and %after.dateTime = %before.dateTime and %after.identifier = %before.identifier and ' +
    '%after.category = %before.category',
};

/** What the agreement bots read to resolve requirements. */
function agreementReads(): AccessPolicyResource[] {
  return [
    { resourceType: 'Patient', interaction: ['read', 'search'] },
    { resourceType: 'Consent', interaction: ['read', 'search'] },
    ...['DocumentReference', 'PlanDefinition', 'HealthcareService', 'CarePlan', 'Task'].map((resourceType) => ({
      resourceType,
      interaction: ['read' as const, 'search' as const],
    })),
  ];
}

/** Clinicians (Medplum's app): clinical work, but agreements are write-once and acceptances read-only. */
function clinicianPolicy(): AccessPolicyResource[] {
  const clinical = [
    'Patient',
    'Observation',
    'Condition',
    'CarePlan',
    'Task',
    'Appointment',
    'Encounter',
    'EpisodeOfCare',
    'RequestGroup',
    'MedicationRequest',
    'ServiceRequest',
    'Communication',
    'QuestionnaireResponse',
    'PlanDefinition',
    'HealthcareService',
    'Questionnaire',
  ];
  return [
    ...clinical.map((resourceType) => ({ resourceType })),
    { resourceType: 'DocumentReference', interaction: ['create', 'read', 'search', 'vread', 'history'] },
    { resourceType: 'Consent', readonly: true },
  ];
}

/** The platform's project: access policies, bots, tenants and their apps. Demo data lives in demo.ts. */
export const platformDefinition: ProvisionDefinition = {
  project: {
    features: ['bots', 'transaction-bundles'],
    defaultPatientAccessPolicy: 'patient',
  },
  accessPolicies: [
    { key: 'patient', policy: { name: 'Patient (default)', resource: patientPolicy() } },
    { key: 'clinician', policy: { name: 'Clinician', resource: clinicianPolicy() } },
    { key: 'bot-agreements-read', policy: { name: 'Bot: agreement requirements', resource: agreementReads() } },
    {
      key: 'bot-accept-agreements',
      policy: {
        name: 'Bot: accept agreements',
        // Create only: an acceptance, once written, is never changed by this bot.
        resource: [...agreementReads(), { resourceType: 'Consent', interaction: ['create', 'read', 'search'] }],
      },
    },
    {
      key: 'bot-sms-opt-out',
      policy: {
        name: 'Bot: SMS opt-out',
        resource: [
          { resourceType: 'Communication', interaction: ['read', 'search'] },
          {
            resourceType: 'Consent',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [CONSENT_ONLY_STATUS_CHANGES],
          },
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
          { resourceType: 'ClientApplication', interaction: ['read'] },
          { resourceType: 'Organization', interaction: ['read', 'search'] },
        ],
      },
    },
  ],
  bots: [
    {
      key: 'agreement-requirements',
      description: 'GET /v1/agreements/requirements: resolves what the patient must still accept.',
      accessPolicy: 'bot-agreements-read',
    },
    {
      key: 'accept-agreements',
      description: 'POST /v1/agreements/acceptances: one Consent per agreement with clickwrap proof.',
      accessPolicy: 'bot-accept-agreements',
    },
    {
      key: 'withdraw-agreement',
      description: 'POST /v1/agreements/withdrawals: the Consent becomes inactive.',
      accessPolicy: 'bot-withdraw-agreement',
    },
    {
      key: 'sms-opt-out',
      description: 'Inbound SMS STOP: the matching SMS Consent becomes inactive.',
      accessPolicy: 'bot-sms-opt-out',
    },
    {
      key: 'patient-home',
      description: 'Assigns a self-registered patient to the tenant of the app they registered with.',
      accessPolicy: 'bot-patient-home',
      admin: true,
    },
  ],
  subscriptions: [
    {
      key: 'inbound-sms',
      bot: 'sms-opt-out',
      criteria: `Communication?category=${SYSTEMS.communicationCategory}|inbound-sms`,
      interaction: 'create',
      reason: 'SMS opt-out (STOP replies)',
    },
  ],
  resources: [],
};

/** A tenant: its Organization and its patient app (whose extension names the tenant). */
export function tenantResources(key: string, name: string): KeyedResource[] {
  return [
    {
      key: `org-${key}`,
      resource: {
        resourceType: 'Organization',
        name,
        identifier: [{ system: SYSTEMS.tenant, value: key }],
        active: true,
      },
    },
    {
      key: `app-${key}`,
      resource: {
        resourceType: 'ClientApplication',
        name: `${name} patient app`,
        description: `Patient app of ${name}; patients who register through it belong to ${name}.`,
        extension: [{ url: EXTENSIONS.tenantOrganization, valueReference: keyRef(`org-${key}`) }],
      },
    },
  ];
}
