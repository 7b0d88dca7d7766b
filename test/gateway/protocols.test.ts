import type { HealthcareService, Patient, PlanDefinition, Resource } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planTypeOf } from '../../bots/lib/catalog';
import { type Protocol, START_ENDPOINT } from '../../contracts/protocols';
import { SYSTEMS } from '../../contracts/systems';
import { createPatientCareClient } from '../../src/sdk';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const demo = (key: string) => gw.backend.patients[key];

async function catalogOf(who: DemoActor): Promise<Protocol[]> {
  const res = await gw.call('GET', '/v1/protocols', { token: who.token });
  expect(res.status, res.text).toBe(200);
  return (res.body as { protocols: Protocol[] }).protocols;
}

const canonicalOf = (p: Protocol): string => ('assessment' in p ? p.assessment : p.protocol);
const WEIGHT_INTAKE = 'https://patient-care.example/assessments/weight-intake|1';
/** In the catalog's order: by type, then name ("Blood pressure check" before "Weight-management assessment"). */
const tenantOffers = (tenant: string, treatment: boolean) => [
  `https://patient-care.example/${tenant}/assessments/blood-pressure-check|1`,
  WEIGHT_INTAKE,
  `https://patient-care.example/${tenant}/programs/blood-pressure-monitoring|1`,
  ...(treatment ? [`https://patient-care.example/${tenant}/protocols/hypertension-treatment|2`] : []),
];

/** The stored resource behind a `Type/id` answered by the gateway. */
const stored = <T extends Resource>(reference: string) => {
  const [type, id] = reference.split('/');
  return gw.backend.systemRepo.readResource<T>(type as T['resourceType'], id);
};

describe('GET /v1/protocols', () => {
  it.each([
    ['alice', 'northwind', true], // CA: northwind treats in California
    ['bob', 'northwind', false], // TX
    ['carol', 'southridge', true], // NY: southridge treats in New York
    ['dave', 'southridge', false], // CA
  ])(
    '%s (%s) gets the platform offering and her own tenant’s, treatment only where licensed',
    async (key, tenant, treatment) => {
      const protocols = await catalogOf(demo(key));
      expect(protocols.map(canonicalOf)).toEqual(tenantOffers(tenant, treatment as boolean));
      expect(protocols.map((p) => p.type)).toEqual([
        'assessment',
        'assessment',
        'program',
        ...(treatment ? ['clinical-protocol'] : []),
      ]);
    },
  );

  it('names each offering by its service and answers the endpoint that starts it, per type', async () => {
    for (const p of await catalogOf(demo('alice'))) {
      const service = await stored<HealthcareService>(p.healthcareService);
      expect(p.name).toBe(service.name);
      expect(p.start).toBe(START_ENDPOINT[p.type]);
      expect(service.extension?.find((e) => e.url.endsWith('/fronts-plan'))?.valueCanonical).toBe(canonicalOf(p));
    }
    const byType = Object.fromEntries((await catalogOf(demo('alice'))).map((p) => [p.type, p.start]));
    expect(byType).toEqual({
      assessment: 'POST /v1/assessments',
      program: 'POST /v1/enrollments',
      'clinical-protocol': 'POST /v1/requests',
    });
  });

  it('lists nothing of another tenant: every offering is the platform’s or the patient’s own tenant’s', async () => {
    for (const key of ['alice', 'bob', 'carol', 'dave']) {
      const who = demo(key);
      const own = who.patient.managingOrganization?.reference;
      for (const p of await catalogOf(who)) {
        const service = await stored<HealthcareService>(p.healthcareService);
        const accounts = (service.meta?.accounts ?? []).map((a) => a.reference);
        expect(
          accounts.every((a) => a === own),
          `${key}: ${p.healthcareService} of ${accounts}`,
        ).toBe(true);
      }
    }
  });

  it('each canonical resolves, with the patient’s own token, to one published active PlanDefinition of that type', async () => {
    for (const key of ['alice', 'carol']) {
      const who = demo(key);
      for (const p of await catalogOf(who)) {
        const [url, version] = canonicalOf(p).split('|');
        const plans = await who.medplum.searchResources('PlanDefinition', { url, version }, { cache: 'no-cache' });
        expect(plans, canonicalOf(p)).toHaveLength(1);
        expect(plans[0].status).toBe('active');
        expect(planTypeOf(plans[0] as PlanDefinition)).toBe(p.type);
      }
    }
  });

  it('filters by where the patient is now: moving out of the licensed state drops the treatment, moving in adds it', async () => {
    const treatment = 'https://patient-care.example/northwind/protocols/hypertension-treatment|2';
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await catalogOf(patient)).map(canonicalOf)).toContain(treatment);
    const move = async (address: Patient['address']) => {
      const current = await patient.medplum.readResource('Patient', patient.patient.id, { cache: 'no-cache' });
      await patient.medplum.updateResource({ ...current, address });
    };
    await move([{ state: 'NV', country: 'US' }]);
    expect((await catalogOf(patient)).map(canonicalOf)).not.toContain(treatment);
    // The state alone is not the jurisdiction: CA in another country is not California.
    await move([{ state: 'CA', country: 'MX' }]);
    expect((await catalogOf(patient)).map(canonicalOf)).not.toContain(treatment);
    // The first address is where the patient is, as for agreements.
    await move([
      { state: 'ca', country: 'us' },
      { state: 'TX', country: 'US' },
    ]);
    expect((await catalogOf(patient)).map(canonicalOf)).toContain(treatment);
    // No address: only what is offered everywhere.
    await move(undefined);
    expect((await catalogOf(patient)).map(canonicalOf)).toEqual(tenantOffers('northwind', false));
  });

  it('leaves out a service that is inactive, fronts nothing readable, or is not published', async () => {
    const org = demo('alice').patient.managingOrganization as { reference: string };
    const meta = (tag: string) => ({
      project: gw.backend.project.id,
      accounts: [org],
      tag: [{ system: 'https://patient-care.example/catalog', code: tag }],
    });
    const fronts = (canonical: string) => [
      { url: 'https://patient-care.example/fhir/StructureDefinition/fronts-plan', valueCanonical: canonical },
    ];
    const bp = 'https://patient-care.example/northwind/assessments/blood-pressure-check|1';
    const extra = [
      { name: 'Inactive', active: false, meta: meta('public'), extension: fronts(bp) },
      { name: 'Unpublished', active: true, meta: { ...meta('public'), tag: [] }, extension: fronts(bp) },
      { name: 'Unknown plan', active: true, meta: meta('public'), extension: fronts('https://nowhere.example/x|1') },
      {
        name: 'Southridge plan',
        active: true,
        meta: meta('public'),
        extension: fronts(bp.replace('northwind', 'southridge')),
      },
      { name: 'Unpinned', active: true, meta: meta('public'), extension: fronts(bp.split('|')[0]) },
    ];
    const created: string[] = [];
    for (const service of extra) {
      const saved = await gw.backend.systemRepo.createResource<HealthcareService>({
        resourceType: 'HealthcareService',
        ...service,
      });
      created.push(saved.id as string);
    }
    try {
      const names = (await catalogOf(demo('alice'))).map((p) => p.name);
      for (const { name } of extra) {
        expect(names).not.toContain(name);
      }
    } finally {
      for (const id of created) {
        await gw.backend.systemRepo.deleteResource('HealthcareService', id);
      }
    }
  });

  it('is protocols.list() in the SDK, checked against the same contract', async () => {
    const client = createPatientCareClient({
      baseUrl: 'http://gateway.test',
      accessToken: demo('bob').token,
      fetch: async (input, init) => gw.app.request(input as string, init),
    });
    const { protocols } = await client.protocols.list();
    expect(protocols.map(canonicalOf)).toEqual(tenantOffers('northwind', false));
  });
});

