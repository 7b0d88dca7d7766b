import type { AccessPolicy, AccessPolicyResource, Project, Reference, Resource } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS, TENANT_PARAMETER } from '../shared/systems';

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

/** The platform's project: access policies, bots, tenants and their apps. Demo data lives in demo.ts. */
export const platformDefinition: ProvisionDefinition = {
  project: {
    features: ['bots', 'transaction-bundles'],
    defaultPatientAccessPolicy: 'patient',
  },
  accessPolicies: [
    { key: 'patient', policy: { name: 'Patient (default)', resource: patientPolicy() } },
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
      key: 'patient-home',
      description: 'Assigns a self-registered patient to the tenant of the app they registered with.',
      accessPolicy: 'bot-patient-home',
      admin: true,
    },
  ],
  subscriptions: [],
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
