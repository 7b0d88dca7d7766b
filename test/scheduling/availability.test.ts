import type { WithId } from '@medplum/core';
import type { CareTeam, Location, Practitioner, PractitionerRole, Schedule, Slot } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDate, workingSlots } from '../../bots/lib/slots';
import { SYSTEMS, TIMEZONE_EXTENSION } from '../../contracts/systems';
import { direct, executeBot, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * `GET /v1/availability` (issue 16 item 2, JOURNEY H): free slots of licensed practitioners for a visit
 * team or one practitioner, paged, or counted per local date; on the demo schedules the provisioning run
 * materialised, and on a schedule of this test's own across a daylight-saving change.
 */
let gw: TestGateway;
let team: WithId<CareTeam>;
const practitioners: Record<string, string> = {};
beforeAll(async () => {
  gw = await startTestGateway({}, { allSlots: true });
  team = (await gw.backend.admin.searchOne('CareTeam', {
    _tag: `${SYSTEMS.provisioning}|visit-team-northwind`,
  })) as WithId<CareTeam>;
  for (const key of ['reyes', 'adeyemi', 'li', 'ortiz']) {
    const p = await gw.backend.admin.searchOne('Practitioner', {
      _tag: `${SYSTEMS.provisioning}|visit-practitioner-${key}`,
    });
    practitioners[key] = `Practitioner/${p?.id}`;
  }
});
afterAll(() => gw?.close());

interface Availability {
  view: string;
  slots?: { slot: string; start: string; end: string; practitioner: string; modality: string }[];
  next?: string;
  days?: { date: string; count: number }[];
}

const availability = (patient: DemoActor, query: Record<string, string>) =>
  gw.call('GET', `/v1/availability?${new URLSearchParams(query)}`, { token: patient.token });

const window = () => {
  const start = new Date(Date.now() + 86_400_000);
  return { start: start.toISOString(), end: new Date(start.getTime() + 14 * 86_400_000).toISOString() };
};

/** Every page of the slots view. */
async function allSlots(
  patient: DemoActor,
  query: Record<string, string>,
): Promise<NonNullable<Availability['slots']>> {
  const slots: NonNullable<Availability['slots']> = [];
  let cursor: string | undefined;
  do {
    const page = await availability(patient, { ...query, count: '37', ...(cursor ? { cursor } : {}) });
    expect(page.status, page.text).toBe(200);
    const body = page.body as Availability;
    slots.push(...(body.slots ?? []));
    cursor = body.next;
  } while (cursor);
  return slots;
}

describe('availability of a visit team', () => {
  it('lists only the practitioners licensed in her state, free slots in start order, every page once', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const ny = await freshPatient(gw.backend, { tenant: 'northwind', state: 'NY' });
    const query = { careTeam: `CareTeam/${team.id}`, ...window() };
    const forCa = await allSlots(ca, query);
    expect(forCa.length).toBeGreaterThan(100);
    expect(new Set(forCa.map((s) => s.practitioner))).toEqual(new Set([practitioners.reyes, practitioners.ortiz]));
    expect(new Set(forCa.map((s) => s.slot)).size).toBe(forCa.length);
    expect(forCa.map((s) => s.start)).toEqual([...forCa.map((s) => s.start)].sort());
    for (const s of forCa) {
      expect(s.start >= query.start && s.start < query.end).toBe(true);
      expect(s.modality).toBe('sync');
    }
    const [first] = forCa;
    const stored = await gw.backend.systemRepo.readReference<Slot>({ reference: first.slot });
    expect(stored).toMatchObject({ status: 'free', start: first.start, end: first.end });
    const forNy = await allSlots(ny, query);
    expect(new Set(forNy.map((s) => s.practitioner))).toEqual(new Set([practitioners.adeyemi]));
  });

  it('the days view counts exactly the slots of the same window, per local date of the zone', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const query = { careTeam: `CareTeam/${team.id}`, ...window() };
    const slots = await allSlots(ca, query);
    for (const timezone of ['America/Los_Angeles', 'Asia/Tokyo']) {
      const days = await availability(ca, { ...query, view: 'days', timezone });
      expect(days.status, days.text).toBe(200);
      const expected = new Map<string, number>();
      for (const s of slots) {
        const date = localDate(Date.parse(s.start), timezone);
        expected.set(date, (expected.get(date) ?? 0) + 1);
      }
      const counted = (days.body as Availability).days ?? [];
      expect(counted.filter((d) => d.count > 0).map((d) => [d.date, d.count])).toEqual([...expected.entries()]);
      expect(counted.reduce((n, d) => n + d.count, 0)).toBe(slots.length);
    }
  });
});

