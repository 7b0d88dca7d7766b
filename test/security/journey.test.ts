import type { EpisodeOfCare, Patient, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { clinicianActor, direct, fhirPath, patientActor } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * The journey's keys (JOURNEY section 0), attacked directly on Medplum: the EpisodeOfCare's idempotency
 * key (`episode-key`, which start-assessment resumes by), the join tag (`episode`, which every bot reads a
 * journey's tasks by) and the patient-task tag. Only the workflow bots write them; a clinician (of either
 * tenant) or a patient who could would hijack a patient's start, or put their own task into her journey.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

interface Assessment {
  episodeOfCare: string;
  assessment: string;
  status: string;
  tasks: { task: string; kind: string; description?: string }[];
}

const weightIntake = async (patient: DemoActor): Promise<{ healthcareService: string; assessment: string }> => {
  const { protocols } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string; assessment?: string }[];
  };
  const found = protocols.find((o) => o.assessment?.includes('assessments/weight-intake'));
  if (!found?.assessment) {
    throw new Error('the weight intake is not in the catalog');
  }
  const query = new URLSearchParams({ healthcareService: found.healthcareService }).toString();
  const { unmet } = (await gw.call('GET', `/v1/agreements/requirements?${query}`, { token: patient.token })).body as {
    unmet: unknown[];
  };
  if (unmet.length > 0) {
    await gw.call('POST', '/v1/agreements/acceptances', { token: patient.token, body: { agreements: unmet } });
  }
  return { healthcareService: found.healthcareService, assessment: found.assessment };
};

const start = (patient: DemoActor, healthcareService: string) =>
  gw.call('POST', '/v1/assessments', { token: patient.token, body: { healthcareService } });

const keyOf = (patient: DemoActor, assessment: string) => `Patient/${patient.patient.id};${assessment.split('|')[0]}`;

/** What the victim's start wrote must be hers: her episode, in her tenant, and her own tasks only. */
async function expectOwnJourney(patient: DemoActor, answer: Assessment): Promise<void> {
  const episode = await gw.backend.systemRepo.readReference<EpisodeOfCare>({ reference: answer.episodeOfCare });
  expect(episode.patient.reference).toBe(`Patient/${patient.patient.id}`);
  expect(episode.meta?.accounts).toEqual([{ reference: patient.patient.managingOrganization?.reference }]);
  expect(answer.tasks).toHaveLength(2);
  for (const { task } of answer.tasks) {
    const stored = await gw.backend.systemRepo.readReference<Task>({ reference: task });
    expect(stored.for?.reference).toBe(`Patient/${patient.patient.id}`);
    expect(stored.meta?.author?.reference).toMatch(/^Bot\//);
  }
}

describe('the journey keys are the workflow bots’ alone', () => {
  it("a clinician of the other tenant cannot claim a patient's episode key (src/provision/definition.ts JOURNEY_KEYS): her start is her own", async () => {
    const victim = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await weightIntake(victim);
    const attacker = clinicianActor(gw.backend, 'southridge');
    const carol = patientActor(gw.backend, 'carol');
    for (const status of ['active', 'planned'] as const) {
      const planted = await direct(gw.backend, attacker.token, 'POST', fhirPath('EpisodeOfCare'), {
        body: {
          resourceType: 'EpisodeOfCare',
          status,
          identifier: [{ system: SYSTEMS.episodeKey, value: keyOf(victim, weight.assessment) }],
          extension: [{ url: EXTENSIONS.episodePlan, valueCanonical: weight.assessment }],
          patient: { reference: carol.profile },
        } satisfies EpisodeOfCare,
      });
      expect(planted.status, status).toBe(403);
    }
    const started = await start(victim, weight.healthcareService);
    expect(started.status).toBe(201);
    await expectOwnJourney(victim, started.body as Assessment);
  });

  it('a clinician of either tenant cannot tag a task into a patient’s episode, nor strip or change its keys; keeping them, they still work on it', async () => {
    const victim = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await weightIntake(victim);
    const started = (await start(victim, weight.healthcareService)).body as Assessment;
    const episodeTag = { system: SYSTEMS.episode, code: started.episodeOfCare };
    const patientTag = { system: SYSTEMS.taskAudience, code: 'patient' };
    const own = clinicianActor(gw.backend, 'northwind');
    const other = clinicianActor(gw.backend, 'southridge');
    const task = (forPatient: string, tag: { system: string; code: string }[]): Task => ({
      resourceType: 'Task',
      status: 'ready',
      intent: 'order',
      description: 'planted',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'questionnaire' }] },
      for: { reference: forPatient },
      meta: { tag },
    });
    const attempts: [string, string, Task][] = [
      ['own tenant, episode tag', own.token, task(`Patient/${victim.patient.id}`, [episodeTag])],
      ['own tenant, patient-task tag', own.token, task(`Patient/${victim.patient.id}`, [patientTag])],
      ['other tenant, episode tag', other.token, task(patientActor(gw.backend, 'carol').profile, [episodeTag])],
    ];
    for (const [label, token, body] of attempts) {
      const planted = await direct(gw.backend, token, 'POST', fhirPath('Task'), { body });
      expect(planted.status, label).toBe(403);
    }
    // The bot's task and episode: stripping or changing a key is refused, an update keeping them is not.
    const issued = await gw.backend.systemRepo.readReference<Task>({ reference: started.tasks[0].task });
    const stripped = { ...issued, meta: { ...issued.meta, tag: [patientTag] } };
    expect((await direct(gw.backend, own.token, 'PUT', fhirPath(`Task/${issued.id}`), { body: stripped })).status).toBe(
      403,
    );
    // (What a task is and what the platform recorded on it stay as issued, WORK_AS_ISSUED: a note is hers.)
    const paused: Task = { ...issued, note: [{ text: 'paused by the clinician' }] };
    expect((await direct(gw.backend, own.token, 'PUT', fhirPath(`Task/${issued.id}`), { body: paused })).status).toBe(
      200,
    );
    const episode = await gw.backend.systemRepo.readReference<EpisodeOfCare>({ reference: started.episodeOfCare });
    const rekeyed: EpisodeOfCare = {
      ...episode,
      identifier: [{ system: SYSTEMS.episodeKey, value: `${keyOf(victim, weight.assessment)}-2` }],
    };
    const path = fhirPath(`EpisodeOfCare/${episode.id}`);
    expect((await direct(gw.backend, own.token, 'PUT', path, { body: rekeyed })).status).toBe(403);
    expect((await direct(gw.backend, own.token, 'PUT', path, { body: { ...episode, identifier: [] } })).status).toBe(
      403,
    );
    const resumed = await start(victim, weight.healthcareService);
    expect(resumed.status).toBe(200);
    expect((resumed.body as Assessment).tasks.map((t) => t.task)).toEqual(started.tasks.map((t) => t.task));
  });

  it('a patient cannot tag her own writes with a journey key (an answer into someone’s episode, herself as a task)', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await weightIntake(patient);
    const started = (await start(patient, weight.healthcareService)).body as Assessment;
    const answer = (tag: { system: string; code: string }[]): QuestionnaireResponse => ({
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
      questionnaire: 'https://patient-care.example/questionnaires/weight-history|1',
      subject: { reference: `Patient/${patient.patient.id}` },
      meta: { tag },
    });
    for (const tag of [
      { system: SYSTEMS.episode, code: started.episodeOfCare },
      { system: SYSTEMS.taskAudience, code: 'patient' },
    ]) {
      const written = await direct(gw.backend, patient.token, 'POST', fhirPath('QuestionnaireResponse'), {
        body: answer([tag]),
      });
      expect(written.status, tag.system).toBe(403);
    }
    expect(
      (await direct(gw.backend, patient.token, 'POST', fhirPath('QuestionnaireResponse'), { body: answer([]) })).status,
    ).toBe(201);
    const own = await gw.backend.systemRepo.readResource<Patient>('Patient', patient.patient.id);
    const tagged: Patient = {
      ...own,
      meta: { ...own.meta, tag: [{ system: SYSTEMS.episode, code: started.episodeOfCare }] },
    };
    expect(
      (await direct(gw.backend, patient.token, 'PUT', fhirPath(`Patient/${own.id}`), { body: tagged })).status,
    ).toBe(403);
  });
});

