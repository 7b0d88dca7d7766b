import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  Appointment,
  Bundle,
  BundleEntry,
  CarePlan,
  CarePlanActivity,
  Encounter,
  PlanDefinition,
  PlanDefinitionAction,
  Reference,
  ServiceRequest,
  Task,
  Timing,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { absent } from './lib/absent';
import { readInput } from './lib/input';
import { publishedDefinition } from './lib/journey';
import { issueEntries, tasksOf, visitTeamOf } from './lib/plans';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { searchAll } from './lib/search';
import { encountersOf, ownSegments } from './lib/visits';

/**
 * Subscription bot (JOURNEY H): a visit ends when its last segment is finished. Woken by a segment
 * (Encounter) finished and by an Appointment marked fulfilled: Medplum's Provider app, when the
 * clinician finishes an encounter, writes the Appointment `fulfilled` FIRST and the Encounter after it,
 * whatever segments remain (its src/utils/encounter.ts). So the Appointment's status written by a
 * clinician is only a wake-up: the truth is the segments.
 *
 * - Every segment finished, each by the visit's own practitioner or by a bot: the visit is complete.
 *   One transaction under If-Match: the Appointment `fulfilled` (written by this bot), the visit's request
 *   (ServiceRequest) `completed`, the plan's visit activity given the Appointment as its outcome, and, when
 *   the plan's visit action repeats (its timing), the next visit to book: a new request and schedule-visit
 *   task, not before one period after this visit (`restriction.period.start`).
 * - Otherwise: the Appointment is put back to what its segments say (`arrived` once one has started,
 *   else `booked`), so a visit marked fulfilled too early (a first segment finished in the Provider app)
 *   goes on and she can start her next segment.
 * Only the platform's visits (an Appointment a bot made, with its request and plan); believes only its
 * own reads. Races: every write is under If-Match, and a lost race is decided again from fresh reads (a
 * delivery for the Appointment and one for the Encounter of the same finish may run at once).
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('visit-completion', event.input);
  if (!input.ok) {
    return input;
  }
  const first = readingOnce(bare);
  const appointmentId = await appointmentOf(first, input.value.resourceType, input.value.id);
  if (!appointmentId) {
    return { ok: true, fulfilled: false, reason: 'not a visit segment' };
  }
  for (let attempt = 0; attempt < 4; attempt++) {
    // Each attempt reads afresh (a lost race means something changed).
    const outcome = await decide(attempt === 0 ? first : readingOnce(bare), appointmentId);
    if (outcome !== 'lost-race') {
      return outcome;
    }
  }
  return { ok: true, fulfilled: false, reason: 'the visit kept changing; the next change decides it' };
}

async function appointmentOf(
  medplum: MedplumClient,
  type: 'Encounter' | 'Appointment',
  id: string,
): Promise<string | undefined> {
  if (type === 'Appointment') {
    return id;
  }
  const encounter = (await medplum.readResource('Encounter', id).catch(absent)) as Encounter | undefined;
  const [kind, appointmentId] = (encounter?.appointment?.[0]?.reference ?? '').split('/');
  return kind === 'Appointment' && appointmentId ? appointmentId : undefined;
}

type Outcome = Record<string, unknown> | 'lost-race';

async function decide(medplum: MedplumClient, id: string): Promise<Outcome> {
  const [appointment, encounters] = await Promise.all([
    medplum.readResource('Appointment', id).catch(absent) as Promise<(Appointment & { id: string }) | undefined>,
    encountersOf(medplum, id),
  ]);
  const her = appointment?.participant?.find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor?.reference;
  const [requestType, requestId] = (appointment?.basedOn?.[0]?.reference ?? '').split('/');
  if (!appointment || !her || requestType !== 'ServiceRequest' || !requestId || !platformMade(appointment)) {
    return { ok: true, fulfilled: false, reason: 'not a visit the platform booked' };
  }
  if (appointment.status !== 'booked' && appointment.status !== 'arrived' && appointment.status !== 'fulfilled') {
    return { ok: true, fulfilled: false, reason: `the visit is ${appointment.status}` };
  }
  // What completing the visit may read goes out with its request (fewer round trips), each believed in
  // its turn below: her Patient, the plan the Appointment names, the tasks that booked the visit.
  const itsPlan = appointment.supportingInformation?.find((r) => r.reference?.startsWith('CarePlan/'))?.reference;
  ahead(medplum.readReference({ reference: her }));
  if (itsPlan) {
    ahead(medplum.readReference({ reference: itsPlan }));
  }
  ahead(bookingTasksOf(medplum, requestId));
  const request = (await medplum.readResource('ServiceRequest', requestId).catch(absent)) as
    | (ServiceRequest & { id: string })
    | undefined;
  if (request?.subject?.reference !== her) {
    return { ok: true, fulfilled: false, reason: 'the visit has no request of hers' };
  }
  if (request.status === 'completed') {
    // Completed before: what happens to a finished segment since (a note) changes nothing.
    return { ok: true, fulfilled: true, appointment: `Appointment/${id}`, replay: true };
  }
  const state = visitState(appointment, request, encounters);
  if (!state.complete) {
    const { status } = state;
    if (appointment.status !== 'fulfilled') {
      return { ok: true, fulfilled: false, appointment: `Appointment/${id}`, status: appointment.status };
    }
    // Marked fulfilled with segments still to come: back to what the segments say.
    return (await written(medplum, [put({ ...appointment, status }, appointment)]))
      ? { ok: true, fulfilled: false, appointment: `Appointment/${id}`, status, restored: true }
      : 'lost-race';
  }
  // Marked as the platform's decision, so its version is the bot's even when a practitioner's mark already
  // said `fulfilled` (an unchanged write stores no version): what events and webhooks announce.
  const decided: Appointment = {
    ...appointment,
    status: 'fulfilled',
    extension: [
      ...(appointment.extension ?? []).filter((e) => e.url !== EXTENSIONS.visitFulfilled),
      { url: EXTENSIONS.visitFulfilled, valueInstant: new Date().toISOString() },
    ],
  };
  const entries: BundleEntry[] = [put(decided, appointment)];
  entries.push(put({ ...request, status: 'completed' }, request));
  const { entries: planned, next } = await planWork(medplum, appointment, request, her);
  entries.push(...planned);
  if (!(await written(medplum, entries))) {
    return 'lost-race';
  }
  return { ok: true, fulfilled: true, appointment: `Appointment/${id}`, ...(next ? { next } : {}) };
}

/**
 * What the plan does with a completed visit: its activity for the visit takes the Appointment as an
 * outcome, and a repeating visit is issued again (its next request and schedule-visit task).
 */
