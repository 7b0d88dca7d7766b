import type { CareTeam, Organization, Practitioner, PractitionerRole, Schedule } from '@medplum/fhirtypes';
import { SYSTEMS, TENANT_PARAMETER, TIMEZONE_EXTENSION, VISIT_TYPES } from '../../contracts/systems';
import type { MemberResource } from './apply';
import { jurisdictionKey } from './catalog';
import type { KeyedResource } from './definition';
import { keyRef } from './definition';

/**
 * The demo tenants' visit practitioners (JOURNEY H): each a Practitioner of the tenant with one
 * PractitionerRole per state she is licensed in (its `location`, a jurisdiction Location) and working
 * hours (`availableTime`, wall-clock), one Schedule per role (the role, then herself, the role's time zone, the
 * visit type it serves), and the tenant's visit team (a CareTeam) of them. Free Slots are not written
 * here: the `materialize-slots` bot makes them from these hours, after provisioning and then daily.
 */
interface VisitPractitioner {
  key: string;
  tenant: string;
  given: string;
  family: string;
  /** Around the clock (on call, every day), instead of weekday office hours. */
  onCall?: boolean;
  /** ISO 3166-2 US state she is licensed in, and her Schedule's time zone. */
  state: string;
  timeZone: string;
}

export const VISIT_PRACTITIONERS: VisitPractitioner[] = [
  { key: 'reyes', tenant: 'northwind', given: 'Ana', family: 'Reyes', state: 'CA', timeZone: 'America/Los_Angeles' },
  { key: 'adeyemi', tenant: 'northwind', given: 'Ben', family: 'Adeyemi', state: 'NY', timeZone: 'America/New_York' },
  { key: 'li', tenant: 'southridge', given: 'Chen', family: 'Li', state: 'NY', timeZone: 'America/New_York' },
  { key: 'wolfe', tenant: 'southridge', given: 'Dana', family: 'Wolfe', state: 'TX', timeZone: 'America/Chicago' },
  // On call around the clock for northwind's California patients: a live visit always starts within 30 minutes.
  {
    key: 'ortiz',
    tenant: 'northwind',
    given: 'Sam',
    family: 'Ortiz',
    state: 'CA',
    timeZone: 'America/Los_Angeles',
    onCall: true,
  },
];

const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri'] as const;

const VIDEO_VISIT = {
  coding: [{ system: SYSTEMS.visitType, code: 'video-visit', display: VISIT_TYPES['video-visit'].display }],
};

function practitionerResources(p: VisitPractitioner, signIn: DemoSignIn): KeyedResource[] {
  const org = keyRef<Organization>(`org-${p.tenant}`);
  const practitioner: Practitioner = {
    resourceType: 'Practitioner',
    meta: { accounts: [org] },
    name: [{ prefix: ['Dr.'], given: [p.given], family: p.family }],
  };
  const role: PractitionerRole = {
    resourceType: 'PractitionerRole',
    meta: { accounts: [org] },
    active: true,
    practitioner: keyRef(`visit-practitioner-${p.key}`),
    organization: org,
    location: [keyRef(jurisdictionKey('US', p.state))],
    availableTime: p.onCall
      ? [{ daysOfWeek: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], allDay: true }]
      : [{ daysOfWeek: [...WEEKDAYS], availableStartTime: '09:00:00', availableEndTime: '17:00:00' }],
  };
  const schedule: Schedule = {
    resourceType: 'Schedule',
    meta: { accounts: [org] },
    active: true,
    // The role first (what the platform books: bots read actor[0]); then the practitioner herself, as
    // Medplum's Provider app finds her calendar (`Schedule?actor=Practitioner/<her>`) and its visits.
    actor: [keyRef(`visit-role-${p.key}`), keyRef(`visit-practitioner-${p.key}`)],
    serviceType: [VIDEO_VISIT],
    extension: [{ url: TIMEZONE_EXTENSION, valueCode: p.timeZone }],
    comment: `Video visits with Dr. ${p.given} ${p.family} (licensed in ${p.state})`,
  };
  // She signs in to Medplum's Provider app (clinician policy, her tenant, no queue of her own): her visits
  // are hers to finish there (the clinician policy lets only a visit's own practitioner finish it).
  const member: MemberResource = {
    key: `visit-practitioner-${p.key}`,
    resource: practitioner,
    member: {
      externalId: `visit-practitioner-${p.key}`,
      email: signIn.email(p.key, p.tenant),
      password: signIn.password,
      membership: {
        access: [{ policy: keyRef('policy-clinician'), parameter: [{ name: TENANT_PARAMETER, valueReference: org }] }],
      },
      queues: [],
    },
  };
  return [
    member,
    { key: `visit-role-${p.key}`, resource: role },
    { key: `visit-schedule-${p.key}`, resource: schedule },
  ];
}

function visitTeam(tenant: string, name: string): KeyedResource {
  const org = keyRef<Organization>(`org-${tenant}`);
  const team: CareTeam = {
    resourceType: 'CareTeam',
    meta: { accounts: [org] },
    status: 'active',
    name: `${name} visit team`,
    category: [{ coding: [{ system: SYSTEMS.careTeam, code: 'visits' }] }],
    managingOrganization: [org],
    participant: VISIT_PRACTITIONERS.filter((p) => p.tenant === tenant).map((p) => ({
      member: keyRef<Practitioner>(`visit-practitioner-${p.key}`),
    })),
  };
  return { key: `visit-team-${tenant}`, resource: team };
}

/** How a demo person signs in: her email (from her key and tenant) and the demo password. */
export interface DemoSignIn {
  email: (person: string, tenant: string) => string;
  password: string;
}

export function demoSchedules(tenants: readonly { key: string; name: string }[], signIn: DemoSignIn): KeyedResource[] {
  return [
    ...VISIT_PRACTITIONERS.flatMap((p) => practitionerResources(p, signIn)),
    ...tenants.map((t) => visitTeam(t.key, t.name)),
  ];
}
