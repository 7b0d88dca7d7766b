import type { OperationOutcome, Patient, Project } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fhirPath } from '../support/attack';
import { signInAsBot } from '../support/bots';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Medplum's FHIR quota (packages/server/src/fhir/fhirquota.ts, context.ts), as the embedded Medplum
 * counts it: points per membership a minute (read 1, history 10, search 20, write 100), the `RateLimit`
 * header on every FHIR answer, and over it a 429 whose diagnostics say when the window ends.
 */
let gw: TestGateway;
let offset = 0;
beforeAll(async () => {
  gw = await startTestGateway({}, { clock: () => new Date(Date.now() + offset) });
  // A small minute, through the Project's system setting (a super admin's on Medplum): 1,000 points a
  // membership, 10,000 the project.
  const project = await gw.backend.systemRepo.readResource<Project>('Project', gw.backend.project.id);
  await gw.backend.systemRepo.updateResource<Project>({
    ...project,
    systemSetting: [...(project.systemSetting ?? []), { name: 'userFhirQuota', valueInteger: 1_000 }],
  });
});
afterAll(() => gw?.close());

const nextMinute = () => {
  offset += 61_000;
};

/** The points left, from the `RateLimit` header: `"fhirInteractions";r=<left>;t=<seconds>`. */
const remaining = (headers: Headers): number => Number(/r=(\d+)/.exec(headers.get('ratelimit') ?? '')?.[1]);

