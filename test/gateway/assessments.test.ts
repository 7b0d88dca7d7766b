import type { EpisodeOfCare, HealthcareService, PlanDefinition, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { type StartedAssessment, storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';

/** POST /v1/assessments (bots/start-assessment.ts): start, resume, the gate, the wrong offerings, races. */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

interface Offering {
  healthcareService: string;
  type: string;
  assessment?: string;
  protocol?: string;
  name: string;
}

type Assessment = StartedAssessment & { status: string };

const catalog = async (patient: DemoActor): Promise<Offering[]> => {
  const answer = await gw.call('GET', '/v1/protocols', { token: patient.token });
  expect(answer.status).toBe(200);
  return (answer.body as { protocols: Offering[] }).protocols;
};

const offering = async (patient: DemoActor, assessmentPath: string): Promise<Offering> => {
  const found = (await catalog(patient)).find((o) => (o.assessment ?? o.protocol ?? '').includes(assessmentPath));
  if (!found) {
    throw new Error(`${assessmentPath} is not in the catalog`);
  }
  return found;
};

const start = (patient: DemoActor, healthcareService: string) =>
  gw.call('POST', '/v1/assessments', { token: patient.token, body: { healthcareService } });

const store = () => storeSnapshot(gw.backend);

async function acceptAll(patient: DemoActor, context: Record<string, string>): Promise<void> {
  const query = new URLSearchParams(context).toString();
  const { unmet } = (await gw.call('GET', `/v1/agreements/requirements?${query}`, { token: patient.token })).body as {
    unmet: unknown[];
  };
  if (unmet.length > 0) {
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements: unmet },
    });
    expect(accepted.status).toBe(200);
  }
}

