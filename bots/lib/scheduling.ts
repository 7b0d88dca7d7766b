import type { MedplumClient } from '@medplum/core';
import type { Location, Patient, PractitionerRole, Schedule, Slot } from '@medplum/fhirtypes';
import { absent } from './absent';
import { whereaboutsOf } from './catalog';
import { ahead } from './reads';
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
 * The active Schedules of those practitioners' roles in her tenant whose licence (`location`, a
 * jurisdiction) covers where she lives, each with its practitioner: `Schedule/<id>` -> `Practitioner/<id>`.
 */
export async function licensedSchedules(
  medplum: MedplumClient,
  practitioners: string[],
  organization: string | undefined,
  patient: Patient,
): Promise<Map<string, string>> {
  const schedules = new Map<string, string>();
  if (practitioners.length === 0 || !organization) {
    return schedules;
  }
  const roles = (
    await searchAll(medplum, 'PractitionerRole', {
      practitioner: practitioners.join(','),
      organization,
      active: 'true',
    })
  ).filter((r) => r.organization?.reference === organization);
  if (roles.length === 0) {
    return schedules;
  }
  // The roles' schedules are asked beside their licences (fewer round trips); only the licensed count.
  const scheduling = ahead(
    searchAll(medplum, 'Schedule', { actor: roles.map((r) => `PractitionerRole/${r.id}`).join(','), active: 'true' }),
  );
  const jurisdictions = new Map<string, Location | undefined>();
  const locations = [...new Set(roles.flatMap((r) => (r.location ?? []).map((l) => l.reference ?? '')))];
  await Promise.all(
    locations.map(async (reference) => {
      jurisdictions.set(reference, (await medplum.readReference({ reference }).catch(absent)) as Location | undefined);
    }),
  );
  const licensed: PractitionerRole[] = [];
  for (const role of roles) {
    if (await licensedWhereSheLives(medplum, role, patient, jurisdictions)) {
      licensed.push(role);
    }
  }
  if (licensed.length === 0) {
    return schedules;
  }
  const found = (await scheduling) as Schedule[];
  const practitionerOf = new Map(licensed.map((r) => [`PractitionerRole/${r.id}`, r.practitioner?.reference ?? '']));
  for (const schedule of found) {
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
