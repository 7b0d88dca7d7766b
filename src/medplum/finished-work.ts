import type { MedplumClient } from '@medplum/core';
import type {
  CarePlan,
  EpisodeOfCare,
  HealthcareService,
  ObservationDefinition,
  Patient,
  PlanDefinition,
  Reference,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { absent } from '../../bots/lib/absent';
import { type AgreementCatalog, patientAgreements } from '../../bots/lib/agreements';
import { assessmentAnswer, type StartedAssessment } from '../../bots/lib/assessments';
import { canonicalJson } from '../../bots/lib/canonical';
import { frontedCanonical, offeredPlan, planTypeOf } from '../../bots/lib/catalog';
import { type Enrollment, enrollmentAnswer, enrollmentIn, episodeOfPlan } from '../../bots/lib/enrollments';
import {
  type CompletedTask,
  completedTask,
  completionDigest,
  isHerTask,
  orderDecisionsTask,
  type PlacedOrder,
  placedOrder,
} from '../../bots/lib/finished';
import { episodeByKey, episodeKey } from '../../bots/lib/journey';
import { readingOnce } from '../../bots/lib/reads';
import { openRequest, proposalFor } from '../../bots/lib/requests';
import {
  type AppointmentView,
  appointmentView,
  bookedBy,
  isVisitTask,
  ownAppointment,
  replacementOf,
  resumed,
  segmentChosen,
  segmentsOf,
} from '../../bots/lib/visits';
import { base64url } from '../shared/base64url';
import { type CatalogCache, cachedAgreementCatalog, cachedDefinitions } from './catalog-cache';

/**
 * A repeat of finished work (a client's retry, a second tap) answered by the gateway from her own reads,
 * with her token and her own FHIR quota, instead of a bot run on the platform's. It
 * answers only when her record shows the work done with this very payload, and then exactly what the
 * workflow bot answers a replay, from the same functions (bots/lib/finished.ts). Anything else (not
 * done, done with another payload, not hers, not found) is undefined, and the bot decides as before:
 * it stays the one authority on every refusal and on every write.
 */

/** Her client, and her tenant's catalog as the gateway reads it (src/medplum/catalog-cache.ts). */
export interface Her {
  client: MedplumClient;
  catalog: (organization: string | undefined) => AgreementCatalog;
  /** Her tasks' versioned definitions, kept as read (src/medplum/catalog-cache.ts `cachedDefinitions`). */
  definitions: (reference: Reference<ObservationDefinition>) => Promise<ObservationDefinition>;
}

/** Her reads for a resume: her client, and the tenant's catalog and her definitions through the cache. */
export const herReads = (catalog: CatalogCache, client: MedplumClient, patientId: string): Her => ({
  client,
  catalog: cachedAgreementCatalog(catalog, client),
  definitions: cachedDefinitions(catalog, client, patientId),
});

/** `POST /v1/tasks/{id}/complete` again, with the payload that completed the task (bots/complete-task.ts). */
export async function repeatedCompletion(
  medplum: MedplumClient,
  patientId: string,
  taskId: string,
  payload: unknown,
): Promise<CompletedTask | undefined> {
  const task = (await medplum.readResource('Task', taskId).catch(absent)) as Task | undefined;
  if (
    !isHerTask(task, patientId) ||
    task.status !== 'completed' ||
    completionDigest(task) !== (await fingerprint(payload))
  ) {
    return undefined;
  }
  return withoutFlags(completedTask(task));
}

/** `POST /v1/orders/{id}/decisions` again, with the decisions that placed the order (bots/decide-order.ts). */
export async function repeatedOrderDecisions(
  medplum: MedplumClient,
  patientId: string,
  orderId: string,
  decisions: { items: unknown },
): Promise<PlacedOrder | undefined> {
  const own = `Patient/${patientId}`;
  const [group, task] = await Promise.all([
    medplum.readResource('RequestGroup', orderId).catch(absent) as Promise<RequestGroup | undefined>,
    // Only a completed task's history is read: a first placement costs one search beside the read.
    orderDecisionsTask(medplum, orderId, own, { only: (t) => t.status === 'completed' }),
  ]);
  if (
    group?.subject?.reference !== own ||
    task?.status !== 'completed' ||
    completionDigest(task) !== (await fingerprint({ items: decisions.items }))
  ) {
    return undefined;
  }
  return withoutFlags(placedOrder(task));
}

/** `POST /v1/appointments` again for a visit task it booked, on the same slot (none: an asynchronous review). */
export async function repeatedBooking(
  medplum: MedplumClient,
  patientId: string,
  booking: { task: string; slot?: string },
): Promise<AppointmentView | undefined> {
  const task = (await medplum.readResource('Task', booking.task.split('/')[1] ?? '').catch(absent)) as Task | undefined;
  if (!isHerTask(task, patientId) || task.status !== 'completed' || !isVisitTask(task)) {
    return undefined;
  }
  const appointment = await ownAppointment(medplum, bookedBy(task).split('/')[1] ?? '', patientId);
  const slot = booking.slot?.split('/')[1];
  return appointment && appointment.slot?.[0]?.reference === (slot ? `Slot/${slot}` : undefined)
    ? withoutFlags(await appointmentView(medplum, appointment, false))
    : undefined;
}

/** A reschedule again, to the slot its replacement holds. */
export async function repeatedReschedule(
  medplum: MedplumClient,
  patientId: string,
  appointmentId: string,
  slot: string,
): Promise<AppointmentView | undefined> {
  const original = await ownAppointment(medplum, appointmentId, patientId);
  const replacement =
    original?.status === 'cancelled' ? await replacementOf(medplum, original, `Patient/${patientId}`) : undefined;
  return replacement && replacement.slot?.[0]?.reference === `Slot/${slot.split('/')[1]}`
    ? withoutFlags(await appointmentView(medplum, replacement, false))
    : undefined;
}

/** A cancellation again (or of a visit rescheduled away): the visit as it is, cancelled. */
export async function repeatedCancel(
  medplum: MedplumClient,
  patientId: string,
  appointmentId: string,
): Promise<AppointmentView | undefined> {
  const appointment = await ownAppointment(medplum, appointmentId, patientId);
  return appointment?.status === 'cancelled'
    ? withoutFlags(await appointmentView(medplum, appointment, false))
    : undefined;
}

/** Starting a segment already in progress: resumed. */
export async function resumedSegment(
  medplum: MedplumClient,
  patientId: string,
  appointmentId: string,
  segment: string | undefined,
): Promise<Omit<ReturnType<typeof resumed>, 'ok'> | undefined> {
  const appointment = await ownAppointment(medplum, appointmentId, patientId);
  if (appointment?.status !== 'booked' && appointment?.status !== 'arrived') {
    return undefined;
  }
  const { chosen } = segmentChosen(await segmentsOf(medplum, appointment), segment);
  return chosen?.status === 'in-progress' ? withoutFlags(resumed(appointment, chosen)) : undefined;
}

/**
 * `POST /v1/assessments` for an assessment she has started: resumed, as the bot resumes it, after the
 * checks the bot makes first (`offeredJourney`).
 */
export async function resumedAssessment(
  her: Her,
  patientId: string,
  healthcareService: string,
): Promise<Omit<StartedAssessment, 'created'> | undefined> {
  const found = await offeredJourney(her, patientId, healthcareService, 'assessment');
  if (found?.episode?.status !== 'active' && found?.episode?.status !== 'finished') {
    return undefined;
  }
  const answer = await assessmentAnswer(found.medplum, patientId, found.episode, false, found.plan, her.definitions);
  return answer.ok ? withoutFlags(answer) : undefined;
}

/**
 * `POST /v1/enrollments` for a program she is enrolled in (a draft or active plan): answered as it is, as
 * the bot answers it, after the checks the bot makes first (`offeredJourney`).
 */
export async function currentEnrollment(
  her: Her,
  patientId: string,
  healthcareService: string,
): Promise<Omit<Enrollment, 'created'> | undefined> {
  const found = await offeredJourney(her, patientId, healthcareService, 'program');
  const plan = found?.episode ? await enrollmentIn(found.medplum, found.episode, patientId) : undefined;
  return plan && found?.episode
    ? withoutFlags(await enrollmentAnswer(found.medplum, plan, found.episode, false, her.definitions))
    : undefined;
}

/**
 * `POST /v1/requests` for an item she has an open request for: that request and its review task, as the
 * request-review bot answers it (the item resolved against her catalog first, as the bot resolves it).
 */
export async function openRequestAgain(
  client: MedplumClient,
  patientId: string,
  input: { medication?: string; treatmentOption?: string; protocol?: string },
): Promise<{ request: string; task: string } | undefined> {
  const medplum = readingOnce(client);
  const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
  const resolved = await proposalFor(medplum, patient, input);
  return resolved.ok ? openRequest(medplum, resolved.proposal.resourceType, resolved.key, patientId) : undefined;
}

/**
 * Her journey (episode) for an offering, when it is one the bot would act on: published to her tenant and
 * available where she lives, of the plan type the endpoint starts, and the gate met; each read with her
 * token, each once (bots/lib/reads.ts: her Patient serves the gate and the offering's check). The gate's
 * catalog part comes through the tenant's short-lived copies, as for the requirements check
 * (src/medplum/catalog-cache.ts): the answer writes nothing, and the bot's gate before any write reads fresh.
 */
async function offeredJourney(
  { client, catalog }: Her,
  patientId: string,
  healthcareService: string,
  type: 'assessment' | 'program',
): Promise<{ medplum: MedplumClient; plan: PlanDefinition; episode: EpisodeOfCare } | undefined> {
  const medplum = readingOnce(client);
  // Her Patient serves the offering's check and the gate (read once), whatever comes of the rest.
  const reading = medplum.readResource('Patient', patientId);
  reading.catch(() => undefined);
  // Her journey for the plan the offering fronts, looked for first: with none there is nothing to answer
  // as it is, and a first start goes to the bot after two reads in turn, without the gate's.
  const service = (await medplum
    .readResource('HealthcareService', healthcareService.split('/')[1] ?? '')
    .catch(absent)) as HealthcareService | undefined;
  const url = service ? frontedCanonical(service)?.split('|')[0] : undefined;
  const episode = url ? await episodeByKey(medplum, patientId, episodeKey(patientId, url)) : undefined;
  if (!episode) {
    return undefined;
  }
  const gating = patientAgreements(medplum, patientId, { healthcareService }, catalog);
  gating.catch(() => undefined);
  const offered = await offeredPlan(medplum, healthcareService, (await reading) as Patient);
  if (!offered || offered.plan.url !== url || planTypeOf(offered.plan) !== type || (await gating)?.unmet.length !== 0) {
    return undefined;
  }
  return { medplum, plan: offered.plan, episode };
}

/** `/activate` on a plan already active, or `DELETE` on one already revoked: the plan as it is. */
export async function settledEnrollment(
  medplum: MedplumClient,
  patientId: string,
  carePlanId: string,
  settled: 'active' | 'revoked',
): Promise<Omit<Enrollment, 'created'> | undefined> {
  const plan = (await medplum.readResource('CarePlan', carePlanId).catch(absent)) as CarePlan | undefined;
  if (plan?.subject?.reference !== `Patient/${patientId}` || plan.status !== settled) {
    return undefined;
  }
  return withoutFlags(await enrollmentAnswer(medplum, plan, await episodeOfPlan(medplum, plan, patientId), false));
}

/** An answer without the bot result's `ok` and the `created` flag (which only picks 201 or 200). */
function withoutFlags<T extends { ok: true; created?: boolean }>(answer: T): Omit<T, 'ok' | 'created'> {
  const { ok: _ok, created: _created, ...rest } = answer;
  return rest;
}

/** The bots' payload fingerprint (bots/lib/digest.ts: SHA-256 of the canonical JSON, base64url), with WebCrypto. */
export async function fingerprint(payload: unknown): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonicalJson(payload)));
  return base64url(new Uint8Array(digest));
}
