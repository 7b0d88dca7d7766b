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
 * here: the `materialize-slots` bot makes them from these hours, after provisioning and then hourly.
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

/** A visit practitioner as provisioning writes her (the demo's and a clinic file's). */
export interface VisitPractitionerSpec {
  /** Provisioning keys of her Practitioner (and membership), PractitionerRole and Schedule. */
  keys: { practitioner: string; role: string; schedule: string };
  tenant: string;
  /** Who she is among the clinic's people (a clinic file's: what finds her when she leaves it). */
  identifier?: { system: string; value: string };
  name: { prefix?: string; given: string; family: string };
  /** How she signs in: Medplum's invitation (e-mail), with a first password when given. */
  email: string;
  password?: string;
  /** ISO 3166-2 US states (without `US-`) she is licensed in. */
  licensedIn: readonly string[];
  timeZone: string;
  /** Working hours, wall-clock in her time zone. */
  hours: NonNullable<PractitionerRole['availableTime']>;
  /** Whole local days she does not work (`from`..`to`, inclusive), with why. */
  away?: readonly { from: string; to?: string; reason: string }[];
}

/**
 * Her Practitioner (who signs in to Medplum's Provider app: clinician policy, her tenant, no queue of her
 * own: her visits are hers to finish there), one PractitionerRole (the jurisdictions she is licensed in,
 * her hours, the days she is away as `notAvailable`, local dates: the slot maker reads them in her
 * Schedule's time zone) and one Schedule (the role, then herself, her time zone, the visit type).
 */
export function visitPractitionerResources(p: VisitPractitionerSpec): KeyedResource[] {
  const org = keyRef<Organization>(`org-${p.tenant}`);
  const practitioner: Practitioner = {
    resourceType: 'Practitioner',
    meta: { accounts: [org] },
    ...(p.identifier ? { identifier: [p.identifier] } : {}),
    name: [{ ...(p.name.prefix ? { prefix: [p.name.prefix] } : {}), given: [p.name.given], family: p.name.family }],
  };
  const role: PractitionerRole = {
    resourceType: 'PractitionerRole',
    meta: { accounts: [org] },
    active: true,
    practitioner: keyRef(p.keys.practitioner),
    organization: org,
    location: p.licensedIn.map((state) => keyRef(jurisdictionKey('US', state))),
    availableTime: p.hours,
    ...(p.away?.length
      ? {
          notAvailable: p.away.map((a) => ({
            description: a.reason,
            during: { start: a.from, end: a.to ?? a.from },
          })),
        }
      : {}),
  };
  const who = [p.name.prefix, p.name.given, p.name.family].filter(Boolean).join(' ');
  const schedule: Schedule = {
    resourceType: 'Schedule',
    meta: { accounts: [org] },
    active: true,
    // The role first (what the platform books: bots read actor[0]); then the practitioner herself, as
    // Medplum's Provider app finds her calendar (`Schedule?actor=Practitioner/<her>`) and its visits.
    actor: [keyRef(p.keys.role), keyRef(p.keys.practitioner)],
    serviceType: [VIDEO_VISIT],
    extension: [{ url: TIMEZONE_EXTENSION, valueCode: p.timeZone }],
    comment: `Video visits with ${who} (licensed in ${p.licensedIn.join(', ')})`,
  };
  const member: MemberResource = {
    key: p.keys.practitioner,
    resource: practitioner,
    member: {
      externalId: p.keys.practitioner,
      email: p.email,
      password: p.password,
      membership: {
        access: [{ policy: keyRef('policy-clinician'), parameter: [{ name: TENANT_PARAMETER, valueReference: org }] }],
      },
      queues: [],
    },
  };
  return [member, { key: p.keys.role, resource: role }, { key: p.keys.schedule, resource: schedule }];
}

/** A tenant's visit team (a CareTeam of its visit practitioners, by provisioning key). */
export function visitTeamResource(tenant: string, name: string, members: readonly string[]): KeyedResource {
  const org = keyRef<Organization>(`org-${tenant}`);
  const team: CareTeam = {
    resourceType: 'CareTeam',
    meta: { accounts: [org] },
    status: 'active',
    name,
    category: [{ coding: [{ system: SYSTEMS.careTeam, code: 'visits' }] }],
    managingOrganization: [org],
    ...(members.length > 0 ? { participant: members.map((m) => ({ member: keyRef<Practitioner>(m) })) } : {}),
  };
  return { key: `visit-team-${tenant}`, resource: team, ...(members.length === 0 ? { absent: ['participant'] } : {}) };
}

function practitionerResources(p: VisitPractitioner, signIn: DemoSignIn): KeyedResource[] {
  return visitPractitionerResources({
    keys: {
      practitioner: `visit-practitioner-${p.key}`,
      role: `visit-role-${p.key}`,
      schedule: `visit-schedule-${p.key}`,
    },
    tenant: p.tenant,
    name: { prefix: 'Dr.', given: p.given, family: p.family },
    email: signIn.email(p.key, p.tenant),
    password: signIn.password,
    licensedIn: [p.state],
    timeZone: p.timeZone,
    hours: p.onCall
      ? [{ daysOfWeek: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], allDay: true }]
      : [{ daysOfWeek: [...WEEKDAYS], availableStartTime: '09:00:00', availableEndTime: '17:00:00' }],
  });
}

function visitTeam(tenant: string, name: string): KeyedResource {
  return visitTeamResource(
    tenant,
    `${name} visit team`,
    VISIT_PRACTITIONERS.filter((p) => p.tenant === tenant).map((p) => `visit-practitioner-${p.key}`),
  );
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
