import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Bundle, BundleEntry, PractitionerRole, Schedule, Slot } from '@medplum/fhirtypes';
import { SYSTEMS, TIMEZONE_EXTENSION, VISIT_TYPES, type VisitType } from '../contracts/systems';
import { readInput } from './lib/input';
import { searchAll } from './lib/search';
import { localDate, workingSlots } from './lib/slots';

/** How far ahead free Slots exist: three weeks from today, extended by every daily run. */
export const HORIZON_DAYS = 21;
/** Conditional creates per batch. */
const PER_BATCH = 100;

/**
 * Cron bot (daily, and once after provisioning): materialises the free Slots of every active Schedule
 * for the next HORIZON_DAYS local days (JOURNEY H). A Schedule has one actor, a PractitionerRole whose
 * `availableTime` is its working hours, wall-clock in the Schedule's time zone; its slots are as long as
 * the visit type it serves. Each Slot is a conditional create keyed `Schedule/<id>;<start>`, so a run
 * makes only what is missing and never touches a booked Slot. It decides nothing from its input.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('materialize-slots', event.input);
  if (!input.ok) {
    return input;
  }
  const schedules = await searchAll(medplum, 'Schedule', { active: 'true' });
  let made = 0;
  for (const schedule of schedules) {
    made += await materialize(medplum, schedule);
  }
  return { ok: true, schedules: schedules.length, slots: made };
}

async function materialize(medplum: MedplumClient, schedule: Schedule): Promise<number> {
  const timeZone = schedule.extension?.find((e) => e.url === TIMEZONE_EXTENSION)?.valueCode;
  const [type, id] = (schedule.actor?.[0]?.reference ?? '').split('/');
  const role =
    type === 'PractitionerRole' && id
      ? ((await medplum.readResource('PractitionerRole', id).catch(() => undefined)) as PractitionerRole | undefined)
      : undefined;
  const visit = schedule.serviceType
    ?.flatMap((s) => s.coding ?? [])
    .find((c) => c.system === SYSTEMS.visitType && c.code && c.code in VISIT_TYPES)?.code as VisitType | undefined;
  const minutes = visit ? VISIT_TYPES[visit].minutes : 0;
  if (!timeZone || !role?.availableTime || minutes === 0) {
    return 0;
  }
  const today = localDate(Date.now(), timeZone);
  const now = new Date().toISOString();
  const slots = workingSlots(role.availableTime, timeZone, today, HORIZON_DAYS, minutes).filter((s) => s.start > now);
  let made = 0;
  for (let i = 0; i < slots.length; i += PER_BATCH) {
    const entries: BundleEntry[] = slots.slice(i, i + PER_BATCH).map(({ start, end }) => {
      const key = `Schedule/${schedule.id};${start}`;
      const slot: Slot = {
        resourceType: 'Slot',
        identifier: [{ system: SYSTEMS.slotKey, value: key }],
        schedule: { reference: `Schedule/${schedule.id}` },
        serviceType: schedule.serviceType,
        status: 'free',
        start,
        end,
      };
      return {
        resource: slot,
        request: {
          method: 'POST',
          url: 'Slot',
          ifNoneExist: `identifier=${encodeURIComponent(`${SYSTEMS.slotKey}|${key}`)}`,
        },
      };
    });
    const bundle: Bundle = { resourceType: 'Bundle', type: 'batch', entry: entries };
    const response = await medplum.executeBatch(bundle);
    made += (response.entry ?? []).filter((e) => e.response?.status?.startsWith('201')).length;
  }
  return made;
}
