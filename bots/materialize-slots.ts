import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  Bundle,
  BundleEntry,
  OperationOutcome,
  PractitionerRole,
  Reference,
  Schedule,
  Slot,
} from '@medplum/fhirtypes';
import { SYSTEMS, TIMEZONE_EXTENSION, VISIT_TYPES, type VisitType } from '../contracts/systems';
import { absent } from './lib/absent';
import { readInput } from './lib/input';
import { searchAll } from './lib/search';
import { localDate, workingSlots } from './lib/slots';

/** How far ahead free Slots exist: three weeks from today, extended by every run. */
export const HORIZON_DAYS = 21;
/**
 * The most Slots one run makes. Each is a conditional create, 120 points of the bot's FHIR quota on
 * Medplum (a write 100, its search 20; packages/server/src/fhir/fhirquota.ts), and the bot has 50,000 a
 * minute for everything it does: 350 (42,000) leaves room for its reads. The soonest missing Slots of
 * all Schedules come first, so every Schedule has its next days after one run; the hourly runs fill
 * the rest of the horizon.
 */
export const SLOTS_PER_RUN = 350;
/** Conditional creates per batch. */
const PER_BATCH = 100;

interface WantedSlot {
  schedule: Schedule & { id: string };
  key: string;
  start: string;
  end: string;
}

