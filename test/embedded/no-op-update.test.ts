import type { Observation } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * An update that changes nothing makes no version, as Medplum decides it (packages/server/src/fhir/repo.ts
 * `isNotModified`: @medplum/core `deepEquals` of the stored and the written resource, which ignores
 * `meta.versionId`, `meta.lastUpdated` and `meta.author`, and the order of keys). Found by the real-Medplum
 * lane: a bot writing back what a clinician already wrote leaves her the last author there.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

describe('an update that changes nothing', () => {
  it('by another writer, with its keys in another order: no new version, the first writer stays the author; a real change makes one', async () => {
    const repo = backend.systemRepo;
    const first = await backend.admin.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'weight' },
      subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
      valueQuantity: { value: 70, unit: 'kg' },
    });
    // The system writes the same content (another writer), its keys reordered.
    const { valueQuantity, code, ...rest } = first;
    const same = await repo.updateResource<Observation>({ valueQuantity: { unit: 'kg', value: 70 }, ...rest, code });
    expect(same.meta?.versionId).toBe(first.meta?.versionId);
    expect(same.meta?.author).toEqual(first.meta?.author);
    expect(valueQuantity?.value).toBe(70);
    const changed = await repo.updateResource<Observation>({ ...first, valueQuantity: { value: 71, unit: 'kg' } });
    expect(changed.meta?.versionId).not.toBe(first.meta?.versionId);
  });
});
