import type { ProjectMembership, Slot } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDays, localDate, workingSlots, zonedInstant } from '../../bots/lib/slots';
import { CREATE_POINTS, HORIZON_DAYS, SLOTS_PER_RUN } from '../../bots/materialize-slots';
import { SYSTEMS } from '../../contracts/systems';
import { VISIT_PRACTITIONERS } from '../../src/provision/schedules';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Issue 16 item 6: demo schedules and their free Slots, materialised from working hours by a bot
 * (`bots/materialize-slots.ts`) after provisioning and daily, idempotently; wall-clock time across a
 * daylight-saving change (`bots/lib/slots.ts`).
 */
const WEEKDAY_HOURS = [
  {
    daysOfWeek: ['mon', 'tue', 'wed', 'thu', 'fri'] as const,
    availableStartTime: '09:00:00',
    availableEndTime: '17:00:00',
  },
].map((h) => ({ ...h, daysOfWeek: [...h.daysOfWeek] }));

describe('wall-clock slots', () => {
  it('keep their local hours across a daylight-saving change (America/Los_Angeles, 2027-03-14 and 2026-11-01)', () => {
    // The Friday before and the Monday after spring-forward: 9:00 local is 17:00Z, then 16:00Z.
    const spring = workingSlots(WEEKDAY_HOURS, 'America/Los_Angeles', '2027-03-12', 4, 30);
    expect(spring).toHaveLength(32);
    expect(spring[0]).toEqual({ start: '2027-03-12T17:00:00.000Z', end: '2027-03-12T17:30:00.000Z' });
    expect(spring[16].start).toBe('2027-03-15T16:00:00.000Z');
    const fall = workingSlots(WEEKDAY_HOURS, 'America/Los_Angeles', '2026-10-30', 4, 30);
    expect(fall[0].start).toBe('2026-10-30T16:00:00.000Z');
    expect(fall[16].start).toBe('2026-11-02T17:00:00.000Z');
    for (const slot of [...spring, ...fall]) {
      const local = new Date(slot.start).toLocaleTimeString('en-US', {
        timeZone: 'America/Los_Angeles',
        hourCycle: 'h23',
      });
      expect(Number(local.split(':')[0])).toBeGreaterThanOrEqual(9);
      expect(Number(local.split(':')[0])).toBeLessThan(17);
    }
  });

  it('a skipped wall-clock time does not exist; a repeated one is its first occurrence; local dates follow the zone', () => {
    expect(zonedInstant('2027-03-14', '02:30', 'America/Los_Angeles')).toBeUndefined();
    expect(new Date(zonedInstant('2026-11-01', '01:30', 'America/Los_Angeles') as number).toISOString()).toBe(
      '2026-11-01T08:30:00.000Z',
    );
    expect(localDate(Date.parse('2026-11-26T06:00:00Z'), 'America/Los_Angeles')).toBe('2026-11-25');
    expect(localDate(Date.parse('2026-11-26T06:00:00Z'), 'Europe/Berlin')).toBe('2026-11-26');
    expect(addDays('2027-02-27', 2)).toBe('2027-03-01');
  });
});

