import { MedplumClient } from '@medplum/core';
import type { Observation } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * packages/server/src/fhir/repo.ts (getAccounts): Medplum honours `meta.accounts` on a write only in
 * extended mode (`X-Medplum: extended`) by a project admin; otherwise it silently recomputes them (the
 * policy's compartment, the accounts of the patients the resource names). MedplumClient asks for extended
 * mode on every request unless built with `extendedMode: false`.
 */
let backend: TestBackend;
let northwind: string;
let southridge: string;

beforeAll(async () => {
  backend = await startTestBackend();
  northwind = backend.patients.alice.patient.managingOrganization?.reference as string;
  southridge = backend.patients.carol.patient.managingOrganization?.reference as string;
});
afterAll(() => backend?.close());

const adminClient = (extended: boolean) => {
  const client = new MedplumClient({
    baseUrl: backend.baseUrl,
    fetch: backend.fetch,
    cacheTime: 0,
    // MedplumClient sends `X-Medplum: extended` unless told not to.
    extendedMode: extended,
  });
  client.setAccessToken(backend.admin.getAccessToken() as string);
  return client;
};

/** An Observation of alice's (northwind) that claims to be southridge's too. */
const claiming = (): Observation => ({
  resourceType: 'Observation',
  status: 'final',
  code: { text: 'accounts parity' },
  subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
  meta: { accounts: [{ reference: southridge }] },
});

const accountsOf = (o: Observation) => (o.meta?.accounts ?? []).map((a) => a.reference).sort();

describe('meta.accounts only in extended mode, only for an admin', () => {
  it('a project admin without extended mode: the accounts sent are ignored (the patient’s tenant is inherited)', async () => {
    const created = await adminClient(false).createResource(claiming());
    expect(accountsOf(created), JSON.stringify(created.meta)).toEqual([northwind]);
  });

  it('a project admin in extended mode: the accounts sent are kept', async () => {
    const created = await adminClient(true).createResource(claiming());
    expect(accountsOf(created)).toContain(southridge);
  });

  it('a patient in extended mode: ignored, a patient is no admin', async () => {
    const patient = new MedplumClient({ baseUrl: backend.baseUrl, fetch: backend.fetch, cacheTime: 0 });
    patient.setAccessToken(backend.patients.alice.token);
    const answer = await patient
      .createResource({
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
        meta: { accounts: [{ reference: southridge }] },
      })
      .catch(() => undefined);
    if (answer) {
      expect(accountsOf(answer as unknown as Observation)).toEqual([northwind]);
    }
  });
});