describe('window edges (issue 25)', () => {
  it('a slot starting exactly at the window’s end is not in it, and is listed once over two consecutive windows', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const query = { careTeam: `CareTeam/${team.id}`, ...window() };
    // The first slot, and the first that starts later (two practitioners may share a start: the team's
    // first two slots at the same instant made this test depend on the time of day).
    const slots = await allSlots(ca, query);
    const first = slots[0];
    const second = slots.find((s) => s.start > first.start) as (typeof slots)[number];
    expect(second).toBeDefined();
    // [first, second) holds the first only; [second, +1 day) starts with the second.
    const before = await allSlots(ca, { ...query, start: first.start, end: second.start });
    expect(before.map((s) => s.start).every((start) => start < second.start)).toBe(true);
    expect(before.map((s) => s.slot)).toContain(first.slot);
    expect(before.map((s) => s.slot)).not.toContain(second.slot);
    const after = await allSlots(ca, {
      ...query,
      start: second.start,
      end: new Date(Date.parse(second.start) + 86_400_000).toISOString(),
    });
    const both = [...before, ...after].filter((s) => s.slot === second.slot);
    expect(both).toHaveLength(1);
    // The days view counts it on the same side.
    const days = await availability(ca, {
      ...query,
      start: first.start,
      end: second.start,
      view: 'days',
      timezone: 'UTC',
    });
    expect(((days.body as Availability).days ?? []).reduce((n, d) => n + d.count, 0)).toBe(before.length);
  });
});

describe('one practitioner', () => {
  it('hers: her slots; one of her provider not licensed in her state: none; another provider’s, or another provider’s team: 404', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const { start, end } = window();
    const reyes = (await availability(ca, { practitioner: practitioners.reyes, start, end })).body as Availability;
    expect(reyes.slots?.length).toBe(50);
    expect(reyes.next).toBeDefined();
    const adeyemi = await availability(ca, { practitioner: practitioners.adeyemi, start, end });
    expect(adeyemi).toMatchObject({ status: 200, body: { view: 'slots', slots: [] } });
    const foreign = await availability(ca, { practitioner: practitioners.li, start, end });
    expect(foreign.status).toBe(404);
    // What to ask instead, the same for a practitioner who does not exist.
    const absent = await availability(ca, {
      practitioner: 'Practitioner/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
      start,
      end,
    });
    for (const res of [foreign, absent]) {
      expect(res.status).toBe(404);
      expect((res.body as { error: { details: unknown } }).error.details).toMatchObject({
        use: expect.stringContaining('GET /v1/tasks'),
      });
    }
    const southTeam = await gw.backend.admin.searchOne('CareTeam', {
      _tag: `${SYSTEMS.provisioning}|visit-team-southridge`,
    });
    expect((await availability(ca, { careTeam: `CareTeam/${southTeam?.id}`, start, end })).status).toBe(404);
    // She reads her tenant's free/busy herself (availability is computed with her token), never another
    // tenant's: every Slot she can find is on one of her tenant's Schedules.
    const read = await direct(gw.backend, ca.token, 'GET', fhirPath('Slot?_count=100'));
    const found = ((read.body as { entry?: { resource: Slot }[] }).entry ?? []).map((e) => e.resource);
    expect(found.length).toBeGreaterThan(0);
    const theirs = await gw.backend.systemRepo.searchResources<Schedule>({
      resourceType: 'Schedule',
      filters: [{ code: '_compartment', operator: 'eq', value: ca.patient.managingOrganization?.reference as string }],
    });
    for (const slot of found) {
      expect(theirs.map((s) => `Schedule/${s.id}`)).toContain(slot.schedule.reference);
    }
    const southridge = await freshPatient(gw.backend, { tenant: 'southridge', state: 'TX' });
    const other = await direct(gw.backend, southridge.token, 'GET', fhirPath(`Slot/${found[0]?.id}`));
    expect(other.status).toBe(404);
    // Nor a Schedule that does not serve a visit type (one whose actor could be a patient).
    const plain = await gw.backend.systemRepo.createResource<Schedule>({
      resourceType: 'Schedule',
      meta: { project: gw.backend.project.id, accounts: [ca.patient.managingOrganization as { reference: string }] },
      active: true,
      actor: [{ reference: `Patient/${ca.patient.id}` }],
    });
    expect((await direct(gw.backend, southridge.token, 'GET', fhirPath(`Schedule/${plain.id}`))).status).toBe(404);
    expect((await direct(gw.backend, ca.token, 'GET', fhirPath(`Schedule/${plain.id}`))).status).toBe(404);
  });
});

