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
import { isPerson } from './lib/events';
import { readInput } from './lib/input';
import { fail } from './lib/result';
import { searchAll } from './lib/search';
import { localDate, workingSlots } from './lib/slots';

/** How far ahead free Slots exist: three weeks from today, extended by every run. */
export const HORIZON_DAYS = 21;
/**
 * The most Slots one run makes (and files). What it can afford of its FHIR quota decides the rest: the
 * bot has 50,000 points a minute for everything it does (Medplum's default per membership;
 * packages/server/src/fhir/fhirquota.ts), and a Slot's conditional create in a batch costs CREATE_POINTS,
 * so 350 of them (49,000) just fit after its reads when nothing goes wrong. The soonest missing Slots of
 * all Schedules come first, so every Schedule has its next days after one run; the hourly runs fill
 * the rest of the horizon.
 */
export const SLOTS_PER_RUN = 350;
/** Entries per batch, at most. */
const PER_BATCH = 100;
/** Medplum's default FHIR quota per membership and minute, for a server that does not say what is left. */
const FHIR_QUOTA = 50_000;
/**
 * What a conditional create in a batch costs on Medplum (measured on 5.1.29: 14,000 points a batch of
 * 100): the batch's own search for the entry's identity (packages/fhir-router/src/batch.ts,
 * resolveCreateIdentity: 20), then the SERIALIZABLE transaction's search (20) and write (100)
 * (packages/fhir-router/src/repo.ts, conditionalCreate).
 */
export const CREATE_POINTS = 20 + 20 + 100;
/**
 * What it costs at most: Medplum retries that transaction once on a serialization failure, search and
 * write charged again (packages/server/src/fhir/repository/repository-connection.ts, withTransaction).
 */
const CREATE_POINTS_AT_MOST = CREATE_POINTS + 20 + 100;
/** A refiling update under If-Match: one write, whatever its transaction retries (repo.ts updateResource). */
const UPDATE_POINTS = 100;
/** One page of a search. */
const SEARCH_POINTS = 20;
/**
 * How often one run sends a Slot whose create was answered 409 and that the re-read did not find (the
 * transaction was refused for overlapping another, not because the Slot exists).
 */
