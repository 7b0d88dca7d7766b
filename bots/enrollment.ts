import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  Bundle,
  BundleEntry,
  CarePlan,
  CarePlanActivity,
  EpisodeOfCare,
  MedicationRequest,
  Patient,
  PlanDefinition,
  Slot,
} from '@medplum/fhirtypes';
import { EXTENSIONS, START_ENDPOINT, SYSTEMS } from '../contracts/systems';
import { absent } from './lib/absent';
import { contextNotFound, requireAgreements } from './lib/agreements';
import { offeredPlan, planTypeOf } from './lib/catalog';
import { type Enrollment, enrollmentAnswer, enrollmentIn, episodeOfPlan, OPEN } from './lib/enrollments';
import { claimEpisode, episodeByKey, episodeKey, episodeTag, publishedDefinition } from './lib/journey';
import { issueEntries, tasksOf } from './lib/plans';
import { clinicianTask, tenantQueue } from './lib/queues';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { searchAll } from './lib/search';
import { patientWorkflow } from './lib/trust';

export type EnrollmentResult = BotResult<Enrollment>;

/**
 * Enrollment in a program (JOURNEY E): `POST /v1/enrollments` (a draft CarePlan in a journey of its own,
 * one per patient and program), `/activate` (draft -> active, its first tasks issued) and `DELETE`
 * (revoked, its open tasks cancelled). Each checks first and writes one transaction anchored under
 * If-Match (the episode on enrolling, the CarePlan after), so concurrent identical calls give one result.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<EnrollmentResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'enrollment');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  const input = start.input;
  const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
  if (input.operation === 'enroll') {
    return enroll(medplum, patient, input.healthcareService);
  }
  const plan = (await medplum.readResource('CarePlan', input.carePlan).catch(absent)) as
    | (CarePlan & { id: string })
    | undefined;
  if (!plan || plan.subject?.reference !== `Patient/${patientId}`) {
    return contextNotFound();
  }
  return input.operation === 'activate' ? activate(medplum, patient, plan) : unenroll(medplum, patient, plan);
}

async function enroll(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  service: string,
): Promise<EnrollmentResult> {
  const offered = await offeredPlan(medplum, service, patient);
  if (!offered) {
    return contextNotFound();
  }
  const { plan, canonical } = offered;
  const type = planTypeOf(plan);
  if (type === 'clinical-protocol') {
    return fail(409, 'review_required', 'A clinical protocol is requested for a clinician’s review, not enrolled in', {
      use: START_ENDPOINT['clinical-protocol'],
    });
  }
  if (type !== 'program') {
    return fail(409, 'invalid_state', 'This offering is not a program', {
      state: type ?? 'unknown',
      ...(type ? { use: START_ENDPOINT[type] } : {}),
    });
  }
  const gate = await requireAgreements(medplum, patient.id, { healthcareService: service });
  if (gate) {
    return gate;
  }
  const key = episodeKey(patient.id, plan.url as string);
  for (let attempt = 0; attempt < 2; attempt++) {
    const episode =
      (await episodeByKey(medplum, patient.id, key)) ?? (await claimEpisode(medplum, patient, key, canonical));
    if (!episode) {
      break;
    }
    const current = await enrollmentIn(medplum, episode, patient.id);
    if (current) {
      return enrollmentAnswer(medplum, current, episode, false);
    }
    const tag = episodeTag(episode.id as string);
    const now = new Date().toISOString();
    const draft: CarePlan = {
      resourceType: 'CarePlan',
      meta: { tag: [tag] },
      status: 'draft',
      intent: 'plan',
      title: plan.title,
      subject: { reference: `Patient/${patient.id}` },
      instantiatesCanonical: [canonical],
      author: { reference: `Patient/${patient.id}` },
      created: now,
      activity: activitiesOf(plan),
    };
    // The episode is the anchor: its revision moves under If-Match, so of two enrollments at once one
    // writes; a re-enrollment after a revoked one re-opens the same journey with the current version.
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: {
            ...episode,
            status: 'planned',
            extension: [
              ...(episode.extension ?? []).filter(
                (e) => e.url !== EXTENSIONS.journeyRevision && e.url !== EXTENSIONS.episodePlan,
              ),
              { url: EXTENSIONS.episodePlan, valueCanonical: canonical },
              { url: EXTENSIONS.journeyRevision, valueInteger: revisionOf(episode) + 1 },
            ],
            meta: { ...episode.meta, tag: [...(episode.meta?.tag ?? []).filter((t) => t.system !== tag.system), tag] },
          } as EpisodeOfCare,
          request: { method: 'PUT', url: `EpisodeOfCare/${episode.id}`, ifMatch: `W/"${episode.meta?.versionId}"` },
        },
        { resource: draft, request: { method: 'POST', url: 'CarePlan' } },
      ],
    };
    try {
      const response = await medplum.executeBatch(bundle);
      const [saved, created] = (response.entry ?? []).map((e) => e.resource);
      return enrollmentAnswer(medplum, created as CarePlan, saved as EpisodeOfCare, true);
    } catch (err) {
      if (!lostRace(err)) {
        throw err;
      }
      // A concurrent enrollment won: its plan is the answer (read again, once).
    }
  }
  return fail(409, 'invalid_state', 'This enrollment changed while it was being made; try again', {
    state: 'conflict',
  });
}

async function activate(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  plan: CarePlan & { id: string },
): Promise<EnrollmentResult> {
  const episode = await episodeOfPlan(medplum, plan, patient.id);
  if (plan.status === 'active') {
    return enrollmentAnswer(medplum, plan, episode, false);
  }
  if (plan.status !== 'draft' || !episode) {
    return fail(409, 'invalid_state', `This enrollment is ${plan.status}`, { state: plan.status });
  }
  const gate = await requireAgreements(medplum, patient.id, { carePlan: `CarePlan/${plan.id}` });
  if (gate) {
    return gate;
  }
  const organization = patient.managingOrganization?.reference;
  const canonical = plan.instantiatesCanonical?.[0] ?? '';
  const program = await publishedDefinition<PlanDefinition>(medplum, 'PlanDefinition', canonical, organization);
  const issued = program ? await tasksOf(medplum, program.action ?? [], organization) : undefined;
  if (!issued) {
    return fail(409, 'invalid_state', 'This program cannot be started: its definitions are not published to you', {
      state: 'unavailable',
    });
  }
  const now = new Date().toISOString();
  const tag = episodeTag(episode.id as string);
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        resource: { ...plan, status: 'active', period: { start: now } },
        request: { method: 'PUT', url: `CarePlan/${plan.id}`, ifMatch: `W/"${plan.meta?.versionId}"` },
      },
      {
        resource: { ...episode, status: 'active', period: { start: now } },
        request: { method: 'PUT', url: `EpisodeOfCare/${episode.id}`, ifMatch: `W/"${episode.meta?.versionId}"` },
      },
      ...issueEntries(issued, {
        patient: `Patient/${patient.id}`,
        carePlan: `CarePlan/${plan.id}`,
        tags: [tag],
        now,
      }),
    ],
  };
  try {
    const response = await medplum.executeBatch(bundle);
    const [saved, savedEpisode] = (response.entry ?? []).map((e) => e.resource);
    return enrollmentAnswer(medplum, saved as CarePlan, savedEpisode as EpisodeOfCare, false);
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    const now2 = (await medplum.readResource('CarePlan', plan.id)) as CarePlan;
    return now2.status === 'active'
      ? enrollmentAnswer(medplum, now2, await episodeOfPlan(medplum, now2, patient.id), false)
      : fail(409, 'invalid_state', 'This enrollment changed while it was being activated; try again', {
          state: now2.status,
        });
  }
}

async function unenroll(
  medplum: MedplumClient,
  patient: Patient & { id: string },
  plan: CarePlan & { id: string },
): Promise<EnrollmentResult> {
  const episode = await episodeOfPlan(medplum, plan, patient.id);
  if (plan.status === 'revoked') {
    return enrollmentAnswer(medplum, plan, episode, false);
  }
  if (plan.status !== 'draft' && plan.status !== 'active') {
    return fail(409, 'invalid_state', `This plan is ${plan.status}`, { state: plan.status });
  }
  const open = (await searchAll(medplum, 'Task', { 'based-on': `CarePlan/${plan.id}` })).filter(
    (t) => t.for?.reference === `Patient/${patient.id}` && OPEN.includes(t.status),
  );
  const now = new Date().toISOString();
  const entries: BundleEntry[] = [
    {
      resource: { ...plan, status: 'revoked', period: { ...plan.period, end: now } },
      request: { method: 'PUT', url: `CarePlan/${plan.id}`, ifMatch: `W/"${plan.meta?.versionId}"` },
    },
    ...open.map(
      (task): BundleEntry => ({
        resource: {
          ...task,
          status: 'cancelled',
          statusReason: { text: 'unenrolled' },
          lastModified: now,
        },
        request: { method: 'PUT', url: `Task/${task.id}`, ifMatch: `W/"${task.meta?.versionId}"` },
      }),
    ),
  ];
  // The visits the plan still asks for are withdrawn with it.
  const visits = (await searchAll(medplum, 'ServiceRequest', { 'based-on': `CarePlan/${plan.id}` })).filter(
    (r) => r.subject?.reference === `Patient/${patient.id}` && r.status === 'active' && r.intent === 'plan',
  );
  for (const visit of visits) {
    entries.push({
      resource: { ...visit, status: 'revoked' },
      request: { method: 'PUT', url: `ServiceRequest/${visit.id}`, ifMatch: `W/"${visit.meta?.versionId}"` },
    });
  }
  // Its future booked visits are cancelled with their slots freed (declared in the document).
  const nowIso = new Date().toISOString();
  const booked =
    visits.length === 0
      ? []
      : (
          await searchAll(medplum, 'Appointment', {
            'based-on': visits.map((v) => `ServiceRequest/${v.id}`).join(','),
            status: 'booked',
          })
        ).filter(
          (a) =>
            (a.end ?? '') > nowIso &&
            a.meta?.author?.reference?.startsWith('Bot/') &&
            a.participant?.some((p) => p.actor?.reference === `Patient/${patient.id}`),
        );
  for (const appointment of booked) {
    entries.push({
      resource: {
        ...appointment,
        status: 'cancelled',
        cancelationReason: { coding: [{ system: SYSTEMS.cancelReason, code: 'unenrolled' }], text: 'unenrolled' },
      },
      request: { method: 'PUT', url: `Appointment/${appointment.id}`, ifMatch: `W/"${appointment.meta?.versionId}"` },
    });
    const [slotType, slotId] = (appointment.slot?.[0]?.reference ?? '').split('/');
    const slot =
      slotType === 'Slot' && slotId
        ? ((await medplum.readResource('Slot', slotId).catch(absent)) as Slot | undefined)
        : undefined;
    if (slot?.resourceType === 'Slot' && slot.status === 'busy') {
      entries.push({
        resource: { ...slot, status: 'free' },
        request: { method: 'PUT', url: `Slot/${slot.id}`, ifMatch: `W/"${slot.meta?.versionId}"` },
      });
    }
    for (const encounter of await searchAll(medplum, 'Encounter', { appointment: `Appointment/${appointment.id}` })) {
      if (encounter.status === 'planned' && encounter.subject?.reference === `Patient/${patient.id}`) {
        entries.push({
          resource: { ...encounter, status: 'cancelled' },
          request: { method: 'PUT', url: `Encounter/${encounter.id}`, ifMatch: `W/"${encounter.meta?.versionId}"` },
        });
      }
    }
  }
  if (episode && episode.status !== 'finished') {
    entries.push({
      resource: { ...episode, status: 'finished', period: { ...episode.period, end: now } },
      request: { method: 'PUT', url: `EpisodeOfCare/${episode.id}`, ifMatch: `W/"${episode.meta?.versionId}"` },
    });
  }
  // Placed medication orders stay: stopping a medicine is a clinician's decision, so they are told.
  if (await hasPlacedOrders(medplum, plan, patient.id)) {
    entries.push(
      clinicianTask({
        code: 'review-unenrollment',
        description: 'The patient unenrolled from a plan with placed medication orders',
        patient,
        queue: await tenantQueue(medplum, patient, 'review-unenrollment'),
        focus: { reference: `CarePlan/${plan.id}` },
        tags: (plan.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode),
      }),
    );
  }
  try {
    const response = await medplum.executeBatch({ resourceType: 'Bundle', type: 'transaction', entry: entries });
    const saved = response.entry?.[0]?.resource as CarePlan;
    return {
      ...(await enrollmentAnswer(medplum, saved, episode, false)),
      cancelledTasks: open.map((t) => `Task/${t.id}`),
      ...(booked.length > 0 ? { cancelledAppointments: booked.map((a) => `Appointment/${a.id}`) } : {}),
    } as EnrollmentResult;
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    const now2 = (await medplum.readResource('CarePlan', plan.id)) as CarePlan;
    return now2.status === 'revoked'
      ? enrollmentAnswer(medplum, now2, episode, false)
      : fail(409, 'invalid_state', 'This plan changed while it was being revoked; try again', { state: now2.status });
  }
}

/** One activity per action of the program, not started, with its timing (what activation will issue). */
function activitiesOf(plan: PlanDefinition): CarePlanActivity[] {
  return (plan.action ?? []).flatMap((action) =>
    action.definitionCanonical
      ? [
          {
            detail: {
              kind: 'Task' as const,
              instantiatesCanonical: [action.definitionCanonical],
              status: 'not-started' as const,
              description: action.title,
              ...(action.timingTiming ? { scheduledTiming: action.timingTiming } : {}),
            },
          },
        ]
      : [],
  );
}

/** Her enrollment (draft or active) in an episode, if there is one. */
/** Whether the plan carries a placed medication order (an accepted treatment whose order she placed). */
async function hasPlacedOrders(medplum: MedplumClient, plan: CarePlan, patientId: string): Promise<boolean> {
  for (const activity of plan.activity ?? []) {
    const [type, id] = (activity.reference?.reference ?? '').split('/');
    if (type === 'MedicationRequest' && id) {
      const request = (await medplum.readResource('MedicationRequest', id).catch(absent)) as
        | MedicationRequest
        | undefined;
      if (
        request?.subject?.reference === `Patient/${patientId}` &&
        request.intent === 'order' &&
        request.status === 'active'
      ) {
        return true;
      }
    }
  }
  return false;
}

const revisionOf = (episode: EpisodeOfCare): number =>
  episode.extension?.find((e) => e.url === EXTENSIONS.journeyRevision)?.valueInteger ?? 0;