async function planWork(
  medplum: MedplumClient,
  appointment: Appointment & { id: string },
  request: ServiceRequest & { id: string },
  her: string,
): Promise<{ entries: BundleEntry[]; next?: string }> {
  const [planType, planId] = (request.basedOn?.[0]?.reference ?? '').split('/');
  const [plan, bookingTasks, patient] = await Promise.all([
    planType === 'CarePlan' && planId
      ? (medplum.readReference({ reference: `CarePlan/${planId}` }).catch(absent) as Promise<
          (CarePlan & { id: string }) | undefined
        >)
      : undefined,
    bookingTasksOf(medplum, request.id),
    medplum.readReference({ reference: her } as Reference).catch(absent),
  ]);
  if (plan?.subject?.reference !== her || plan.status !== 'active') {
    return { entries: [] };
  }
  const organization = (patient as { managingOrganization?: Reference } | undefined)?.managingOrganization?.reference;
  const definition = request.instantiatesCanonical?.[0] ?? '';
  // The next visit's definitions go out with the plan's (fewer round trips): its ActivityDefinition and her
  // tenant's visit team, read again below by tasksOf from these same reads.
  ahead(publishedDefinition<ActivityDefinition>(medplum, 'ActivityDefinition', definition, organization));
  if (organization) {
    ahead(visitTeamOf(medplum, organization));
  }
  const bookedBy = new Set(bookingTasks.map((t) => `Task/${t.id}`));
  const outcome: Reference = { reference: `Appointment/${appointment.id}` };
  let matched = false;
  const activity: CarePlanActivity[] = (plan.activity ?? []).map((a) => {
    const mine =
      bookedBy.has(a.reference?.reference ?? '') || (a.detail?.instantiatesCanonical ?? []).includes(definition);
    if (!mine || matched) {
      return a;
    }
    matched = true;
    return { ...a, outcomeReference: [...(a.outcomeReference ?? []), outcome] };
  });
  const protocol = await publishedDefinition<PlanDefinition>(
    medplum,
    'PlanDefinition',
    plan.instantiatesCanonical?.[0] ?? '',
    organization,
  );
  const action = protocol ? actionFor(protocol.action ?? [], definition) : undefined;
  const notBefore = action?.timingTiming ? nextOccurrence(action.timingTiming, new Date()) : undefined;
  const tasks = action && notBefore ? await tasksOf(medplum, [action], organization) : undefined;
  const entries: BundleEntry[] = [];
  let next: string | undefined;
  if (tasks && notBefore) {
    const issued = issueEntries(
      tasks.map((t): Task => ({ ...t, restriction: { period: { start: notBefore } } })),
      {
        patient: her,
        carePlan: `CarePlan/${plan.id}`,
        tags: (request.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode),
        now: new Date().toISOString(),
      },
    );
    entries.push(...issued);
    const task = issued.find((e) => e.resource?.resourceType === 'Task');
    next = task?.fullUrl;
    // A plan that lists its tasks (an accepted offer's) lists the new one; a program's activity is its action.
    if (task && activity.some((a) => a.reference?.reference?.startsWith('Task/'))) {
      activity.push({ reference: { reference: task.fullUrl } });
    }
  }
  entries.unshift(put({ ...plan, activity }, plan));
  return { entries, next };
}

