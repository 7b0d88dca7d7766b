import type { MedplumClient } from '@medplum/core';
import type { Location, Patient, PractitionerRole, Schedule, Slot } from '@medplum/fhirtypes';
import { absent } from './absent';
import { whereaboutsOf } from './catalog';
import { searchAll } from './search';

/**
 * Who may see and book whose time (JOURNEY H): a Schedule's actor is a PractitionerRole of the patient's
 * tenant whose licence (`location`, a jurisdiction Location) covers where she lives. Shared by
 * availability and booking, so what is listed to her is exactly what she may book.
 */

/** Whether a role is licensed where the patient lives (its country and state). */
async function licensedWhereSheLives(
  medplum: MedplumClient,
  role: PractitionerRole,
  patient: Patient,
  jurisdictions: Map<string, Location | undefined> = new Map(),
): Promise<boolean> {
  const where = whereaboutsOf(patient);
  // Every jurisdiction of the role read at once (fewer round trips).
  const unread = [...new Set((role.location ?? []).map((l) => l.reference ?? ''))].filter((r) => !jurisdictions.has(r));
  await Promise.all(
    unread.map(async (reference) => {
      jurisdictions.set(reference, (await medplum.readReference({ reference }).catch(absent)) as Location | undefined);
    }),
  );
  for (const location of role.location ?? []) {
    const address = jurisdictions.get(location.reference ?? '')?.address;
    if (
      where.state &&
      address?.country?.toUpperCase() === where.country &&
      address?.state?.toUpperCase() === where.state
    ) {
      return true;
    }
  }
  return false;
}

/**
 * A visit team's (or practitioner's) bookable setting in one tenant, the same for every patient of it:
 * the active roles of those practitioners in the tenant, the jurisdictions they are licensed in, and the
 * roles' active Schedules. Which of them one patient may book depends only on where she lives
 * (`licensedFor`), so a copy of it may serve her tenant's next calls a few seconds (the gateway's cache).
 */
export interface VisitDirectory {
  roles: PractitionerRole[];
  jurisdictions: Map<string, Location | undefined>;
  schedules: Schedule[];
}

export async function visitDirectory(
  medplum: MedplumClient,
  practitioners: string[],
  organization: string | undefined,
): Promise<VisitDirectory> {
  const directory: VisitDirectory = { roles: [], jurisdictions: new Map(), schedules: [] };
  if (practitioners.length === 0 || !organization) {
    return directory;
  }
  directory.roles = (
    await searchAll(medplum, 'PractitionerRole', {
      practitioner: practitioners.join(','),
      organization,
      active: 'true',
    })
  ).filter((r) => r.organization?.reference === organization);
  if (directory.roles.length === 0) {
    return directory;
  }
  // The roles' schedules are asked beside their licences (fewer round trips).
  const [schedules] = await Promise.all([
    searchAll(medplum, 'Schedule', {
      actor: directory.roles.map((r) => `PractitionerRole/${r.id}`).join(','),
      active: 'true',
    }),
    ...[...new Set(directory.roles.flatMap((r) => (r.location ?? []).map((l) => l.reference ?? '')))].map(
      async (reference) => {
        directory.jurisdictions.set(
          reference,
          (await medplum.readReference({ reference }).catch(absent)) as Location | undefined,
        );
      },
    ),
  ]);
  directory.schedules = schedules as Schedule[];
  return directory;
}

/**
 * The directory's Schedules whose role's licence (`location`, a jurisdiction) covers where she lives,
 * each with its practitioner: `Schedule/<id>` -> `Practitioner/<id>`.
 */
export async function licensedFor(
  medplum: MedplumClient,
  directory: VisitDirectory,
  patient: Patient,
): Promise<Map<string, string>> {
  const licensed: PractitionerRole[] = [];
  for (const role of directory.roles) {
    if (await licensedWhereSheLives(medplum, role, patient, directory.jurisdictions)) {
      licensed.push(role);
    }
  }
  const practitionerOf = new Map(licensed.map((r) => [`PractitionerRole/${r.id}`, r.practitioner?.reference ?? '']));
  const schedules = new Map<string, string>();
  for (const schedule of directory.schedules) {
    const practitioner = practitionerOf.get(schedule.actor?.[0]?.reference ?? '');
    if (practitioner) {
      schedules.set(`Schedule/${schedule.id}`, practitioner);
    }
  }
  return schedules;
}

/**
 * Whose time a slot is, as far as she may book it: the practitioner of its Schedule's role (the Schedule
 * active, the role active and of her tenant), and whether that role is licensed where she lives NOW (her
 * record's address, read by the caller). Undefined when the slot is not her tenant's to book at all.
 */
export async function slotLicensure(
  medplum: MedplumClient,
  slot: Slot,
  patient: Patient,
): Promise<{ practitioner: string; licensed: boolean } | undefined> {
  const [type, id] = (slot.schedule?.reference ?? '').split('/');
  const schedule =
    type === 'Schedule' && id
      ? ((await medplum.readResource('Schedule', id).catch(absent)) as Schedule | undefined)
      : undefined;
  const [roleType, roleId] = (schedule?.actor?.[0]?.reference ?? '').split('/');
  const role =
    schedule?.active && roleType === 'PractitionerRole' && roleId
      ? ((await medplum.readResource('PractitionerRole', roleId).catch(absent)) as PractitionerRole | undefined)
      : undefined;
  const organization = patient.managingOrganization?.reference;
  const practitioner = role?.practitioner?.reference;
  if (
    !role ||
    role.active === false ||
    !organization ||
    role.organization?.reference !== organization ||
    !practitioner
  ) {
    return undefined;
  }
  return { practitioner, licensed: await licensedWhereSheLives(medplum, role, patient) };
}

/**
 * Whether a practitioner of her tenant holds a licence (an active role whose jurisdiction covers where she
 * lives now) for her; undefined when the practitioner has no active role in her tenant. Two round trips:
 * the roles, then their jurisdictions at once.
 */
export async function practitionerLicensed(
  medplum: MedplumClient,
  practitioner: string,
  patient: Patient,
): Promise<boolean | undefined> {
  const organization = patient.managingOrganization?.reference;
  if (!organization) {
    return undefined;
  }
  const roles = (await searchAll(medplum, 'PractitionerRole', { practitioner, organization, active: 'true' })).filter(
    (r) => r.organization?.reference === organization,
  );
  if (roles.length === 0) {
    return undefined;
  }
  const jurisdictions = new Map<string, Location | undefined>();
  const verdicts = await Promise.all(roles.map((role) => licensedWhereSheLives(medplum, role, patient, jurisdictions)));
  return verdicts.some(Boolean);
}

/** Her jurisdiction as ISO 3166-2 (`US-CA`), from her record's address; undefined when it names no state. */
export function jurisdictionOf(patient: Patient): string | undefined {
  const where = whereaboutsOf(patient);
  return where.country && where.state ? `${where.country}-${where.state}` : undefined;
}
