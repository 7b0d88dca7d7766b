import type { Bundle } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DEFINITIONS_PAGE } from '../../src/embedded/store/repo';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * The embedded Medplum's own port (what `npm start` opens for sign-in and for apps that call Medplum
 * directly) admits as the gateway does (src/shared/admission.ts): a caller's calls in flight are bounded
 * and a flood is answered at once, 429 with Retry-After, while other callers go on; and a page of FHIR's
 * definitions is bounded in size. Calls go through its HTTP app (`app.fetch`), as from the network.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend({ admission: { perCaller: 4, total: 12 } });
});
afterAll(() => backend?.close());

const overHttp = (token: string, path: string) =>
  backend.app.fetch(
    new Request(new URL(`fhir/R4/${path}`, backend.baseUrl), { headers: { authorization: `Bearer ${token}` } }),
  );

describe("the embedded Medplum's port", () => {
  it('a flood from one token: 429 at once with Retry-After beyond her share, every call answered, others served', async () => {
    const flood = Array.from({ length: 200 }, () =>
      overHttp(backend.patients.alice.token, 'StructureDefinition?_count=20'),
    );
    const other = await overHttp(backend.patients.carol.token, 'Patient');
    const answers = await Promise.all(flood);
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(100);
    const refused = answers.find((a) => a.status === 429);
    expect(refused?.headers.get('retry-after')).toBe('1');
    expect(((await (refused as Response).json()) as { resourceType: string }).resourceType).toBe('OperationOutcome');
    expect(other.status).toBe(200);
    // Once it has passed, she is served again.
    expect((await overHttp(backend.patients.alice.token, 'Patient')).status).toBe(200);
  });

  it('a page of definitions holds at most 20, whatever _count asks, and says where the next page is', async () => {
    const answer = await overHttp(backend.patients.alice.token, 'StructureDefinition?_count=1000');
    expect(answer.status).toBe(200);
    const bundle = (await answer.json()) as Bundle;
    expect(bundle.entry).toHaveLength(MAX_DEFINITIONS_PAGE);
    expect(bundle.link?.some((l) => l.relation === 'next')).toBe(true);
  });
});
