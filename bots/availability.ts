import type { BotEvent, MedplumClient } from '@medplum/core';
import type { CareTeam, Patient, Slot } from '@medplum/fhirtypes';
import type { BotInput } from '../contracts/bot-inputs';
import { SYSTEMS, VISIT_TYPES } from '../contracts/systems';
import { absent } from './lib/absent';
import { missingWhereabouts, whereaboutsOf } from './lib/catalog';
import { ahead, readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { licensedFor, type VisitDirectory, visitDirectory } from './lib/scheduling';
import { addDays, isTimeZone, localDate, zonedInstant } from './lib/slots';
import { patientWorkflow } from './lib/trust';

interface AvailableSlot {
  slot: string;
  start: string;
  end: string;
  practitioner: string;
  visitType: 'video-visit';
  modality: 'sync' | 'async';
}

export type AvailabilityResult = BotResult<{
  view: 'slots' | 'days';
  slots?: AvailableSlot[];
  next?: string;
  timezone?: string;
  days?: { date: string; count: number }[];
}>;

const MAX_WINDOW_MS = 31 * 86_400_000;
const DEFAULT_COUNT = 50;
const MAX_COUNT = 200;

/**
 * GET /v1/availability (JOURNEY H), read-only: the free Slots of her care provider's practitioners who
 * are licensed in her state, for a visit team or one practitioner, in a window; as a page of slots or as
 * counts per local date. Her tenant and state come from her own Patient, never from the query. Slots are
 * outside the patient compartment (a patient's policy grants none); this bot reads them for her, only
 * through Schedules whose actor is a role of her tenant licensed where she lives.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<AvailabilityResult> {
  // Its Slot pages are asked fresh (no-cache), so never copied; the rest is read once a run.
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'availability');
  if (!start.ok) {
    return start;
  }
  return availabilityFor(medplum, start.caller.patientId, start.input);
}

/**
 * The answer for one patient, from reads of what she may read herself (her Patient, her tenant's visit
 * teams, practitioner roles, visit Schedules and Slots, the jurisdictions): the gateway computes it with
 * HER token (so a flood of hers spends her own FHIR quota, never a bot's that every patient shares), and
 * this bot, for a direct `$execute`, with its own.
 */
export async function availabilityFor(
  medplum: MedplumClient,
  patientId: string,
  query: BotInput<'availability'>,
  /**
   * Where the gateway keeps a tenant's visit directory a few seconds (src/medplum/catalog-cache.ts): the
   * team's roles, licences and Schedules are the same for every patient of the tenant, and only her own
   * Patient and the Slots are read for each call then. A bot run keeps nothing between runs: none.
   */
  directories?: { get<T>(key: string, load: () => Promise<T>): Promise<T> },
): Promise<AvailabilityResult> {
  const issues = queryIssues(query);
  if (query.careTeam && issues.length === 0 && !directories) {
    // The team named goes out with her Patient (fewer round trips); believed once hers is known.
    ahead(medplum.readResource('CareTeam', query.careTeam.split('/')[1]));
  }
  // Her Patient first, whatever the query: with her own token (the gateway's case) this read is what
  // confirms her session to Medplum (a revoked login is 401 before anything is judged).
  const patient = (await medplum.readResource('Patient', patientId)) as Patient;
  if (issues.length > 0) {
    return fail(400, 'invalid_request', 'This availability query cannot be answered', { issues });
  }
  // Whose time she may book depends on where she lives (a licence is per state): without it, say so.
  const missing = missingWhereabouts(whereaboutsOf(patient));
  if (missing.length > 0) {
    return fail(409, 'invalid_state', 'Availability depends on where she lives: her address has no country or state', {
      missing,
      fix: `PUT /v1/fhir/Patient/${patientId}`,
    });
  }
  const organization = patient.managingOrganization?.reference;
  // Keyed by everything that decides it: her tenant and the team or practitioner asked for.
  const load = () => directoryOf(medplum, query, organization);
  const directory = await (directories
    ? directories.get(`visit-directory|${organization}|${query.careTeam ?? ''}|${query.practitioner ?? ''}`, load)
    : load());
  if (!directory) {
    // The same answer for one that does not exist and one of another provider; what to ask instead.
    return fail(404, 'not_found', 'No visit team or visit practitioner of her care provider by that reference', {
      use: 'GET /v1/tasks: a schedule-visit task names the visit team to book with (careTeam)',
    });
  }
  const schedules = await licensedFor(medplum, directory, patient);
  const visitType = query.visitType ?? 'video-visit';
  const from = new Date(instantOf(query.start)).toISOString();
  const to = new Date(instantOf(query.end)).toISOString();
  const search = (extra: Record<string, string>) => ({
    schedule: [...schedules.keys()].join(','),
    status: 'free',
    start: [`ge${from}`, `lt${to}`],
    'service-type': `${SYSTEMS.visitType}|${visitType}`,
    _sort: 'start,_id',
    ...extra,
  });
  if (query.view === 'days') {
    // Per local date, a count of its free slots (Medplum counts from its index; no Slot is read), all
    // dates at once: a day is [its first instant, the next day's), cut to the window.
    const timeZone = query.timezone as string;
    const [windowStart, windowEnd] = [Date.parse(from), Date.parse(to)];
    const dates: string[] = [];
    const last = localDate(windowEnd - 1, timeZone);
    for (let date = localDate(windowStart, timeZone); date <= last; date = addDays(date, 1)) {
      dates.push(date);
    }
    const days = await Promise.all(
      dates.map(async (date) => {
        const begins = Math.max(dayStart(date, timeZone), windowStart);
        const ends = Math.min(dayStart(addDays(date, 1), timeZone), windowEnd);
        if (schedules.size === 0 || ends <= begins) {
          return { date, count: 0 };
        }
        // Sorted by start although only counted: the embedded Medplum then walks its start-ordered index.
        const params = search({ _summary: 'count' });
        const counted = await medplum.search(
          'Slot',
          toParams({ ...params, start: [`ge${new Date(begins).toISOString()}`, `lt${new Date(ends).toISOString()}`] }),
          { cache: 'no-cache' },
        );
        return { date, count: counted.total ?? 0 };
      }),
    );
    return { ok: true, view: 'days', timezone: timeZone, days };
  }
  const count = Math.min(Number(query.count ?? DEFAULT_COUNT), MAX_COUNT);
  const offset = query.cursor ? offsetOf(query.cursor) : 0;
  if (offset === undefined) {
    return fail(400, 'invalid_request', 'This cursor is not one this endpoint gave', {
      issues: [{ path: 'cursor', message: 'unknown cursor' }],
    });
  }
  if (schedules.size === 0) {
    return { ok: true, view: 'slots', slots: [] };
  }
  // One more than a page tells whether there is a next one.
  const page = (await medplum.searchResources(
    'Slot',
    toParams(search({ _count: String(count + 1), _offset: String(offset) })),
    { cache: 'no-cache' },
  )) as Slot[];
  const slots = page.slice(0, count).map((slot) => ({
    slot: `Slot/${slot.id}`,
    start: slot.start,
    end: slot.end,
    practitioner: schedules.get(slot.schedule.reference ?? '') as string,
    visitType,
    modality: VISIT_TYPES[visitType].modality,
  }));
  return {
    ok: true,
    view: 'slots',
    slots,
    ...(page.length > count ? { next: cursorOf(offset + count) } : {}),
  };
}

type Query = BotInput<'availability'>;

function queryIssues(query: Query): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  if (!query.careTeam === !query.practitioner) {
    issues.push({ path: 'careTeam', message: 'exactly one of careTeam and practitioner' });
  }
  const [from, to] = [instantOf(query.start), instantOf(query.end)];
  if (Number.isNaN(from)) {
    issues.push({ path: 'start', message: 'not a date or instant' });
  }
  if (Number.isNaN(to)) {
    issues.push({ path: 'end', message: 'not a date or instant' });
  }
  if (!Number.isNaN(from) && !Number.isNaN(to) && (to <= from || to - from > MAX_WINDOW_MS)) {
    issues.push({ path: 'end', message: 'after start, and at most 31 days later' });
  }
  if (query.view === 'days' && !(query.timezone && isTimeZone(query.timezone))) {
    issues.push({ path: 'timezone', message: 'a known IANA time zone is required for the days view' });
  } else if (query.timezone && !isTimeZone(query.timezone)) {
    issues.push({ path: 'timezone', message: 'not a known IANA time zone' });
  }
  return issues;
}