describe('POST /v1/assessments', () => {
  it('is gated: unmet agreements answer 409 consent_required with the requirements entries, and nothing is written', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await offering(patient, 'assessments/weight-intake');
    const requirements = await gw.call(
      'GET',
      `/v1/agreements/requirements?healthcareService=${encodeURIComponent(weight.healthcareService)}`,
      { token: patient.token },
    );
    const { unmet } = requirements.body as { unmet: unknown[] };
    expect(unmet.length).toBeGreaterThan(0);
    const before = store();
    const refused = await start(patient, weight.healthcareService);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'consent_required', details: { agreements: unmet } } });
    expect(store()).toEqual(before);
  });

  it('starts once (201) and resumes (200) with the same episode and tasks, pinned, joined by the episode tag', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const weight = await offering(patient, 'assessments/weight-intake');
    await acceptAll(patient, { healthcareService: weight.healthcareService });

    const started = await start(patient, weight.healthcareService);
    expect(started.status).toBe(201);
    const assessment = started.body as Assessment;
    expect(assessment).toMatchObject({
      assessment: weight.assessment,
      status: 'active',
      episodeOfCare: expect.stringMatching(/^EpisodeOfCare\//),
    });
    expect(assessment.tasks.map((t) => [t.kind, t.status])).toEqual([
      ['questionnaire', 'ready'],
      ['measurement', 'ready'],
    ]);
    expect(assessment.tasks[0].questionnaire).toBe('https://patient-care.example/questionnaires/weight-history|1');
    expect(assessment.tasks[1].measurements).toEqual([{ code: 'http://loinc.org|29463-7', units: ['kg', '[lb_av]'] }]);

    const resumed = await start(patient, weight.healthcareService);
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual(assessment);

    // The journey join key: every resource of it found by one tag, through the record plane.
    const tag = encodeURIComponent(`${SYSTEMS.episode}|${assessment.episodeOfCare}`);
    const tasks = await gw.call('GET', `/v1/fhir/Task?_tag=${tag}`, { token: patient.token });
    expect(
      ((tasks.body as { entry?: { resource: Task }[] }).entry ?? []).map((e) => `Task/${e.resource.id}`).sort(),
    ).toEqual(assessment.tasks.map((t) => t.task).sort());
    const episodes = await gw.call('GET', `/v1/fhir/EpisodeOfCare?_tag=${tag}`, { token: patient.token });
    const [episode] = ((episodes.body as { entry?: { resource: EpisodeOfCare }[] }).entry ?? []).map((e) => e.resource);
    expect(`EpisodeOfCare/${episode?.id}`).toBe(assessment.episodeOfCare);
    expect(episode?.status).toBe('active');
    // Owned by the patient, in her tenant, and tagged as hers to do.
    const task = (await gw.backend.systemRepo.readReference<Task>({ reference: assessment.tasks[0].task })) as Task;
    expect(task).toMatchObject({
      for: { reference: `Patient/${patient.patient.id}` },
      owner: { reference: `Patient/${patient.patient.id}` },
      intent: 'order',
    });
    expect(task.meta?.tag).toEqual(
      expect.arrayContaining([
        { system: SYSTEMS.taskAudience, code: 'patient' },
        { system: SYSTEMS.episode, code: assessment.episodeOfCare },
      ]),
    );
    expect(task.meta?.accounts).toEqual([{ reference: patient.patient.managingOrganization?.reference }]);
    // One-time: nothing scheduled.
    expect(task.restriction?.period).toBeUndefined();
  });

  it('refuses what is not an assessment (409 invalid_state naming its endpoint) and what the patient cannot start (404)', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const offerings = await catalog(patient);
    const before = store();
    for (const [type, use] of [
      ['program', 'POST /v1/enrollments'],
      ['clinical-protocol', 'POST /v1/requests'],
    ]) {
      const other = offerings.find((o) => o.type === type);
      const refused = await start(patient, other?.healthcareService as string);
      expect(refused.status, type).toBe(409);
      expect(refused.body).toMatchObject({ error: { code: 'invalid_state', details: { state: type, use } } });
    }
    // Another tenant's assessment, and one that does not exist: the same 404.
    const carol = gw.backend.patients.carol;
    const theirs = (await catalog(carol)).find((o) => o.assessment?.includes('southridge/assessments'));
    expect(theirs).toBeDefined();
    expect((await start(patient, theirs?.healthcareService as string)).status).toBe(404);
    expect((await start(patient, 'HealthcareService/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect(store()).toEqual(before);

    // What the catalog does not list cannot be started: an inactive offering, or one of a retired plan.
    const weight = await offering(patient, 'assessments/weight-intake');
    const listed = await gw.backend.systemRepo.readReference<HealthcareService>({
      reference: weight.healthcareService,
    });
    const plan = (await gw.backend.systemRepo.searchOne<PlanDefinition>({
      resourceType: 'PlanDefinition',
      filters: [{ code: 'url', operator: 'eq', value: (weight.assessment as string).split('|')[0] }],
    })) as PlanDefinition;
    const { id: _service, ...serviceFields } = listed;
    const { id: _plan, ...planFields } = plan;
    const inactive = await gw.backend.systemRepo.createResource<HealthcareService>({ ...serviceFields, active: false });
    const retiredPlan = await gw.backend.systemRepo.createResource<PlanDefinition>({
      ...planFields,
      url: `${plan.url}-retired`,
      status: 'retired',
    });
    const ofRetired = await gw.backend.systemRepo.createResource<HealthcareService>({
      ...serviceFields,
      extension: [{ url: EXTENSIONS.frontsPlan, valueCanonical: `${retiredPlan.url}|${retiredPlan.version}` }],
    });
    const listedNow = (await catalog(patient)).map((o) => o.healthcareService);
    for (const hidden of [inactive, ofRetired]) {
      expect(listedNow).not.toContain(`HealthcareService/${hidden.id}`);
      expect((await start(patient, `HealthcareService/${hidden.id}`)).status).toBe(404);
    }
  });

  it('20 concurrent identical starts make one episode and one set of tasks, and all answer it', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
    const bp = await offering(patient, 'southridge/assessments/blood-pressure-check');
    await acceptAll(patient, { healthcareService: bp.healthcareService });
    const answers = await Promise.all(Array.from({ length: 20 }, () => start(patient, bp.healthcareService)));
    expect(answers.map((a) => a.status).filter((s) => s === 201)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200, 201]));
    const episodes = new Set(answers.map((a) => (a.body as Assessment).episodeOfCare));
    expect(episodes.size).toBe(1);
    const [episode] = [...episodes];
    const stored = await gw.backend.systemRepo.searchResources<EpisodeOfCare>({
      resourceType: 'EpisodeOfCare',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(stored.map((e) => `EpisodeOfCare/${e.id}`)).toEqual([episode]);
    const tasks = await gw.backend.systemRepo.searchResources<Task>({
      resourceType: 'Task',
      filters: [{ code: '_tag', operator: 'eq', value: `${SYSTEMS.episode}|${episode}` }],
    });
    expect(tasks).toHaveLength(2);
    expect((answers[0].body as Assessment).tasks.map((t) => t.kind)).toEqual(['questionnaire', 'measurement']);
    expect((answers[0].body as Assessment).tasks[1].measurements?.map((m) => m.code)).toEqual([
      'http://loinc.org|8480-6',
      'http://loinc.org|8462-4',
    ]);
  });
});