const CREATE_ATTEMPTS = 8;
/** Keys per re-read of conflicted creates (an identifier search; its URL stays a few kilobytes). */
const KEYS_PER_READ = 20;

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
 * what is missing, at most SLOTS_PER_RUN, soonest first, and no more than its FHIR quota affords (each
 * batch sized by what Medplum says is left: see `Quota`). Each Slot is a conditional create keyed
 * `Schedule/<id>;<start>`, so two runs never make one twice and a booked Slot is never touched.
 *
 * A conditional create runs SERIALIZABLE on Medplum, and Postgres refuses one that overlaps a Slot
 * create of another run anywhere on the server, of any project, even of another Slot: its identifier
 * search takes a predicate lock on the GIN identifier index's metapage, which every insert into that
 * index's pending list conflicts with (seen on 5.1.29: two projects' runs at once, ~15% of creates
 * refused once, ~5% twice). Medplum retries once, then answers 409. So a 409 is read again: found,
 * another run made it; not found, it is sent again with the next batch (up to CREATE_ATTEMPTS). Every
 * batch entry is checked: if a write failed for good the run fails, naming how many, and the next run
 * makes them; what the quota did not afford is `remaining`, for the next run. It decides nothing from its
 * input.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  // Medplum's cron runs it with no requester, provisioning as its client; a person's `$execute` (clinicians
  // may read it, to see it named as the author of Slots) would only spend its quota on the next tick's work.
  if (isPerson(event.requester?.reference)) {
    return fail(403, 'forbidden', 'The slot maker runs on its schedule, not for a person');
  }
  const input = readInput('materialize-slots', event.input);
  if (!input.ok) {
    return input;
  }
  const quota = new Quota(medplum);
  const now = new Date().toISOString();
  const schedules = await searchAll(medplum, 'Schedule', { active: 'true' });
  quota.spend(SEARCH_POINTS);
  const wanted: WantedSlot[] = [];
  // Schedules whose hours are known: their free Slots outside them are withdrawn.
  const known = new Set<string>();
  for (const schedule of schedules) {
    const slots = await slotsOf(medplum, schedule, now);
    quota.spend(1);
    if (slots) {
      known.add(`Schedule/${schedule.id}`);
      wanted.push(...slots);
    }
  }
  const existing = new Set<string>();
  // Slots made before they were filed in their tenant (patients read them with their own token).
  const unfiled: Slot[] = [];
  // Free Slots no longer in her hours (a day away, hours changed), and ones withdrawn so that are again.
  const changed: Slot[] = [];
  if (known.size > 0) {
    const found = await searchAll(medplum, 'Slot', {
      schedule: schedules.map((s) => `Schedule/${s.id}`).join(','),
      start: `ge${now}`,
    });
    quota.spend(SEARCH_POINTS * (1 + Math.floor(found.length / 1000)));
    unfiled.push(...found.filter((slot) => !filedAs(slot, tenantOf(schedules, slot))));
    for (const slot of found) {
      for (const identifier of slot.identifier ?? []) {
        if (identifier.system === SYSTEMS.slotKey && identifier.value) {
          existing.add(identifier.value);
        }
      }
    }
    changed.push(...withdrawnOrBack(found, new Set(wanted.map((w) => w.key)), known));
  }
  // Soonest first, and Slots of one start (two Schedules) by key: one total order, so two runs cut
  // the same list at the same place.
  const missing = wanted
    .filter((w) => !existing.has(w.key))
    .sort((a, b) => a.start.localeCompare(b.start) || a.key.localeCompare(b.key));
  // Filing what was made before comes out of the same budget (a write each), soonest first.
  const refile = unfiled
    .filter((slot) => !changed.includes(slot))
    .sort((a, b) => a.start.localeCompare(b.start))
    .slice(0, SLOTS_PER_RUN / 2);
  const change = changed.sort((a, b) => a.start.localeCompare(b.start)).slice(0, SLOTS_PER_RUN / 2);
  const slice = missing.slice(0, SLOTS_PER_RUN - refile.length - change.length);
  // A Slot booked meanwhile (412) is filed by the next run, and never withdrawn: it stays booked.
  const refiling = await rewrite(medplum, quota, refile, (slot) => ({
    ...slot,
    meta: { ...slot.meta, accounts: tenantOf(schedules, slot) },
  }));
  const filed = refiling.written.length;
  const changing = await rewrite(medplum, quota, change, (slot) =>
    slot.status === 'free' ? withdrawal(slot) : restoration(slot),
  );
  const withdrawn = changing.written.filter((slot) => slot.status === 'free').length;
  const restored = changing.written.length - withdrawn;
  let made = 0;
  // Made by another run meanwhile (a 200 of the conditional create, or a 409 that the re-read found).
  let madeElsewhere = 0;
  let conflicts = 0;
  const failed: string[] = [];
  // Soonest first; a Slot whose create was refused for an overlap goes back to the front.
  const queue = slice.map((slot) => ({ slot, attempts: 0 }));
  while (queue.length > 0) {
    const batch = queue.splice(0, quota.affords(CREATE_POINTS_AT_MOST));
    if (batch.length === 0) {
      break;
    }
    quota.spend(CREATE_POINTS_AT_MOST * batch.length);
    const bundle: Bundle = { resourceType: 'Bundle', type: 'batch', entry: batch.map((w) => slotCreate(w.slot)) };
    const response = await medplum.executeBatch(bundle);
    const conflicted: typeof batch = [];
    batch.forEach((w, index) => {
      const status = response.entry?.[index]?.response?.status ?? 'none';
      w.attempts++;
      if (status.startsWith('201')) {
        made++;
      } else if (status.startsWith('200')) {
        madeElsewhere++;
      } else if (status.startsWith('409')) {
        conflicts++;
        conflicted.push(w);
      } else {
        // Anything else (a 429 of the quota, a 5xx) is a Slot not made.
        failed.push(status.split(' ')[0]);
      }
    });
    const found = await keysFound(
      medplum,
      quota,
      conflicted.map((w) => w.slot.key),
    );
    const again = conflicted.filter((w) => !found.has(w.slot.key));
    madeElsewhere += conflicted.length - again.length;
    for (const w of again) {
      if (w.attempts >= CREATE_ATTEMPTS) {
        failed.push('409');
      }
    }
    queue.unshift(...again.filter((w) => w.attempts < CREATE_ATTEMPTS));
    if (failed.includes('429')) {
      // The quota is spent after all (another run of this bot shares it): the rest is the next run's.
      break;
    }
  }
  const unsent = queue.length + refiling.unsent;
  if (failed.length > 0 || (unsent > 0 && made + madeElsewhere + filed === 0)) {
    const text =
      failed.length > 0
        ? `materialize-slots: ${failed.length} of ${slice.length} slot writes failed (${[...new Set(failed)].join(', ')})`
        : `materialize-slots: ${unsent} of ${slice.length + refile.length} slot writes not sent: its FHIR quota is spent (${quota.left()} points left)`;
    // Refused for the quota: said as Medplum says it (`throttled`), so that a caller waits and runs it again.
    // Thrown as the OperationOutcome itself: Medplum answers a thrown outcome as it is (core's
    // normalizeOperationOutcome), where an error of the class bundled into the bot would lose its code.
    const code = failed.length === 0 || failed.includes('429') ? 'throttled' : 'exception';
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
    madeElsewhere,
    conflicts,
    filed,
    withdrawn,
    restored,
    remaining: missing.length - made - madeElsewhere + (unfiled.length - filed),
    quotaLeft: quota.left(),
  };
}