/**
 * A date (its UTC midnight) or an instant with its offset, as epoch milliseconds; NaN if neither, or if its
 * date is not on the calendar (Date.parse takes February 30 as March 2).
 */
const instantOf = (value: string): number => {
  const day = value.slice(0, 10);
  if (Number.isNaN(Date.parse(`${day}T00:00:00Z`)) || new Date(`${day}T00:00:00Z`).toISOString().slice(0, 10) !== day) {
    return Number.NaN;
  }
  return Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value);
};

/** The visit directory of what the query names in her tenant; undefined when the team or practitioner is not hers. */
async function directoryOf(
  medplum: MedplumClient,
  query: Pick<Query, 'careTeam' | 'practitioner'>,
  organization: string | undefined,
): Promise<VisitDirectory | undefined> {
  const practitioners = await practitionersOf(medplum, query, organization);
  return practitioners ? visitDirectory(medplum, practitioners, organization) : undefined;
}

/** The practitioners the query names, of her tenant; undefined when the team or practitioner is not hers. */
async function practitionersOf(
  medplum: MedplumClient,
  query: Pick<Query, 'careTeam' | 'practitioner'>,
  organization: string | undefined,
): Promise<string[] | undefined> {
  if (!organization) {
    return undefined;
  }
  if (query.careTeam) {
    const team = (await medplum.readResource('CareTeam', query.careTeam.split('/')[1]).catch(absent)) as
      | CareTeam
      | undefined;
    const visits = team?.category?.some((c) =>
      c.coding?.some((x) => x.system === SYSTEMS.careTeam && x.code === 'visits'),
    );
    if (!team || !visits || !team.managingOrganization?.some((o) => o.reference === organization)) {
      return undefined;
    }
    return (team.participant ?? []).map((p) => p.member?.reference ?? '').filter((r) => r.startsWith('Practitioner/'));
  }
  const roles = await medplum.searchResources(
    'PractitionerRole',
    { practitioner: query.practitioner as string, organization },
    { cache: 'no-cache' },
  );
  return roles.some((r) => r.organization?.reference === organization) ? [query.practitioner as string] : undefined;
}

/**
 * The first instant of a local date: its midnight, or where a zone skips midnight (a daylight-saving
 * change at 00:00), the first wall-clock time that exists that day.
 */
function dayStart(date: string, timeZone: string): number {
  for (const time of ['00:00', '00:30', '01:00', '01:30', '02:00']) {
    const instant = zonedInstant(date, time, timeZone);
    if (instant !== undefined) {
      return instant;
    }
  }
  return Date.parse(`${date}T00:00:00Z`);
}

/** Search parameters with repeats (a window is two `start` bounds) as MedplumClient takes them. */
function toParams(params: Record<string, string | string[]>): URLSearchParams {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      search.append(name, v);
    }
  }
  return search;
}

const cursorOf = (offset: number): string => `o${offset.toString(36)}`;

function offsetOf(cursor: string): number | undefined {
  const match = /^o([0-9a-z]{1,8})$/.exec(cursor);
  return match ? Number.parseInt(match[1], 36) : undefined;
}
