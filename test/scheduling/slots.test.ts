import type { Slot } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDays, localDate, workingSlots, zonedInstant } from '../../bots/lib/slots';
import { HORIZON_DAYS } from '../../bots/materialize-slots';
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
  beforeAll(async () => {
    backend = await startTestBackend({ runBots: true });
  });
  afterAll(() => backend?.close());

  // Every Slot in the store, read from it directly (more than a search page holds).
  const slots = async () =>
    (backend.db.reader.prepare("SELECT content FROM resource WHERE type = 'Slot'").all() as { content: string }[]).map(
      (row) => JSON.parse(row.content) as Slot,
    );

  it('provisioning makes the next weeks of free slots of every demo schedule, each keyed once; a later run adds none', async () => {
    const made = await slots();
    const perSchedule = new Map<string, number>();
    for (const slot of made) {
      perSchedule.set(slot.schedule.reference as string, (perSchedule.get(slot.schedule.reference as string) ?? 0) + 1);
      expect(slot.status).toBe('free');
      expect(slot.identifier?.[0]?.system).toBe(SYSTEMS.slotKey);
    }
    expect(perSchedule.size).toBe(VISIT_PRACTITIONERS.length);
    // Office hours: weekdays of three weeks, 16 half-hours a day; on call: every day, 48 (today's past ones excepted).
    const counts = [...perSchedule.values()].sort((a, b) => a - b);
    for (const count of counts.slice(0, -1)) {
      expect(count).toBeGreaterThan(14 * 16 - 16);
      expect(count).toBeLessThanOrEqual(((HORIZON_DAYS + 2) / 7) * 5 * 16 + 16);
    }
    expect(counts.at(-1)).toBeGreaterThanOrEqual((HORIZON_DAYS - 1) * 48);
    expect(counts.at(-1)).toBeLessThanOrEqual(HORIZON_DAYS * 48);
    expect(new Set(made.map((s) => s.identifier?.[0]?.value)).size).toBe(made.length);
    // The daily run makes what is missing (a slot lost here) and nothing twice.
    const lost = made.find((s) => s.start > new Date(Date.now() + 86_400_000).toISOString()) as Slot;
    await backend.systemRepo.deleteResource('Slot', lost.id as string);
    await backend.cron.tick(new Date('2026-11-26T02:00:00Z'));
    const after = await slots();
    expect(after.length).toBe(made.length);
    expect(after.some((s) => s.identifier?.[0]?.value === lost.identifier?.[0]?.value)).toBe(true);
  });
});