/** The schedule-visit tasks that booked a visit's request (one, or more after a cancel re-issued it). */
/**
 * What a visit's segments say (its decision, without a read or a write): complete when its request is
 * active and every segment the platform made for it was finished by the visit's practitioner or by a bot
 * (an asynchronous review); otherwise `arrived` once a segment has started, else `booked`.
 */
export function visitState(
  appointment: Appointment,
  request: ServiceRequest,
  encounters: (Encounter & { id: string })[],
): { complete: true } | { complete: false; status: 'arrived' | 'booked' } {
  const segments = ownSegments(appointment, encounters);
  const practitioner = appointment.participant?.find((p) => p.actor?.reference?.startsWith('Practitioner/'))?.actor
    ?.reference;
  // A segment counts as finished only when its practitioner (or a bot: an asynchronous review) finished
  // it; the clinician policy allows nobody else, and this holds even where a policy would.
  const finishedByCare = (e: Encounter) =>
    e.status === 'finished' && (isBots(e) || (!!practitioner && e.meta?.author?.reference === practitioner));
  if (request.status === 'active' && segments.length > 0 && segments.every(finishedByCare)) {
    return { complete: true };
  }
  const started = segments.some((s) => s.status !== 'planned' && s.status !== 'cancelled');
  return { complete: false, status: started ? 'arrived' : 'booked' };
}

const bookingTasksOf = (medplum: MedplumClient, requestId: string) =>
  searchAll(medplum, 'Task', { code: `${SYSTEMS.taskKind}|schedule-visit`, focus: `ServiceRequest/${requestId}` });

/** The plan's action that books this visit (its ActivityDefinition), at any depth. */
function actionFor(actions: PlanDefinitionAction[], definition: string): PlanDefinitionAction | undefined {
  for (const action of actions) {
    if (action.definitionCanonical === definition) {
      return action;
    }
    const nested = actionFor(action.action ?? [], definition);
    if (nested) {
      return nested;
    }
  }
  return undefined;
}

const UNIT_DAYS: Record<string, number> = { d: 1, wk: 7 };

/** When a repeating action is next due after `from`: one period later (months and years by the calendar). */
export function nextOccurrence(timing: Timing, from: Date): string | undefined {
  const period = timing.repeat?.period;
  const unit = timing.repeat?.periodUnit;
  if (!period || period <= 0 || !unit) {
    return undefined;
  }
  const next = new Date(from.getTime());
  if (unit === 'mo') {
    next.setUTCMonth(next.getUTCMonth() + period);
  } else if (unit === 'a') {
    next.setUTCFullYear(next.getUTCFullYear() + period);
  } else if (unit in UNIT_DAYS) {
    next.setTime(next.getTime() + period * (UNIT_DAYS[unit] as number) * 86_400_000);
  } else {
    return undefined;
  }
  return next.toISOString();
}

/** Made by the platform: a bot wrote it, or a clinician changed its status (the policy lets her do no more). */
const platformMade = (appointment: Appointment): boolean => {
  const author = appointment.meta?.author?.reference ?? '';
  return author.startsWith('Bot/') || author.startsWith('Practitioner/');
};
const isBots = (resource: { meta?: { author?: Reference } }) =>
  resource.meta?.author?.reference?.startsWith('Bot/') ?? false;

const put = (
  resource: Appointment | ServiceRequest | CarePlan,
  read: { resourceType: string; id?: string; meta?: { versionId?: string } },
): BundleEntry => ({
  resource,
  request: { method: 'PUT', url: `${read.resourceType}/${read.id}`, ifMatch: `W/"${read.meta?.versionId}"` },
});

/** Writes one transaction; false when another write came first (If-Match). */
async function written(medplum: MedplumClient, entries: BundleEntry[]): Promise<boolean> {
  try {
    await medplum.executeBatch({ resourceType: 'Bundle', type: 'transaction', entry: entries } as Bundle);
    return true;
  } catch (err) {
    if (lostRace(err)) {
      return false;
    }
    throw err;
  }
}