/**
 * Cron bot (hourly, and once after provisioning): materialises the free Slots of every active Schedule
 * for the next HORIZON_DAYS local days (JOURNEY H). A Schedule has one actor, a PractitionerRole whose
 * `availableTime` is its working hours, wall-clock in the Schedule's time zone; its slots are as long as
 * the visit type it serves. What exists is read first (one paged search of keys), so a run writes only
 * what is missing, at most SLOTS_PER_RUN, soonest first. Each Slot is a conditional create keyed
 * `Schedule/<id>;<start>`, so two runs never make one twice and a booked Slot is never touched. Every
 * batch entry is checked: if any write failed the run fails, naming how many, and the next run makes
 * them. It decides nothing from its input.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('materialize-slots', event.input);
  if (!input.ok) {
    return input;
  }
  const now = new Date().toISOString();
  const schedules = await searchAll(medplum, 'Schedule', { active: 'true' });
  const wanted: WantedSlot[] = [];
  for (const schedule of schedules) {
    wanted.push(...(await slotsOf(medplum, schedule, now)));
  }
  const existing = new Set<string>();
  // Slots made before they were filed in their tenant (patients read them with their own token).
  const unfiled: Slot[] = [];
  if (wanted.length > 0) {
    const found = await searchAll(medplum, 'Slot', {
      schedule: schedules.map((s) => `Schedule/${s.id}`).join(','),
      start: `ge${now}`,
    });
    unfiled.push(...found.filter((slot) => !filedAs(slot, tenantOf(schedules, slot))));
    for (const slot of found) {
      for (const identifier of slot.identifier ?? []) {
        if (identifier.system === SYSTEMS.slotKey && identifier.value) {
          existing.add(identifier.value);
        }
      }
    }
  }
  const missing = wanted.filter((w) => !existing.has(w.key)).sort((a, b) => a.start.localeCompare(b.start));
  // Filing what was made before comes out of the same budget (a write each), soonest first.
  const refile = unfiled.sort((a, b) => a.start.localeCompare(b.start)).slice(0, SLOTS_PER_RUN);
  const slice = missing.slice(0, SLOTS_PER_RUN - refile.length);
  let filed = 0;
  for (let i = 0; i < refile.length; i += PER_BATCH) {
    const batch = refile.slice(i, i + PER_BATCH);
    const response = await medplum.executeBatch({
      resourceType: 'Bundle',
      type: 'batch',
      entry: batch.map((slot) => ({
        resource: { ...slot, meta: { ...slot.meta, accounts: tenantOf(schedules, slot) } },
        request: { method: 'PUT', url: `Slot/${slot.id}`, ifMatch: `W/"${slot.meta?.versionId}"` },
      })),
    });
    // A Slot booked meanwhile (412) is filed by the next run.
    filed += (response.entry ?? []).filter((e) => e.response?.status?.startsWith('200')).length;
  }
  let made = 0;
  const failed: string[] = [];
  for (let i = 0; i < slice.length; i += PER_BATCH) {
    const batch = slice.slice(i, i + PER_BATCH);
    const bundle: Bundle = { resourceType: 'Bundle', type: 'batch', entry: batch.map(slotCreate) };
    const response = await medplum.executeBatch(bundle);
    batch.forEach((_, index) => {
      const status = response.entry?.[index]?.response?.status ?? 'none';
      if (status.startsWith('201')) {
        made++;
      } else if (!status.startsWith('200')) {
        // 200: another run made it first. Anything else (a 429 of the quota, a 5xx) is a Slot not made.
        failed.push(status.split(' ')[0]);
      }
    });
  }
  if (failed.length > 0) {
    const statuses = [...new Set(failed)].join(', ');
    const text = `materialize-slots: ${failed.length} of ${slice.length} slot writes failed (${statuses})`;
    // Refused for the quota: said as Medplum says it (`throttled`), so that a caller waits and runs it again.
    // Thrown as the OperationOutcome itself: Medplum answers a thrown outcome as it is (core's
    // normalizeOperationOutcome), where an error of the class bundled into the bot would lose its code.
    const code = failed.includes('429') ? 'throttled' : 'exception';
    const outcome: OperationOutcome = {
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code, details: { text } }],
    };
    throw outcome;
  }
  return {
    ok: true,
    schedules: schedules.length,
    slots: made,
    filed,
    remaining: missing.length - slice.length + (unfiled.length - refile.length),
  };
}

async function slotsOf(
  medplum: MedplumClient,
  schedule: Schedule & { id: string },
  now: string,
): Promise<WantedSlot[]> {
  const timeZone = schedule.extension?.find((e) => e.url === TIMEZONE_EXTENSION)?.valueCode;
  const [type, id] = (schedule.actor?.[0]?.reference ?? '').split('/');
  const role =
    type === 'PractitionerRole' && id
      ? ((await medplum.readResource('PractitionerRole', id).catch(absent)) as PractitionerRole | undefined)
      : undefined;
  const visit = schedule.serviceType
    ?.flatMap((s) => s.coding ?? [])
    .find((c) => c.system === SYSTEMS.visitType && c.code && c.code in VISIT_TYPES)?.code as VisitType | undefined;
  const minutes = visit ? VISIT_TYPES[visit].minutes : 0;
  if (!timeZone || !role?.availableTime || minutes === 0) {
    return [];
  }
  const today = localDate(Date.now(), timeZone);
  return workingSlots(role.availableTime, timeZone, today, HORIZON_DAYS, minutes)
    .filter((s) => s.start > now)
    .map(({ start, end }) => ({ schedule, key: `Schedule/${schedule.id};${start}`, start, end }));
}

/** The accounts (tenant) of a Slot's Schedule: what the Slot is filed in. */
function tenantOf(schedules: (Schedule & { id: string })[], slot: Slot): Reference[] {
  const schedule = schedules.find((s) => `Schedule/${s.id}` === slot.schedule?.reference);
  return (schedule?.meta?.accounts ?? []).map((a) => ({ reference: a.reference }));
}

const filedAs = (slot: Slot, accounts: Reference[]): boolean =>
  accounts.every((a) => slot.meta?.accounts?.some((b) => b.reference === a.reference));

function slotCreate({ schedule, key, start, end }: WantedSlot): BundleEntry {
  const slot: Slot = {
    resourceType: 'Slot',
    // Filed in its Schedule's tenant, as the Schedule is: her tenant's patients read its free/busy with
    // their own token (availability), nobody else's. Medplum keeps the accounts a writer sends when it
    // derives none (a Slot names no patient).
    meta: { accounts: (schedule.meta?.accounts ?? []).map((a) => ({ reference: a.reference })) },
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
}
