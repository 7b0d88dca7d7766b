import type { Binary, Organization, Patient, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { direct, fhirPath } from '../support/attack';
import { registerPatient } from '../support/attack-registration';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Medplum keeps the meta.accounts a non-admin sends whenever it derives none itself (packages/server/src/
 * fhir/repo.ts: the result's meta starts as the one sent; getAccounts overrides it only with something).
 * So before she is homed a patient could pick her own tenant, and an upload (no patient to derive from)
 * could be filed in any tenant; the policies refuse it (ONLY_OWN_TENANT). Attacker review, 2026-11-26: seen
 * on a real Medplum 5.0.10.
 */
let gw: TestGateway;
let southridge: string;
beforeAll(async () => {
  gw = await startTestGateway();
  const org = await gw.backend.systemRepo.searchOne<Organization>({
    resourceType: 'Organization',
    filters: [{ code: '_tag', operator: 'eq', value: `${SYSTEMS.provisioning}|org-southridge` }],
  });
  southridge = `Organization/${org?.id}`;
});
afterAll(() => gw?.close());

const history = () => gw.backend.db.reader.prepare('SELECT count(*) AS n FROM history').get();

describe('nobody chooses a tenant by sending meta.accounts', () => {
  it('a patient not yet homed cannot put herself in a tenant (Patient update with accounts): 403, nothing written', async () => {
    const registrant = await registerPatient(gw.backend, `chooser-${Date.now()}@example.test`, DEMO_TENANTS[0].appId);
    const own = await gw.backend.systemRepo.readResource<Patient>('Patient', registrant.patientId);
    expect(own.meta?.accounts ?? []).toEqual([]);
    for (const meta of [{ accounts: [{ reference: southridge }] }, { account: { reference: southridge } }]) {
      const before = history();
      const res = await direct(gw.backend, registrant.token, 'PUT', fhirPath(`Patient/${registrant.patientId}`), {
        body: { ...own, meta: { ...own.meta, ...meta } },
      });
      expect(res.status, res.text).toBe(403);
      expect(history()).toEqual(before);
    }
    // Her own edit without accounts still works, and leaves her without a tenant until she is homed.
    const plain = await direct(gw.backend, registrant.token, 'PUT', fhirPath(`Patient/${registrant.patientId}`), {
      body: { ...own, gender: 'female' },
    });
    expect(plain.status, plain.text).toBe(200);
    expect((plain.body as Patient).meta?.accounts ?? []).toEqual([]);
  });

  it('nor file her answers in a tenant before she is homed', async () => {
    const registrant = await registerPatient(gw.backend, `answers-${Date.now()}@example.test`, DEMO_TENANTS[0].appId);
    const self = { reference: `Patient/${registrant.patientId}` };
    const res = await direct(gw.backend, registrant.token, 'POST', fhirPath('QuestionnaireResponse'), {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'in-progress',
        subject: self,
        author: self,
        source: self,
        meta: { accounts: [{ reference: southridge }] },
      } satisfies QuestionnaireResponse,
    });
    expect(res.status, res.text).toBe(403);
  });

  it("a homed patient's upload cannot be filed in another tenant (a Binary names no patient to derive from)", async () => {
    const alice = gw.backend.patients.alice;
    const before = history();
    const res = await direct(gw.backend, alice.token, 'POST', fhirPath('Binary'), {
      body: {
        resourceType: 'Binary',
        contentType: 'application/pdf',
        data: btoa('%PDF-1.7 filed elsewhere'),
        securityContext: { reference: `Patient/${alice.patient.id}` },
        meta: { accounts: [{ reference: southridge }] },
      } satisfies Binary,
    });
    expect(res.status, res.text).toBe(403);
    expect(history()).toEqual(before);
    // Her own tenant is fine: the account she sends is hers.
    const own = await direct(gw.backend, alice.token, 'POST', fhirPath('Binary'), {
      body: {
        resourceType: 'Binary',
        contentType: 'application/pdf',
        data: btoa('%PDF-1.7 hers'),
        securityContext: { reference: `Patient/${alice.patient.id}` },
        meta: { accounts: alice.patient.meta?.accounts },
      } satisfies Binary,
    });
    expect(own.status, own.text).toBe(201);
  });
});