describe('start-assessment believes only the caller’s own episode and tasks', () => {
  it('an episode her clinician cancelled (keys kept, as the policy lets them) is not answered as active: 409 invalid_state', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await weightIntake(patient);
    const started = (await start(patient, weight.healthcareService)).body as Assessment;
    const clinician = clinicianActor(gw.backend, 'northwind');
    for (const status of ['cancelled', 'entered-in-error'] as const) {
      const episode = await gw.backend.systemRepo.readReference<EpisodeOfCare>({ reference: started.episodeOfCare });
      const path = fhirPath(`EpisodeOfCare/${episode.id}`);
      expect((await direct(gw.backend, clinician.token, 'PUT', path, { body: { ...episode, status } })).status).toBe(
        200,
      );
      const resumed = await start(patient, weight.healthcareService);
      expect(resumed.status, status).toBe(409);
      expect(resumed.body).toMatchObject({ error: { code: 'invalid_state', details: { state: status } } });
    }
  });

  it('an episode under her key that is not hers, or a task tagged with her episode that is not hers, is never answered', async () => {
    // Data the policies now refuse to patients and clinicians, as it could stand in a store written before
    // them (or by another bot): the bot must not resume it, nor show it.
    const victim = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await weightIntake(victim);
    const carol = patientActor(gw.backend, 'carol');
    const foreign = await gw.backend.systemRepo.createResource<EpisodeOfCare>({
      resourceType: 'EpisodeOfCare',
      meta: { project: gw.backend.project.id, accounts: [{ reference: carol.organization }] },
      status: 'active',
      identifier: [{ system: SYSTEMS.episodeKey, value: keyOf(victim, weight.assessment) }],
      extension: [{ url: EXTENSIONS.episodePlan, valueCanonical: weight.assessment }],
      patient: { reference: carol.profile },
    });
    const started = await start(victim, weight.healthcareService);
    expect(started.status).toBe(201);
    const answer = started.body as Assessment;
    expect(answer.episodeOfCare).not.toBe(`EpisodeOfCare/${foreign.id}`);
    await expectOwnJourney(victim, answer);

    await gw.backend.systemRepo.createResource<Task>({
      resourceType: 'Task',
      meta: {
        project: gw.backend.project.id,
        accounts: [{ reference: carol.organization }],
        tag: [
          { system: SYSTEMS.episode, code: answer.episodeOfCare },
          { system: SYSTEMS.taskAudience, code: 'patient' },
        ],
      },
      status: 'ready',
      intent: 'order',
      description: 'another patient’s task',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'questionnaire' }] },
      for: { reference: carol.profile },
      owner: { reference: carol.profile },
    });
    const resumed = await start(victim, weight.healthcareService);
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual(answer);
  });
});
