import type { Appointment } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * A chained search of one link (`Appointment?patient:Patient.identifier=…`), as Medplum 5.0.10 allows
 * (packages/server/src/fhir/search.ts: a reference parameter, a type it may point at, that type's own
 * parameter). The embedded Medplum searches the target type with the caller's own access, so a chain never
 * finds through a record she may not search; deeper chains are refused rather than matched wrongly. Her
 * access log searches AuditEvents so (`entity:Observation.patient=Patient/<her>`).
 */
let backend: TestBackend;
const soon = (i: number) => new Date(Date.now() + 86_400_000 + i * 3_600_000).toISOString();

beforeAll(async () => {
  backend = await startTestBackend();
  const { alice, bob } = backend.patients;
  for (const [i, who] of [alice, bob, alice].entries()) {
    await backend.systemRepo.createResource<Appointment>({
      resourceType: 'Appointment',
      meta: { project: backend.project.id },
      status: 'booked',
      start: soon(i),
      end: soon(i + 0.5),
      participant: [{ actor: { reference: `Patient/${who.patient.id}` }, status: 'accepted' }],
    });
  }
});
afterAll(() => backend?.close());

const byIdentifier = (key: string) => `${SYSTEMS.demoPatient}|${key}`;

describe('chained search (one link)', () => {
  it('finds what the linked record matches', async () => {
    const found = await backend.admin.searchResources('Appointment', {
      'patient:Patient.identifier': byIdentifier('alice'),
    });
    expect(found.map((a) => a.participant?.[0]?.actor?.reference)).toEqual([
      `Patient/${backend.patients.alice.patient.id}`,
      `Patient/${backend.patients.alice.patient.id}`,
    ]);
    const none = await backend.admin.searchResources('Appointment', {
      'patient:Patient.identifier': byIdentifier('nobody'),
    });
    expect(none.length).toBe(0);
  });

  it('never finds through a record the caller may not search', async () => {
    const { alice } = backend.patients;
    const through = await alice.medplum.searchResources('Appointment', {
      'patient:Patient.identifier': byIdentifier('bob'),
    });
    expect(through.length).toBe(0);
  });

  it('refuses what it cannot answer faithfully: two links, a type the parameter cannot point at', async () => {
    for (const code of [
      'patient:Patient.organization:Organization.name',
      'patient:Observation.code',
      'patient.identifier',
    ]) {
      await expect(backend.admin.searchResources('Appointment', { [code]: 'x' }), code).rejects.toThrow(
        /not supported|Unknown search parameter/,
      );
    }
    await expect(
      backend.admin.searchResources('Appointment', { 'patient:Patient.no-such-param': 'x' }),
    ).rejects.toThrow(/Unknown search parameter/);
  });
});
