import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Bundle, EpisodeOfCare, ObservationDefinition, Patient, Task } from '@medplum/fhirtypes';
import { START_ENDPOINT } from '../contracts/systems';
import { contextNotFound, requireAgreements } from './lib/agreements';
import { assessmentAnswer, assessmentAnswerWith, type StartedAssessment } from './lib/assessments';
import { offeredPlan, planTypeOf } from './lib/catalog';
import { claimEpisode, episodeByKey, episodeKey, episodeTag, PATIENT_TASK_TAG } from './lib/journey';
import { tasksOf } from './lib/plans';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type StartAssessmentResult = BotResult<StartedAssessment>;

/**
 * POST /v1/assessments: starts the assessment a catalog offering fronts, or resumes it (JOURNEY B).
 * Checks (nothing is written before all pass): the offering is published to the patient's tenant and
 * available where she lives, it fronts an assessment, and the gate (required agreements) is met. Then,
 * in two steps, because a conditional entry makes a transaction serializable on Medplum:
 * 1. a conditional create of the EpisodeOfCare (`planned`), keyed (patient, plan url): the claim;
 * 2. one transaction that moves it `planned -> active` under If-Match and issues the tasks.
 * Whoever loses either step (a concurrent identical call) re-reads and answers the winner's episode.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<StartAssessmentResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'start-assessment');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  // The gate's reads start with hers (fewer round trips); its answer still comes after the offering's checks.
  const gating = requireAgreements(medplum, patientId, { healthcareService: start.input.healthcareService });
  gating.catch(() => undefined);
  const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
  const organization = patient.managingOrganization?.reference;
  const offered = await offeredPlan(medplum, start.input.healthcareService, patient);
  if (!offered) {
    return contextNotFound();
  }
  const { plan, canonical } = offered;
  const type = planTypeOf(plan);
  if (type !== 'assessment') {
    return fail(409, 'invalid_state', 'This offering is not an assessment', {
      state: type ?? 'unknown',
      ...(type ? { use: START_ENDPOINT[type] } : {}),
    });
  }
  const gate = await gating;
  if (gate) {
    return gate;
  }
  const key = episodeKey(patientId, plan.url as string);
  // Everything the tasks need is read before anything is written (a broken definition writes nothing),
  // at once with the episode, whether or not it exists yet.
  const definitions = new Map<string, ObservationDefinition>();
  const [existing, issued] = await Promise.all([
    episodeByKey(medplum, patientId, key),
    tasksOf(medplum, plan.action ?? [], organization, definitions),
  ]);
  if (existing && existing.status !== 'planned') {
    return assessmentAnswer(medplum, patientId, existing, false, plan);
  }
  if (!issued?.length) {
    return fail(409, 'invalid_state', 'This assessment cannot be started: its definitions are not published', {
      state: 'unavailable',
    });
  }
  const claimed = existing ?? (await claimEpisode(medplum, patient, key, canonical));
  if (!claimed) {
    return raceLost();
  }
  if (claimed.status !== 'planned') {
    return assessmentAnswer(medplum, patientId, claimed, false, plan);
  }
  const tag = episodeTag(claimed.id as string);
  const now = new Date().toISOString();
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        resource: {
          ...claimed,
          status: 'active',
          period: { start: now },
          meta: { ...claimed.meta, tag: withTag(claimed.meta?.tag, tag) },
        } as EpisodeOfCare,
        request: { method: 'PUT', url: `EpisodeOfCare/${claimed.id}`, ifMatch: `W/"${claimed.meta?.versionId}"` },
      },
      ...issued.map((task) => ({
        resource: {
          ...task,
          for: { reference: `Patient/${patientId}` },
          owner: { reference: `Patient/${patientId}` },
          authoredOn: now,
          meta: { tag: [PATIENT_TASK_TAG, tag] },
        } as Task,
        request: { method: 'POST' as const, url: 'Task' },
      })),
    ],
  };
  let written: Bundle;
  try {
    written = await medplum.executeBatch(bundle);
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    const winner = await episodeByKey(medplum, patientId, key);
    return winner?.status === 'active' ? assessmentAnswer(medplum, patientId, winner, false, plan) : raceLost();
  }
  // The transaction answered what it wrote: the episode, then the tasks in the plan's order. Read back
  // only if it did not (a server that answers without the resources).
  const [episode, ...tasks] = (written.entry ?? []).map((e) => e.resource);
  if (episode?.resourceType === 'EpisodeOfCare' && tasks.length === issued.length && tasks.every(isTask)) {
    return assessmentAnswerWith(medplum, episode, tasks as Task[], true, definitions);
  }
  const started = await episodeByKey(medplum, patientId, key);
  return started ? assessmentAnswer(medplum, patientId, started, true, plan) : raceLost();
}

const isTask = (resource: unknown): resource is Task => (resource as Task | undefined)?.resourceType === 'Task';

const raceLost = () =>
  fail(409, 'invalid_state', 'This assessment changed while it was being started; try again', { state: 'conflict' });

function withTag<T extends { system?: string; code?: string }>(tags: T[] | undefined, tag: T): T[] {
  const kept = (tags ?? []).filter((t) => t.system !== tag.system);
  return [...kept, tag];
}
