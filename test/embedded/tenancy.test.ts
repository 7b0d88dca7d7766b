import { OperationOutcomeError } from '@medplum/core';
import type { Consent, Observation } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (err) {
    if (err instanceof OperationOutcomeError) {
      return Number(
        (err.outcome as { id?: string }).id === 'not-found' ? 404 : err.outcome.id === 'forbidden' ? 403 : 400,
      );
    }
    throw err;
  }
}

async function weightOf(key: string): Promise<Observation> {
  const actor = backend.patients[key];
  const [observation] = await backend.systemRepo.searchResources<Observation>({
    resourceType: 'Observation',
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${actor.patient.id}` }],
  });
  return observation;
}

describe('tenancy through access policies (real tokens, HTTP API)', () => {
  it("patient A reads their own Observation but gets 404 for patient B's, same tenant", async () => {
    const { alice } = backend.patients;
    const own = await weightOf('alice');
    const bobs = await weightOf('bob');
    expect((await alice.medplum.readResource('Observation', own.id as string)).id).toBe(own.id);
    expect(await statusOf(alice.medplum.readResource('Observation', bobs.id as string))).toBe(404);
  });

  it("patient A's searches never contain patient B's data, in or across tenants", async () => {
    const { alice } = backend.patients;
    const bundle = await alice.medplum.search('Observation', { _count: '100' });
    const subjects = new Set(bundle.entry?.map((e) => e.resource?.subject?.reference));
    expect([...subjects]).toEqual([`Patient/${alice.patient.id}`]);
    for (const other of ['bob', 'carol', 'dave']) {
      const theirs = await alice.medplum.search('Observation', {
        subject: `Patient/${backend.patients[other].patient.id}`,
      });
      expect(theirs.entry ?? []).toEqual([]);
      const patients = await alice.medplum.search('Patient', { _id: backend.patients[other].patient.id });
      expect(patients.entry ?? []).toEqual([]);
    }
  });

  it('patient of another tenant gets 404 for the resource, and 403 for creating a Consent', async () => {
    const { carol, alice } = backend.patients;
    const alices = await weightOf('alice');
    expect(await statusOf(carol.medplum.readResource('Observation', alices.id as string))).toBe(404);
    expect(await statusOf(carol.medplum.readResource('Patient', alice.patient.id))).toBe(404);
    const consent: Consent = {
      resourceType: 'Consent',
      status: 'active',
      scope: { text: 'patient-privacy' },
      category: [{ text: 'privacy' }],
      patient: { reference: `Patient/${alice.patient.id}` },
    };
    expect(await statusOf(alice.medplum.createResource(consent))).toBe(403);
    expect(
      await statusOf(
        carol.medplum.createResource({ ...consent, patient: { reference: `Patient/${carol.patient.id}` } }),
      ),
    ).toBe(403);
  });

  it('resources of a tenant patient carry the tenant in meta.accounts and compartment', async () => {
    const observation = await weightOf('carol');
    const org = backend.patients.carol.patient.managingOrganization?.reference as string;
    expect(observation.meta?.accounts).toEqual([{ reference: org }]);
    expect(observation.meta?.compartment).toEqual(
      expect.arrayContaining([{ reference: org }, { reference: `Patient/${backend.patients.carol.patient.id}` }]),
    );
  });
});
