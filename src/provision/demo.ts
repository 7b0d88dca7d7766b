import type { Observation, Organization, Patient, Practitioner } from '@medplum/fhirtypes';
import { SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import { agreementDocument, DEMO_AGREEMENTS } from './agreements';
import type { MemberResource } from './apply';
import { demoCatalog } from './catalog';
import type { KeyedResource, ProvisionDefinition } from './definition';
import { keyRef, platformDefinition, tenantResources } from './definition';
import { demoSchedules } from './schedules';
import { tenantBackends } from './tenants';

export interface DemoPatient {
  key: string;
  tenant: string;
  given: string;
  family: string;
  birthDate: string;
  gender: Patient['gender'];
  state: string;
  phone: string;
}

/**
 * The demo tenants. Each patient app's client id is fixed (the embedded Medplum's bootstrap creates the
 * app with it, as a super admin may), so the README can name it: a patient app is built with its own.
 */
export const DEMO_TENANTS = [
  { key: 'northwind', name: 'Northwind Health', appId: 'a1d3e0f1-0000-4000-8000-00000000a001' },
  { key: 'southridge', name: 'Southridge Care', appId: 'a1d3e0f1-0000-4000-8000-00000000a002' },
] as const;

/**
 * The password of every demo patient and clinician (email `<key>@<tenant>.example`, clinicians
 * `clinician@<tenant>.example`): printed by `npm start` and in the README. Demo data only.
 */
export const DEMO_PASSWORD = 'patient-care-demo';

export const demoEmail = (person: string, tenant: string): string => `${person}@${tenant}.example`;

/** Two tenants, several patients each: the fixture every test and the demo use. */
export const DEMO_PATIENTS: DemoPatient[] = [
  {
    key: 'alice',
    tenant: 'northwind',
    given: 'Alice',
    family: 'Nguyen',
    birthDate: '1984-03-02',
    gender: 'female',
    state: 'CA',
    phone: '+14155550101',
  },
  {
    key: 'bob',
    tenant: 'northwind',
    given: 'Bob',
    family: 'Okafor',
    birthDate: '1979-11-20',
    gender: 'male',
    state: 'TX',
    phone: '+15125550102',
  },
  {
    key: 'carol',
    tenant: 'southridge',
    given: 'Carol',
    family: 'Silva',
    birthDate: '1991-07-14',
    gender: 'female',
    state: 'NY',
    phone: '+12125550103',
  },
  {
    key: 'dave',
    tenant: 'southridge',
    given: 'Dave',
    family: 'Kowalski',
    birthDate: '1968-01-30',
    gender: 'male',
    state: 'CA',
    phone: '+13105550104',
  },
];

const LOINC = 'http://loinc.org';
const BODY_WEIGHT = '29463-7';

/**
 * A demo patient: invited (User, Patient and membership through Medplum's admin API), then its
 * demographics and tenant written through FHIR; and one body weight.
 */
function demoPatientResources(patient: DemoPatient): KeyedResource[] {
  const org = keyRef<Organization>(`org-${patient.tenant}`);
  // The platform's part, restored on every start; the patient cannot change it.
  const fhirPatient: Patient = {
    resourceType: 'Patient',
    meta: { accounts: [org] },
    identifier: [{ system: SYSTEMS.demoPatient, value: patient.key }],
    managingOrganization: org,
  };
  // Hers: written when she is created, then only by her (a start never undoes her edits).
  const demographics: Partial<Patient> = {
    name: [{ given: [patient.given], family: patient.family }],
    birthDate: patient.birthDate,
    gender: patient.gender,
    telecom: [{ system: 'phone', value: patient.phone, use: 'mobile' }],
    address: [{ line: ['1 Demo Street'], city: 'Demo City', state: patient.state, postalCode: '90001', country: 'US' }],
  };
  const member: MemberResource = {
    key: `demo-patient-${patient.key}`,
    resource: fhirPatient,
    seed: demographics,
    member: {
      externalId: `demo-patient-${patient.key}`,
      email: demoEmail(patient.key, patient.tenant),
      password: DEMO_PASSWORD,
      membership: {
        access: [{ policy: keyRef('policy-patient'), parameter: [{ name: TENANT_PARAMETER, valueReference: org }] }],
      },
    },
  };
  const weight: Observation = {
    resourceType: 'Observation',
    // Her tenant, stated: provisioning writes as a project admin in extended mode, where Medplum keeps
    // exactly the accounts sent and derives none from the patient (packages/server/src/fhir/repo.ts).
    meta: { accounts: [org] },
    status: 'final',
    code: { coding: [{ system: LOINC, code: BODY_WEIGHT, display: 'Body weight' }] },
    subject: keyRef(`demo-patient-${patient.key}`),
    effectiveDateTime: '2026-01-15T09:00:00Z',
    valueQuantity: { value: 70 + patient.key.length, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
  };
  return [member, { key: `demo-weight-${patient.key}`, resource: weight }];
}

/**
 * Two clinicians per demo tenant, both of its intake-review queue (so work can be handed between them):
 * each a Practitioner in the tenant, signed in through Medplum's app with the clinician policy and the
 * tenant as its `organization` parameter; invited like a patient. `clinician@<tenant>.example` and her
 * colleague `colleague@<tenant>.example`.
 */
function demoClinicianResources(tenant: { key: string; name: string }): KeyedResource[] {
  const org = keyRef<Organization>(`org-${tenant.key}`);
  const clinician = (person: 'clinician' | 'colleague', name: Practitioner['name']): MemberResource => ({
    key: person === 'clinician' ? `demo-clinician-${tenant.key}` : `demo-colleague-${tenant.key}`,
    resource: {
      resourceType: 'Practitioner',
      meta: { accounts: [org] },
      identifier: [
        { system: SYSTEMS.demoClinician, value: person === 'clinician' ? tenant.key : `${tenant.key}-colleague` },
      ],
      name,
    },
    member: {
      externalId: person === 'clinician' ? `demo-clinician-${tenant.key}` : `demo-colleague-${tenant.key}`,
      email: demoEmail(person, tenant.key),
      password: DEMO_PASSWORD,
      membership: {
        access: [{ policy: keyRef('policy-clinician'), parameter: [{ name: TENANT_PARAMETER, valueReference: org }] }],
      },
    },
  });
  return [
    clinician('clinician', [{ prefix: ['Dr.'], given: ['Demo'], family: `Clinician of ${tenant.name}` }]),
    clinician('colleague', [{ prefix: ['Dr.'], given: ['Jordan'], family: `Kim of ${tenant.name}` }]),
  ];
}

/**
 * The platform definition plus the demo tenants and patients (what `npm start` and the tests use); with
 * `webhooks`, those tenants' webhook endpoints (by tenant key).
 */
export function demoDefinition(options: { webhooks?: Record<string, string> } = {}): ProvisionDefinition {
  // Each demo tenant's own server: reads its patients' records (what its webhooks name).
  const backends = DEMO_TENANTS.map((t) =>
    tenantBackends(t.key, [{ key: 'app-server', name: `${t.name} app server` }]),
  );
  return {
    ...platformDefinition,
    integrations: [...platformDefinition.integrations, ...backends.flatMap((b) => b.integrations)],
    resources: [
      ...platformDefinition.resources,
      ...backends.flatMap((b) => b.resources),
      // Each tenant's demo clinicians are members of its intake-review queue.
      ...DEMO_TENANTS.flatMap((t) =>
        tenantResources(t.key, t.name, t.appId, demoClinicianResources(t), options.webhooks?.[t.key]),
      ),
      ...DEMO_PATIENTS.flatMap(demoPatientResources),
      ...DEMO_AGREEMENTS.map(agreementDocument),
      ...demoCatalog(),
      ...demoSchedules(DEMO_TENANTS, { email: demoEmail, password: DEMO_PASSWORD }),
    ],
  };
}
