import type { Appointment, Bundle, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * A search of several types at once (`GET /fhir/R4?_type=…`), as Medplum 5.0.10 answers it, mirrored from
 * its source: packages/fhir-router/src/fhirrouter.ts `searchMultipleTypes` (the route),
 * packages/server/src/fhir/repo.ts `search` (one `recordSearch` of the quota for the whole search),
 * packages/server/src/fhir/search.ts `validateSearchResourceTypes` (each type checked as a search of its
 * own: Binary 400, a type she may not search 403), `getBaseSelectQuery` (a union of each type's query with
 * its own security filters, sorted by `lastUpdated` across the types) and `applyCountAndOffsetLimits`
 * (`maxSearchOffset`, 10,000 by default: packages/server/src/config/utils.ts). The event feed reads her
 * records so; the lane checks the same search on a real Medplum.
 */
let backend: TestBackend;
const at = (i: number) => new Date(Date.now() + 86_400_000 + i * 3_600_000).toISOString();

beforeAll(async () => {
  backend = await startTestBackend();
  const { alice, bob } = backend.patients;
  for (const [i, who] of [alice, bob, alice].entries()) {
    await backend.systemRepo.createResource<Appointment>({
      resourceType: 'Appointment',
      meta: { project: backend.project.id },
      status: 'booked',
      start: at(i),
      end: at(i + 0.5),
      participant: [{ actor: { reference: `Patient/${who.patient.id}` }, status: 'accepted' }],
    });
    await backend.systemRepo.createResource<Task>({
      resourceType: 'Task',
      meta: { project: backend.project.id },
      status: 'ready',
      intent: 'order',
      for: { reference: `Patient/${who.patient.id}` },
    });
  }
});
afterAll(() => backend?.close());

const search = async (who: 'alice' | 'bob', query: string) =>
  (await backend.patients[who].medplum.get(`${backend.baseUrl}fhir/R4?${query}`, { cache: 'no-cache' })) as Bundle;

describe('a search of several types', () => {
  it('gives her only what her policy lets her read of each type, and nothing of another patient’s', async () => {
    const { alice, bob } = backend.patients;
    const hers = await search('alice', '_type=Task,Appointment&_count=100');
    const theirs = await search('bob', '_type=Task,Appointment&_count=100');
    const subjects = (b: Bundle) =>
      (b.entry ?? []).map((e) =>
        e.resource?.resourceType === 'Task'
          ? (e.resource as Task).for?.reference
          : (e.resource as Appointment).participant?.[0]?.actor?.reference,
      );
    expect(subjects(hers)).toHaveLength(4);
    expect(new Set(subjects(hers))).toEqual(new Set([`Patient/${alice.patient.id}`]));
    expect(subjects(theirs)).toHaveLength(2);
    expect(new Set(subjects(theirs))).toEqual(new Set([`Patient/${bob.patient.id}`]));
  });

  it('sorts across the types by _lastUpdated, either way, and pages by _count', async () => {
    const up = await search('alice', '_type=Task,Appointment&_sort=_lastUpdated&_count=100');
    const instants = (up.entry ?? []).map((e) => e.resource?.meta?.lastUpdated as string);
    expect(instants).toEqual([...instants].sort());
    expect(new Set((up.entry ?? []).map((e) => e.resource?.resourceType))).toEqual(new Set(['Task', 'Appointment']));
    const down = await search('alice', '_type=Task,Appointment&_sort=-_lastUpdated&_count=3');
    // The three newest, newest first (ties, written in the same millisecond, in either order).
    expect((down.entry ?? []).map((e) => e.resource?.meta?.lastUpdated)).toEqual([...instants].reverse().slice(0, 3));
  });

  it('is one search of her quota', async () => {
    const { membership } = backend.patients.alice;
    const spent = () => backend.quota.spending().get(membership.id) ?? 0;
    const before = spent();
    await search('alice', '_type=Task,Appointment,DocumentReference&_count=5');
    expect(spent() - before).toBe(20);
  });

  it('pages no deeper than Medplum’s maxSearchOffset (10,000): one type or several', async () => {
    const one = (offset: number) =>
      backend.patients.alice.medplum.get(`${backend.baseUrl}fhir/R4/Task?_offset=${offset}`, { cache: 'no-cache' });
    const invalid = { outcome: { issue: [{ code: 'invalid' }] } };
    await expect(one(10_001)).rejects.toMatchObject(invalid);
    expect(((await one(10_000)) as Bundle).entry ?? []).toEqual([]);
    await expect(search('alice', '_type=Task,Appointment&_offset=10001')).rejects.toMatchObject(invalid);
    expect((await search('alice', '_type=Task,Appointment&_offset=10000')).entry ?? []).toEqual([]);
  });

  it('refuses as each type’s own search would: Binary 400, a type she may not search 403', async () => {
    await expect(search('alice', '_type=Task,Binary')).rejects.toMatchObject({
      outcome: { issue: [{ code: 'invalid' }] },
    });
    await expect(search('alice', '_type=Task,AccessPolicy')).rejects.toMatchObject({
      outcome: { issue: [{ code: 'forbidden' }] },
    });
  });
});