describe('materialised free Slots', () => {
  let backend: TestBackend;
  // The FHIR quota's minute passes between two runs of the bot (the embedded Medplum counts it as Medplum).
  let offset = 0;
  const nextMinute = () => {
    offset += 61_000;
  };
  beforeAll(async () => {
    backend = await startTestBackend({ runBots: true, clock: () => new Date(Date.now() + offset) });
  });
  afterAll(() => backend?.close());

  // Every Slot in the store, read from it directly (more than a search page holds).
  const slots = async () =>
    (backend.db.reader.prepare("SELECT content FROM resource WHERE type = 'Slot'").all() as { content: string }[]).map(
      (row) => JSON.parse(row.content) as Slot,
    );
  const perSchedule = (made: Slot[]) => {
    const counts = new Map<string, number>();
    for (const slot of made) {
      counts.set(slot.schedule.reference as string, (counts.get(slot.schedule.reference as string) ?? 0) + 1);
    }
    return counts;
  };

  it('provisioning makes the soonest slots of every demo schedule, no more than one run may afford of its quota', async () => {
    const made = await slots();
    expect(made.length).toBe(SLOTS_PER_RUN);
    expect(perSchedule(made).size).toBe(VISIT_PRACTITIONERS.length);
    // Soonest first across schedules: every schedule has its next days, none the whole horizon yet.
    // Four days: office hours are weekdays, and from a Friday evening the next two days are a weekend.
    const inTwoDays = new Date(Date.now() + 4 * 86_400_000).toISOString();
    for (const [schedule, count] of perSchedule(made.filter((s) => s.start < inTwoDays))) {
      expect(count, schedule).toBeGreaterThan(0);
    }
    expect(perSchedule(made.filter((s) => s.start < inTwoDays)).size).toBe(VISIT_PRACTITIONERS.length);
  });

  it('the hourly runs fill the next weeks, each keyed once, each run within its quota; a later run adds none', async () => {
    let runs = 0;
    for (;;) {
      const earlier = await slots();
      const before = earlier.length;
      nextMinute();
      await backend.cron.tick(new Date('2026-11-26T02:00:00Z'));
      runs++;
      const now = await slots();
      const after = now.length;
      // Soonest first: what a run adds starts no earlier than the latest of what was there.
      const known = new Set(earlier.map((s) => s.id));
      const latest = earlier
        .map((s) => s.start)
        .sort()
        .at(-1) as string;
      expect(now.filter((s) => !known.has(s.id)).every((s) => s.start >= latest)).toBe(true);
      expect(after - before).toBeLessThanOrEqual(SLOTS_PER_RUN);
      if (after === before) {
        break;
      }
    }
    expect(runs).toBeGreaterThan(2);
    const made = await slots();
    for (const slot of made) {
      expect(slot.status).toBe('free');
      expect(slot.identifier?.[0]?.system).toBe(SYSTEMS.slotKey);
    }
    // Office hours: weekdays of three weeks, 16 half-hours a day; on call: every day, 48 (today's past ones excepted).
    const counts = [...perSchedule(made).values()].sort((a, b) => a - b);
    for (const count of counts.slice(0, -1)) {
      expect(count).toBeGreaterThan(14 * 16 - 16);
      expect(count).toBeLessThanOrEqual(((HORIZON_DAYS + 2) / 7) * 5 * 16 + 16);
    }
    expect(counts.at(-1)).toBeGreaterThanOrEqual((HORIZON_DAYS - 1) * 48);
    expect(counts.at(-1)).toBeLessThanOrEqual(HORIZON_DAYS * 48);
    expect(new Set(made.map((s) => s.identifier?.[0]?.value)).size).toBe(made.length);
    // A run makes what is missing (a slot lost here) and nothing twice.
    const lost = made.find((s) => s.start > new Date(Date.now() + 86_400_000).toISOString()) as Slot;
    await backend.systemRepo.deleteResource('Slot', lost.id as string);
    nextMinute();
    await backend.cron.tick(new Date('2026-11-26T03:00:00Z'));
    const after = await slots();
    expect(after.length).toBe(made.length);
    expect(after.some((s) => s.identifier?.[0]?.value === lost.identifier?.[0]?.value)).toBe(true);
  });

  it('every Slot is filed in its Schedule’s tenant; one made before that (no accounts) is filed by the next run, its status untouched, and then read by her tenant’s patients only', async () => {
    const made = await slots();
    expect(made.every((slot) => (slot.meta?.accounts?.length ?? 0) > 0)).toBe(true);
    // Two Slots as an earlier version made them: filed nowhere, one of them booked.
    const [free, busy] = made.filter((s) => s.start > new Date(Date.now() + 86_400_000).toISOString()).slice(0, 2) as [
      Slot,
      Slot,
    ];
    const unfile = (slot: Slot, status: Slot['status']) => {
      const { accounts: _accounts, compartment: _compartment, ...meta } = slot.meta ?? {};
      return backend.systemRepo.updateResource<Slot>({ ...slot, status, meta });
    };
    await unfile(free, 'free');
    await unfile(busy, 'busy');
    const alice = backend.patients.alice.token;
    const read = (slot: Slot, token: string) =>
      backend.fetch(new URL(`fhir/R4/Slot/${slot.id}`, backend.baseUrl), {
        headers: { authorization: `Bearer ${token}` },
      });
    expect((await read(free, alice)).status).toBe(404);
    nextMinute();
    await backend.cron.tick(new Date('2026-11-26T04:00:00Z'));
    const [freeNow, busyNow] = await Promise.all(
      [free, busy].map((s) => backend.systemRepo.readResource<Slot>('Slot', s.id as string)),
    );
    expect(freeNow.meta?.accounts).toEqual(free.meta?.accounts);
    expect(busyNow.meta?.accounts).toEqual(busy.meta?.accounts);
    expect([freeNow.status, busyNow.status]).toEqual(['free', 'busy']);
    expect([freeNow.start, busyNow.start]).toEqual([free.start, busy.start]);
    const tenantOf = (token: string) =>
      free.meta?.accounts?.[0]?.reference === backend.patients.alice.patient.managingOrganization?.reference
        ? token
        : undefined;
    const mine = tenantOf(alice) ? alice : backend.patients.carol.token;
    const theirs = mine === alice ? backend.patients.carol.token : alice;
    expect((await read(free, mine)).status).toBe(200);
    expect((await read(free, theirs)).status).toBe(404);
  });

  /** A client signed in as the bot's own membership: what it spends is the bot's quota. */
  const asBot = async () => {
    const bot = await backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|materialize-slots` });
    const membership = await backend.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: `Bot/${bot?.id}` }],
    });
    return (await backend.login(membership as ProjectMembership)).medplum;
  };
  const run = () =>
    backend.admin.executeBot({ system: SYSTEMS.bots, value: 'materialize-slots' }, {}, 'application/json') as Promise<{
      ok: boolean;
      slots: number;
      remaining: number;
    }>;

  it('two runs at once share the bot’s quota and neither overdraws it: both succeed, the soonest Slots made, each once, a booked Slot untouched; the next run the rest', async () => {
    // 300 lost: each run alone would send 300 creates (42,000 points), both 84,000 of the one 50,000.
    const { a, b, lost } = await twoRunsAtOnce(backend, nextMinute, 300);
    expect(a.slots + b.slots).toBeGreaterThan(0);
    expect(a.slots + b.slots).toBeLessThanOrEqual(50_000 / CREATE_POINTS);
    nextMinute();
    await backend.cron.tick(new Date('2026-11-26T04:00:00Z'));
    const keys = new Set((await slots()).map((s) => s.identifier?.[0]?.value));
    expect(lost.every((s) => keys.has(s.identifier?.[0]?.value))).toBe(true);
  });

  it('a run writes no more than its quota has left (as Medplum says, each create costing what Medplum charges): part of it spent, it makes the soonest that fit, without a 429, and the next run the rest', async () => {
    const made = await slots();
    const later = new Date(Date.now() + 2 * 86_400_000).toISOString();
    const gone = made.filter((s) => s.start > later).sort(soonestFirst);
    gone.splice(300);
    for (const slot of gone) {
      await backend.systemRepo.deleteResource('Slot', slot.id as string);
    }
    // 30,000 of its 50,000 points spent this minute (as a run a little earlier, or a flood, can leave them).
    const bot = await asBot();
    nextMinute();
    for (let i = 0; i < 30_000 / 20; i++) {
      await bot.search('Schedule', { _count: '1' });
    }
    // Sent as one batch of all 300 (42,000 points), its tail would be refused 429 and the run fail.
    const result = await run();
    expect(result.ok).toBe(true);
    expect(result.slots).toBeGreaterThan(100);
    expect(result.slots).toBeLessThanOrEqual(20_000 / CREATE_POINTS);
    expect(result.remaining).toBe(gone.length - result.slots);
    const key = (s: Slot) => s.identifier?.[0]?.value;
    const back = new Set((await slots()).map(key));
    expect(gone.filter((s) => back.has(key(s)))).toEqual(gone.slice(0, result.slots));
    nextMinute();
    await backend.cron.tick(new Date('2026-11-26T04:00:00Z'));
    expect((await slots()).length).toBe(made.length);
  });

  it('a run whose quota is already spent fails loudly, naming how many, and the next run makes them', async () => {
    const made = await slots();
    const gone = made.filter((s) => s.start > new Date(Date.now() + 5 * 86_400_000).toISOString()).slice(0, 3);
    for (const slot of gone) {
      await backend.systemRepo.deleteResource('Slot', slot.id as string);
    }
    // The bot's own quota spent (as other runs or a flood can leave it): it has not enough left for a write.
    const bot = await asBot();
    nextMinute();
    for (let i = 0; i < 49_900 / 20; i++) {
      await bot.search('Schedule', { _count: '1' });
    }
    const answer = await run().catch((err: unknown) => err);
    expect(String(answer)).toMatch(
      /materialize-slots: 3 of 3 slot writes not sent: its FHIR quota is spent|Too Many Requests/,
    );
    expect((await slots()).length).toBe(made.length - gone.length);
    nextMinute();
    await backend.cron.tick(new Date('2026-11-26T04:00:00Z'));
    expect((await slots()).length).toBe(made.length);
  });
});

describe('two runs at once, on a store that answers 409 as Postgres-backed Medplum does', () => {
  // On Medplum each conditional create is a SERIALIZABLE transaction, and Postgres refuses one that
  // overlaps another Slot write (Medplum retries once, then answers 409), even of a Slot nobody made. Here
  // a create that finds what another transaction made in the last minute is answered 409
  // (`overlapConflictMs`); a quota large enough for both runs, so that only the 409s are in play.
  let backend: TestBackend;
  let offset = 0;
  beforeAll(async () => {
    backend = await startTestBackend({
      runBots: true,
      overlapConflictMs: 60_000,
      fhirQuota: 1_000_000,
      clock: () => new Date(Date.now() + offset),
    });
  });
  afterAll(() => backend?.close());

  it('a create answered 409 is read again: what the other run made counts as made; both succeed, every Slot once, a booked Slot untouched', async () => {
    const { a, b, lost } = await twoRunsAtOnce(
      backend,
      () => {
        offset += 61_000;
      },
      100,
    );
    // Provisioning's run made the soonest 350: these two make the lost ones and the next after them.
    expect(a.slots + b.slots).toBeGreaterThanOrEqual(lost.length);
    // They overlapped: each met Slots the other had just made, answered 409.
    expect(a.conflicts + b.conflicts).toBeGreaterThan(0);
    expect(a.madeElsewhere + b.madeElsewhere).toBeGreaterThan(0);
  });
});

/** The bot's order: soonest first, Slots of one start (two Schedules) by their key. */
const soonestFirst = (a: Slot, b: Slot) =>
  a.start.localeCompare(b.start) || (a.identifier?.[0]?.value ?? '').localeCompare(b.identifier?.[0]?.value ?? '');

interface RunResult {
  ok: boolean;
  slots: number;
  madeElsewhere: number;
  conflicts: number;
}

/**
 * One Slot booked and the next `count` lost, then two runs of the bot at once: both succeed, between them
 * they make the soonest of the lost Slots (all, if their quota affords it), each once, and the booked one
 * is as it was.
 */
async function twoRunsAtOnce(
  backend: TestBackend,
  nextMinute: () => void,
  count: number,
): Promise<{ a: RunResult; b: RunResult; lost: Slot[] }> {
  const all = () =>
    (backend.db.reader.prepare("SELECT content FROM resource WHERE type = 'Slot'").all() as { content: string }[]).map(
      (row) => JSON.parse(row.content) as Slot,
    );
  const made = all();
  const later = made.filter((s) => s.start > new Date(Date.now() + 86_400_000).toISOString()).sort(soonestFirst);
  const booked = await backend.systemRepo.updateResource<Slot>({ ...(later[0] as Slot), status: 'busy' });
  const lost = later.slice(1, 1 + count);
  for (const slot of lost) {
    await backend.systemRepo.deleteResource('Slot', slot.id as string);
  }
  nextMinute();
  const run = () =>
    backend.admin.executeBot(
      { system: SYSTEMS.bots, value: 'materialize-slots' },
      {},
      'application/json',
    ) as Promise<RunResult>;
  const [a, b] = await Promise.all([run(), run()]);
  expect([a.ok, b.ok]).toEqual([true, true]);
  const now = all();
  const keys = now.map((s) => s.identifier?.[0]?.value);
  expect(new Set(keys).size).toBe(now.length);
  expect(now.length).toBe(made.length - lost.length + a.slots + b.slots);
  // Soonest first: what is back of the lost Slots is their soonest.
  const back = new Set(keys);
  expect(lost.filter((s) => back.has(s.identifier?.[0]?.value))).toEqual(lost.slice(0, a.slots + b.slots));
  const bookedNow = await backend.systemRepo.readResource<Slot>('Slot', booked.id as string);
  expect(bookedNow.meta?.versionId).toBe(booked.meta?.versionId);
  expect(bookedNow.status).toBe('busy');
  return { a, b, lost };
}
