import { MedplumClient } from '@medplum/core';
import type { Bundle, BundleEntry, Observation } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapProject } from '../../src/embedded/bootstrap';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Transactions as Medplum runs them: atomic only with the Project feature `transaction-bundles` (the
 * server passes it to fhir-router as `config.transactions`), and a transaction with a conditional entry
 * (run SERIALIZABLE) holds at most 8 entries (packages/fhir-router/src/batch.ts
 * maxSerializableTransactionEntries).
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const observation = (text: string): Observation => ({ resourceType: 'Observation', status: 'final', code: { text } });

/** A create, then an update of a resource that does not exist under If-Match: the second entry fails. */
const failingSecond = (text: string): Bundle => ({
  resourceType: 'Bundle',
  type: 'transaction',
  entry: [
    { resource: observation(text), request: { method: 'POST', url: 'Observation' } },
    {
      resource: { ...observation(text), id: 'does-not-exist' },
      request: { method: 'PUT', url: 'Observation/does-not-exist', ifMatch: 'W/"1"' },
    },
  ],
});

const written = async (text: string) =>
  (await backend.systemRepo.searchResources<Observation>({ resourceType: 'Observation', count: 1000 })).filter(
    (o) => o.code?.text === text,
  ).length;

describe('transactions', () => {
  it('are atomic in a project with transaction-bundles: a failing entry leaves nothing written', async () => {
    await expect(backend.admin.executeBatch(failingSecond('atomic'))).rejects.toThrow();
    expect(await written('atomic')).toBe(0);
  });

  it('are not atomic in a project without the feature: entries are processed one by one', async () => {
    const { adminClient } = await bootstrapProject(backend.systemRepo, 'No transaction bundles', ['bots']);
    const admin = new MedplumClient({ baseUrl: backend.baseUrl, fetch: backend.fetch, cacheTime: 0 });
    await admin.startClientLogin(adminClient.id as string, adminClient.secret as string);
    await admin.executeBatch(failingSecond('not atomic')).catch(() => undefined);
    expect(await written('not atomic')).toBe(1);
  });

  it('with a conditional entry, hold at most 8 entries', async () => {
    const conditional = (n: number): Bundle => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: Array.from(
        { length: n },
        (_, i): BundleEntry => ({
          resource: { ...observation(`capped-${n}`), identifier: [{ system: 'urn:test:cap', value: `${n}-${i}` }] },
          request: { method: 'POST', url: 'Observation', ifNoneExist: `identifier=urn:test:cap|${n}-${i}` },
        }),
      ),
    });
    await expect(backend.admin.executeBatch(conditional(8))).resolves.toMatchObject({ type: 'transaction-response' });
    await expect(backend.admin.executeBatch(conditional(9))).rejects.toThrow(/strict isolation/);
    expect(await written('capped-9')).toBe(0);
  });
});