describe('the catalog directly on Medplum', () => {
  /** The items provisioning published for one tenant, by their provisioning keys. */
  const tenantItems = (tenant: string) =>
    ['HealthcareService', 'PlanDefinition', 'ActivityDefinition', 'Questionnaire', 'ObservationDefinition'].flatMap(
      (type) =>
        (
          gw.backend.db.reader
            .prepare('SELECT id, content FROM resource WHERE type = ? AND content LIKE ?')
            .all(type, `%${SYSTEMS.provisioning}","code":"catalog-${tenant}-%`) as { id: string }[]
        ).map((row) => `${type}/${row.id}`),
    );

  it('a patient reads her own tenant’s catalog and none of the other’s, by read or search', async () => {
    for (const [reader, own, other] of [
      ['alice', 'northwind', 'southridge'],
      ['carol', 'southridge', 'northwind'],
    ]) {
      const medplum = demo(reader).medplum;
      const theirs = tenantItems(other);
      const mine = tenantItems(own);
      expect(theirs.length).toBeGreaterThanOrEqual(10);
      for (const reference of mine) {
        const [type, id] = reference.split('/');
        await expect(medplum.readResource(type as 'PlanDefinition', id, { cache: 'no-cache' })).resolves.toBeTruthy();
      }
      for (const reference of theirs) {
        const [type, id] = reference.split('/');
        await expect(
          medplum.readResource(type as 'PlanDefinition', id, { cache: 'no-cache' }),
          `${reader} read ${reference}`,
        ).rejects.toThrow();
        const found = await medplum.searchResources(type as 'PlanDefinition', { _id: id }, { cache: 'no-cache' });
        expect(found, `${reader} searched ${reference}`).toHaveLength(0);
      }
      const everything = await medplum.searchResources('HealthcareService', { _count: '100' }, { cache: 'no-cache' });
      expect(everything.map((s) => `HealthcareService/${s.id}`).filter((r) => theirs.includes(r))).toEqual([]);
    }
  });

  it('a patient reads the published jurisdictions, and no other Location', async () => {
    const alice = demo('alice').medplum;
    const published = await alice.searchResources('Location', { _count: '100' }, { cache: 'no-cache' });
    expect(published.map((l) => l.identifier?.[0]?.value).sort()).toEqual(['US-CA', 'US-NY', 'US-TX']);
    const site = await gw.backend.systemRepo.createResource({
      resourceType: 'Location',
      name: 'Northwind back office',
      meta: {
        project: gw.backend.project.id,
        accounts: [demo('alice').patient.managingOrganization as { reference: string }],
      },
    });
    try {
      await expect(alice.readResource('Location', site.id as string, { cache: 'no-cache' })).rejects.toThrow();
    } finally {
      await gw.backend.systemRepo.deleteResource('Location', site.id as string);
    }
  });
});