async function call(token: string, method: string, path: string, body?: unknown) {
  const response = await gw.backend.fetch(new URL(fhirPath(path), gw.backend.baseUrl), {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as unknown };
}

describe('the FHIR quota, as Medplum counts it', () => {
  it('a read spends 1, a history 10, a search 20, a write 100, shown on every answer', async () => {
    nextMinute();
    const { token, patient } = gw.backend.patients.alice;
    const first = await call(token, 'GET', `Patient/${patient.id}`);
    expect(remaining(first.headers)).toBe(999);
    const history = await call(token, 'GET', `Patient/${patient.id}/_history`);
    expect(remaining(history.headers)).toBe(989);
    const search = await call(token, 'GET', 'Observation?_count=1');
    expect(remaining(search.headers)).toBe(969);
    const write = await call(token, 'PUT', `Patient/${patient.id}`, first.body);
    expect(write.status).toBe(200);
    expect(remaining(write.headers)).toBe(869);
  });

  it('over it: 429 with Medplum diagnostics (_msBeforeNext), nothing done; the gateway says when to come back', async () => {
    nextMinute();
    const { token, patient } = gw.backend.patients.bob;
    for (let i = 0; i < 50; i++) {
      expect((await call(token, 'GET', 'Observation?_count=1')).status).toBe(200);
    }
    const refused = await call(token, 'PUT', `Patient/${patient.id}`, { ...patient, gender: 'other' });
    expect(refused.status).toBe(429);
    const outcome = refused.body as OperationOutcome;
    expect(outcome.issue?.[0]?.code).toBe('throttled');
    const state = JSON.parse(outcome.issue?.[0]?.diagnostics ?? '{}') as Record<string, number>;
    expect(state._msBeforeNext).toBeGreaterThan(0);
    expect(state._msBeforeNext).toBeLessThanOrEqual(60_000);
    expect(state.limit).toBe(1_000);
    expect(remaining(refused.headers)).toBe(0);
    expect((await gw.backend.systemRepo.readResource<Patient>('Patient', patient.id)).gender).not.toBe('other');
    // Through the gateway: 429 rate_limited, Retry-After the seconds left of the window.
    const viaGateway = await gw.call('GET', '/v1/patient/profile', { token });
    expect(viaGateway.status).toBe(429);
    expect(viaGateway.body).toMatchObject({ error: { code: 'rate_limited' } });
    const retryAfter = Number(viaGateway.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // A workflow too: her own quota is spent (Medplum refuses the $execute itself), so it is her 429,
    // not the platform's 503.
    const workflow = await gw.call('POST', '/v1/agreements/acceptances', {
      token,
      body: { agreements: ['https://patient-care.example/agreements/terms|2026-01'] },
    });
    expect(workflow.status).toBe(429);
    expect(workflow.body).toMatchObject({ error: { code: 'rate_limited' } });
    expect(Number(workflow.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another membership is not held back; the window ends, and she is served again.
    expect(
      (await call(gw.backend.patients.alice.token, 'GET', `Patient/${gw.backend.patients.alice.patient.id}`)).status,
    ).toBe(200);
    nextMinute();
    expect((await call(token, 'GET', `Patient/${patient.id}`)).status).toBe(200);
  });

  it("a bot's calls count against the bot, for every patient at once; when it is spent the workflow is 503 with Retry-After, nothing written", async () => {
    nextMinute();
    // Accepting the terms (then replaying the acceptance: the bot reads and answers, writes nothing): a
    // bot run each time.
    const terms = 'https://patient-care.example/agreements/terms|2026-01';
    const accept = (token: string) =>
      gw.call('POST', '/v1/agreements/acceptances', { token, body: { agreements: [terms] } });
    let answer = await accept(gw.backend.patients.carol.token);
    let calls = 1;
    while (answer.status === 200 && calls < 500) {
      answer = await accept(gw.backend.patients.carol.token);
      calls++;
    }
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: { code: 'upstream_unavailable' } });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    // Carol's own minute is nowhere near spent (each call reads the Bot once): another patient is
    // refused too, since the bot's quota is one for all of them.
    const dave = await accept(gw.backend.patients.dave.token);
    expect(dave.status).toBe(503);
    expect(
      (await call(gw.backend.patients.carol.token, 'GET', `Patient/${gw.backend.patients.carol.patient.id}`)).status,
    ).toBe(200);
    nextMinute();
    expect((await accept(gw.backend.patients.carol.token)).status).toBe(200);
  });

  it('a read computed by the gateway (the requirements check) spends her own quota, never the platform’s: her 429, nobody else held back', async () => {
    nextMinute();
    const requirements = (token: string) => gw.call('GET', '/v1/agreements/requirements', { token });
    let answer = await requirements(gw.backend.patients.dave.token);
    let calls = 1;
    while (answer.status === 200 && calls < 500) {
      answer = await requirements(gw.backend.patients.dave.token);
      calls++;
    }
    expect(answer.status).toBe(429);
    expect(answer.body).toMatchObject({ error: { code: 'rate_limited' } });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    // Her minute, about 40 points a call (reads and searches), not a shared bot's.
    expect(calls).toBeGreaterThan(10);
    expect((await requirements(gw.backend.patients.carol.token)).status).toBe(200);
    nextMinute();
    expect((await requirements(gw.backend.patients.dave.token)).status).toBe(200);
  });

  it('a bot whose reads are refused for its quota fails as that, 503, never as a 404 that blames the patient (bots/lib/absent.ts)', async () => {
    nextMinute();
    const { token } = await signInAsBot(gw.backend, 'complete-task');
    // The bot's minute spent (by other patients' work, say): its next read is refused.
    let spending = 0;
    while ((await call(token, 'GET', 'Task?_count=1')).status === 200) {
      spending++;
    }
    expect(spending).toBeGreaterThan(10);
    const answer = await gw.call('POST', '/v1/tasks/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e/complete', {
      token: gw.backend.patients.alice.token,
      body: { questionnaireResponse: 'QuestionnaireResponse/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e' },
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: { code: 'upstream_unavailable' } });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('without the setting, a membership has the server default (Medplum: 50,000)', async () => {
    nextMinute();
    const project = await gw.backend.systemRepo.readResource<Project>('Project', gw.backend.project.id);
    await gw.backend.systemRepo.updateResource<Project>({
      ...project,
      systemSetting: project.systemSetting?.filter((s) => s.name !== 'userFhirQuota'),
    });
    try {
      const read = await call(gw.backend.patients.dave.token, 'GET', `Patient/${gw.backend.patients.dave.patient.id}`);
      expect(remaining(read.headers)).toBe(49_999);
    } finally {
      await gw.backend.systemRepo.updateResource<Project>(project);
    }
  });

  it('the system itself is not counted (a super admin on Medplum)', async () => {
    const total = () => [...gw.backend.quota.spending().values()].reduce((sum, points) => sum + points, 0);
    const before = total();
    for (let i = 0; i < 200; i++) {
      await gw.backend.systemRepo.search({ resourceType: 'Observation', count: 1 });
    }
    expect(total()).toBe(before);
  });
});