/**
 * The bot's FHIR quota for this minute, as Medplum counts it: the `RateLimit` header of its last answer
 * ("fhirInteractions", the tighter of the membership's and the project's: packages/server/src/fhir/
 * fhirquota.ts), which MedplumClient keeps (`rateLimitStatus`); on a server that sends none, the default
 * quota less what this run spent at most. A batch is sized so that it could not overdraw what is left even
 * if every entry cost its most and another run of this bot spent as much at the same time: half of it.
 * So a run never meets a 429 of its own making, and when the quota runs low its batches shrink.
 */
class Quota {
  private spent = 0;

  constructor(private readonly medplum: MedplumClient) {}

  /** What a call just sent may have cost at most (counted only for a server that says nothing). */
  spend(points: number): void {
    this.spent += points;
  }

  left(): number {
    let reported: number | undefined;
    try {
      reported = this.medplum.rateLimitStatus?.().find((l) => l.name === 'fhirInteractions')?.remainingUnits;
    } catch {
      // An unreadable header: as if there were none.
    }
    return reported ?? Math.max(0, FHIR_QUOTA - this.spent);
  }

  /** How many entries of this cost at most the next batch may hold. */
  affords(pointsAtMost: number): number {
    return Math.min(PER_BATCH, Math.floor(this.left() / (2 * pointsAtMost)));
  }
}

/**
 * Slots written again under If-Match (`as` each one), in batches the quota affords: those answered 200, and
 * how many were not sent for want of quota. A Slot changed meanwhile (412) is left as it is.
 */