describe('across a daylight-saving change', () => {
  it('per-day counts and the slot list agree for the same window and zone (America/Los_Angeles, 2027-03-14)', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const repo = gw.backend.systemRepo;
    const org = ca.patient.managingOrganization as { reference: string };
    const meta = { project: gw.backend.project.id, accounts: [org] };
    const california = (await gw.backend.admin.searchOne('Location', {
      identifier: `${SYSTEMS.jurisdiction}|US-CA`,
    })) as WithId<Location>;
    const practitioner = await repo.createResource<Practitioner>({
      resourceType: 'Practitioner',
      meta,
      name: [{ family: 'Spring' }],
    });
    const role = await repo.createResource<PractitionerRole>({
      resourceType: 'PractitionerRole',
      meta,
      active: true,
      practitioner: { reference: `Practitioner/${practitioner.id}` },
      organization: org,
      location: [{ reference: `Location/${california.id}` }],
    });
    const schedule = await repo.createResource<Schedule>({
      resourceType: 'Schedule',
      meta,
      active: true,
      actor: [{ reference: `PractitionerRole/${role.id}` }],
      serviceType: [{ coding: [{ system: SYSTEMS.visitType, code: 'video-visit' }] }],
      extension: [{ url: TIMEZONE_EXTENSION, valueCode: 'America/Los_Angeles' }],
    });
    const hours = [
      {
        daysOfWeek: ['fri', 'sat', 'sun', 'mon'] as ('fri' | 'sat' | 'sun' | 'mon')[],
        availableStartTime: '00:00:00',
        availableEndTime: '04:00:00',
      },
    ];
    // Midnight to 4:00 local on both sides of spring-forward (2:00 -> 3:00 on Sunday the 14th).
    for (const { start, end } of workingSlots(hours, 'America/Los_Angeles', '2027-03-12', 4, 30)) {
      await repo.createResource<Slot>({
        resourceType: 'Slot',
        // Filed in the tenant, as materialize-slots files them (patients read them with their own token).
        meta,
        schedule: { reference: `Schedule/${schedule.id}` },
        serviceType: schedule.serviceType,
        status: 'free',
        start,
        end,
      });
    }
    const query = {
      practitioner: `Practitioner/${practitioner.id}`,
      start: '2027-03-12T00:00:00-08:00',
      end: '2027-03-16T00:00:00-07:00',
    };
    const slots = await allSlots(ca, query);
    const days = await availability(ca, { ...query, view: 'days', timezone: 'America/Los_Angeles' });
    // Sunday has two half-hours fewer: 2:00 and 2:30 do not exist that night.
    expect((days.body as Availability).days).toEqual([
      { date: '2027-03-12', count: 8 },
      { date: '2027-03-13', count: 8 },
      { date: '2027-03-14', count: 6 },
      { date: '2027-03-15', count: 8 },
    ]);
    expect(slots).toHaveLength(30);
    const byDay = new Map<string, number>();
    for (const s of slots) {
      const date = localDate(Date.parse(s.start), 'America/Los_Angeles');
      byDay.set(date, (byDay.get(date) ?? 0) + 1);
    }
    expect([...byDay.entries()]).toEqual([
      ['2027-03-12', 8],
      ['2027-03-13', 8],
      ['2027-03-14', 6],
      ['2027-03-15', 8],
    ]);
  });
});

describe('the edges of the years it takes', () => {
  it('a window at the last year it takes is answered, in four-digit dates', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const answered = await availability(ca, {
      careTeam: `CareTeam/${team.id}`,
      start: '2199-12-01',
      end: '2199-12-31',
      view: 'days',
      timezone: 'UTC',
    });
    expect(answered.status, answered.text).toBe(200);
    const days = (answered.body as { days: { date: string }[] }).days;
    expect(days).toHaveLength(30);
    expect(days[0].date).toBe('2199-12-01');
  });

  it('the bot refuses the same years when called directly on Medplum ($execute): 400 naming the field', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const refused = await executeBot(gw.backend, ca.token, 'availability', {
      value: { careTeam: `CareTeam/${team.id}`, start: '0100-01-01', end: '0100-01-31', view: 'days', timezone: 'UTC' },
    });
    // A bot answers its refusals as data (DESIGN section 2); the gateway maps them to HTTP.
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({ ok: false, error: { status: 400, code: 'invalid_request' } });
    expect(refused.text).toContain('start');
  });
});

describe('bad queries', () => {
  it('are 400 with the field, whatever else they say', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const { start, end } = window();
    const careTeam = `CareTeam/${team.id}`;
    for (const [query, path] of [
      [{ start, end }, 'careTeam'],
      [{ careTeam, practitioner: practitioners.reyes, start, end }, 'careTeam'],
      [{ careTeam, start: end, end: start }, 'end'],
      [{ careTeam, start, end: new Date(Date.parse(start) + 32 * 86_400_000).toISOString() }, 'end'],
      [{ careTeam, start, end, view: 'days' }, 'timezone'],
      [{ careTeam, start, end, view: 'days', timezone: 'Mars/Olympus' }, 'timezone'],
      [{ careTeam, start, end, cursor: 'nonsense' }, 'cursor'],
      // Years outside 1900 to 2199 (a 30-day window in the year 0100 was once a calendar of 328,718 days).
      [{ careTeam, start: '0100-01-01', end: '0100-01-31', view: 'days', timezone: 'UTC' }, 'start'],
      [{ careTeam, start: '1899-12-01', end: '1899-12-31' }, 'start'],
      [{ careTeam, start: '2199-12-20', end: '2200-01-10' }, 'end'],
      [{ careTeam, start: '2027-02-30', end: '2027-03-10' }, 'start'],
    ] as [Record<string, string>, string][]) {
      const refused = await availability(ca, query);
      expect(refused.status, JSON.stringify(query)).toBe(400);
      const issues = (refused.body as { error: { details: { issues: { path: string }[] } } }).error.details.issues;
      expect(
        issues.map((i) => i.path),
        JSON.stringify(query),
      ).toContain(path);
    }
  });
});
