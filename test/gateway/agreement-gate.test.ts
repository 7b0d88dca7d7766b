import type { CarePlan } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { deployFixtureBot } from '../support/bots';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';

let gw: TestGateway;
const reads = [
  'Patient',
  'Consent',
  'DocumentReference',
  'PlanDefinition',
  'HealthcareService',
  'CarePlan',
  'Task',
].map((resourceType) => ({
  resourceType,
  interaction: ['read' as const, 'search' as const],
}));

beforeAll(async () => {
  gw = await startTestGateway();
  await deployFixtureBot(gw.backend, 'gated-workflow', [
    ...reads,
    { resourceType: 'EpisodeOfCare', interaction: ['create', 'read'] },
  ]);
});
afterAll(() => gw?.close());

const store = () => storeSnapshot(gw.backend);

describe('the consent_required gate, called through the bot library', () => {
  it('assessment start and visit start answer 409 with exactly the unmet entries, and change nothing; after acceptance they proceed', async () => {
    const patient = gw.backend.patients.carol;
    const service = await gw.backend.admin.searchOne('HealthcareService', {
      _tag: `${SYSTEMS.provisioning}|service-weight-intake`,
    });
    const carePlan = await gw.backend.admin.createResource<CarePlan>({
      resourceType: 'CarePlan',
      status: 'active',
      intent: 'plan',
      subject: { reference: `Patient/${patient.patient.id}` },
      instantiatesCanonical: ['https://patient-care.example/assessments/weight-intake|1'],
    });
    const contexts: { name: string; context: Record<string, string> }[] = [
      { name: 'assessment start', context: { healthcareService: `HealthcareService/${service?.id}` } },
      { name: 'visit start', context: { carePlan: `CarePlan/${carePlan.id}` } },
    ];
    const gate = { system: SYSTEMS.bots, value: 'test-gated-workflow' };
    for (const { name, context } of contexts) {
      const query = new URLSearchParams(context).toString();
      const requirements = (await gw.call('GET', `/v1/agreements/requirements?${query}`, { token: patient.token }))
        .body as { unmet: unknown[] };
      expect(requirements.unmet.length, name).toBe(3);
      const before = store();
      const refused = await patient.medplum.executeBot(gate, { context }, 'application/json');
      expect(refused, name).toEqual({
        ok: false,
        error: {
          status: 409,
          code: 'consent_required',
          message: expect.any(String),
          details: { agreements: requirements.unmet },
        },
      });
      expect(store(), name).toEqual(before);
    }
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: {
        agreements: (
          (
            await gw.call('GET', `/v1/agreements/requirements?healthcareService=HealthcareService/${service?.id}`, {
              token: patient.token,
            })
          ).body as { unmet: { url: string; version: string }[] }
        ).unmet.map((u) => `${u.url}|${u.version}`),
      },
      headers: { 'content-type': 'application/json' },
    });
    expect(accepted.status).toBe(200);
    for (const { name, context } of contexts) {
      const result = (await patient.medplum.executeBot(gate, { context }, 'application/json')) as {
        ok: boolean;
        episode?: string;
      };
      expect(result.ok, name).toBe(true);
      expect(result.episode, name).toMatch(/^EpisodeOfCare\//);
    }
  });

  it('exactly ONE unmet agreement is enough to refuse, naming it; accepting it lets the patient through', async () => {
    const service = await gw.backend.admin.searchOne('HealthcareService', {
      _tag: `${SYSTEMS.provisioning}|service-weight-intake`,
    });
    const context = { healthcareService: `HealthcareService/${service?.id}` };
    const query = `?${new URLSearchParams(context)}`;
    const unmetOf = async (patient: DemoActor) =>
      (
        (await gw.call('GET', `/v1/agreements/requirements${query}`, { token: patient.token })).body as {
          satisfied: boolean;
          unmet: { url: string; version: string }[];
        }
      ).unmet;
    const coordinates = (unmet: { url: string; version: string }[]) => unmet.map((u) => `${u.url}|${u.version}`);
    const gate = { system: SYSTEMS.bots, value: 'test-gated-workflow' };
    // The baseline (terms, privacy) and the assessment's own agreement: each in turn is the one left.
    const all = coordinates(await unmetOf(await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' })));
    expect(all).toHaveLength(3);
    for (const left of all) {
      const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
      const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
        token: patient.token,
        body: { agreements: all.filter((c) => c !== left) },
        headers: { 'content-type': 'application/json' },
      });
      expect(accepted.status, left).toBe(200);
      const unmet = await unmetOf(patient);
      expect(coordinates(unmet), left).toEqual([left]);
      const before = store();
      expect(await patient.medplum.executeBot(gate, { context }, 'application/json'), left).toEqual({
        ok: false,
        error: {
          status: 409,
          code: 'consent_required',
          message: expect.any(String),
          details: { agreements: unmet },
        },
      });
      expect(store(), left).toEqual(before);
      const last = await gw.call('POST', '/v1/agreements/acceptances', {
        token: patient.token,
        body: { agreements: [left] },
        headers: { 'content-type': 'application/json' },
      });
      expect(last.status, left).toBe(200);
      const result = (await patient.medplum.executeBot(gate, { context }, 'application/json')) as { ok: boolean };
      expect(result.ok, left).toBe(true);
    }
  });
});