async function rewrite(
  medplum: MedplumClient,
  quota: Quota,
  slots: Slot[],
  as: (slot: Slot) => Slot,
): Promise<{ written: Slot[]; unsent: number }> {
  const written: Slot[] = [];
  let sent = 0;
  while (sent < slots.length) {
    const batch = slots.slice(sent, sent + quota.affords(UPDATE_POINTS));
    if (batch.length === 0) {
      break;
    }
    sent += batch.length;
    quota.spend(UPDATE_POINTS * batch.length);
    const response = await medplum.executeBatch({
      resourceType: 'Bundle',
      type: 'batch',
      entry: batch.map((slot) => ({
        resource: as(slot),
        request: { method: 'PUT', url: `Slot/${slot.id}`, ifMatch: `W/"${slot.meta?.versionId}"` },
      })),
    });
    batch.forEach((slot, index) => {
      if (response.entry?.[index]?.response?.status?.startsWith('200')) {
        written.push(slot);
      }
    });
  }
  return { written, unsent: slots.length - sent };
}

/** Which of these keys a Slot now has (a re-read of creates answered 409), a search per KEYS_PER_READ. */
async function keysFound(medplum: MedplumClient, quota: Quota, keys: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (let i = 0; i < keys.length; i += KEYS_PER_READ) {
    const chunk = keys.slice(i, i + KEYS_PER_READ);
    quota.spend(SEARCH_POINTS);
    const slots = await medplum.searchResources(
      'Slot',
      {
        identifier: chunk.map((key) => `${SYSTEMS.slotKey}|${key}`).join(','),
        _count: String(KEYS_PER_READ * 2),
      },
      { cache: 'no-cache' },
    );
    for (const slot of slots) {
      for (const identifier of slot.identifier ?? []) {
        if (identifier.system === SYSTEMS.slotKey && identifier.value) {
          found.add(identifier.value);
        }
      }
    }
  }
  return found;
}

/**
 * Of the Slots found, the free ones of a Schedule whose hours are known that her hours no longer make (a
 * day she is away, hours changed), within the horizon; and the ones withdrawn so that her hours make again.
 */
function withdrawnOrBack(found: Slot[], wanted: Set<string>, known: Set<string>): Slot[] {
  const horizon = new Date(Date.now() + (HORIZON_DAYS - 1) * 86_400_000).toISOString();
  return found.filter((slot) => {
    const key = slot.identifier?.find((i) => i.system === SYSTEMS.slotKey)?.value;
    if (!key || !known.has(slot.schedule?.reference ?? '')) {
      return false;
    }
    if (slot.status === 'free') {
      return !wanted.has(key) && slot.start < horizon;
    }
    return slot.status === 'busy-unavailable' && slot.comment === WITHDRAWN && wanted.has(key);
  });
}

/** Why a Slot is not offered: what the slot maker writes on the ones it withdraws (and restores only those). */
const WITHDRAWN = 'Not offered: outside her working hours, or a day she is away';

const withdrawal = (slot: Slot): Slot => ({ ...slot, status: 'busy-unavailable', comment: WITHDRAWN });
const restoration = ({ comment: _comment, ...slot }: Slot): Slot => ({ ...slot, status: 'free' });

/** Whether an instant falls in a period she is away: local dates (whole days in her zone) or instants. */
function away(role: PractitionerRole, start: string, end: string, timeZone: string): boolean {
  return (role.notAvailable ?? []).some(({ during }) => {
    if (!during?.start) {
      return false;
    }
    const last = during.end ?? during.start;
    if (/^\d{4}-\d{2}-\d{2}$/.test(during.start) && /^\d{4}-\d{2}-\d{2}$/.test(last)) {
      const day = localDate(Date.parse(start), timeZone);
      return day >= during.start && day <= last;
    }
    return Date.parse(start) < Date.parse(last) && Date.parse(end) > Date.parse(during.start);
  });
}

/** The Slots a Schedule's hours make from now over the horizon; undefined when its hours are not known. */
async function slotsOf(
  medplum: MedplumClient,
  schedule: Schedule & { id: string },
  now: string,
): Promise<WantedSlot[] | undefined> {
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
    return undefined;
  }
  const today = localDate(Date.now(), timeZone);
  return workingSlots(role.availableTime, timeZone, today, HORIZON_DAYS, minutes)
    .filter((s) => s.start > now && !away(role, s.start, s.end, timeZone))
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
