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

  it("answer each entry with its resource, a conditional create's found one included (packages/fhir-router/src/batch.ts buildBundleResponse): what the bots use instead of a read-back", async () => {
    const claim = (text: string): Bundle => ({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: { ...observation(text), identifier: [{ system: 'urn:test:claim', value: 'one' }] },
          request: { method: 'POST', url: 'Observation', ifNoneExist: 'identifier=urn:test:claim|one' },
        },
        { resource: observation(`${text} beside`), request: { method: 'POST', url: 'Observation' } },
      ],
    });
    const first = await backend.admin.executeBatch(claim('claimed'));
    const made = first.entry?.[0]?.resource as Observation;
    expect(first.entry?.map((e) => [e.response?.status, e.resource?.resourceType])).toEqual([
      ['201', 'Observation'],
      ['201', 'Observation'],
    ]);
    expect(made).toMatchObject({
      code: { text: 'claimed' },
      identifier: [{ value: 'one' }],
      meta: { versionId: expect.any(String) },
    });
    // The same claim again: its condition finds the first, and the answer is that resource as stored.
    const again = await backend.admin.executeBatch(claim('claimed again'));
    expect(again.entry?.[0]?.response?.status).toBe('200');
    expect(again.entry?.[0]?.resource).toMatchObject({ id: made.id, code: { text: 'claimed' } });
  });
});
