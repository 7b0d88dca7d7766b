import { randomUUID } from 'node:crypto';
import type { Coverage } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * Issue 48 item 7: the encounter page's *Details & Billing* tab of Medplum's Provider app (5.1.29
 * `BillingTab`) searches the encounter's Claim, its ClaimResponse and its ChargeItems, and makes a self-pay
 * Coverage for a patient who has none; each refusal was a red "Forbidden" after nothing went wrong. In her
 * tenant she reads them (the platform writes none) and records the Coverage; never for another tenant.
 */
let gw: TestGateway;
let clinician: Clinician;
let outsider: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  outsider = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

const selfPay = (patientId: string): Coverage => ({
  resourceType: 'Coverage',
  status: 'active',
  type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/coverage-selfpay', code: 'pay' }] },
  beneficiary: { reference: `Patient/${patientId}` },
  payor: [{ reference: `Patient/${patientId}` }],
});

describe('the Provider app’s Details & Billing tab', () => {
  it('reads an encounter’s claim, response and charges (none) and records her self-pay Coverage; the other tenant’s clinician does not', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const token = clinician.medplum.getAccessToken() as string;
    const encounter = `Encounter/${randomUUID()}`;
    for (const search of [
      `Claim?encounter=${encounter}&status=active,draft`,
      `ClaimResponse?request=Claim/${randomUUID()}`,
      `ChargeItem?context=${encounter}`,
      `Coverage?patient=Patient/${patient.patient.id}&status=active&_sort=-_lastUpdated`,
    ]) {
      const answer = await direct(gw.backend, token, 'GET', fhirPath(search));
      expect(answer.status, search).toBe(200);
    }
    const made = await clinician.medplum.createResource(selfPay(patient.patient.id));
    const her = await gw.backend.systemRepo.readResource('Patient', patient.patient.id);
    expect(her.meta?.accounts?.length).toBeGreaterThan(0);
    expect(made.meta?.accounts?.map((a) => a.reference)).toEqual(her.meta?.accounts?.map((a) => a.reference));
    await expect(outsider.medplum.createResource(selfPay(patient.patient.id))).rejects.toThrow(/Forbidden/);
    const theirs = await direct(
      gw.backend,
      outsider.medplum.getAccessToken() as string,
      'GET',
      fhirPath(`Coverage?patient=Patient/${patient.patient.id}`),
    );
    expect((theirs.body as { entry?: unknown[] }).entry ?? []).toEqual([]);
  });
});
