import type { Bundle, StructureDefinition } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * FHIR's own definitions on the embedded Medplum (src/embedded/definitions.ts, issue 26): every project
 * reads the base StructureDefinitions and SearchParameters as Medplum serves its seeded ones
 * (packages/server/src/fhir/accesspolicy.ts addDefaultResourceTypes grants their read), searched as
 * Medplum's clients search them, `_filter` included; nobody writes them.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const search = (token: string, query: string) => direct(backend, token, 'GET', fhirPath(query));

describe('base definitions', () => {
  it('a clinician and a patient find a type’s StructureDefinition by name, by `_filter`, by url and by id', async () => {
    for (const token of [backend.clinicians.northwind.token, backend.patients.alice.token]) {
      for (const query of [
        'StructureDefinition?name:exact=Patient',
        `StructureDefinition?_filter=${encodeURIComponent('name eq Patient')}`,
        `StructureDefinition?url=${encodeURIComponent('http://hl7.org/fhir/StructureDefinition/Patient')}`,
      ]) {
        const answer = await search(token, query);
        expect(answer.status, query).toBe(200);
        const found = ((answer.body as Bundle<StructureDefinition>).entry ?? []).map((e) => e.resource?.url);
        expect(found, query).toEqual(['http://hl7.org/fhir/StructureDefinition/Patient']);
      }
      const read = await search(token, 'StructureDefinition/Patient');
      expect(read.status).toBe(200);
      expect((read.body as StructureDefinition).snapshot?.element?.length).toBeGreaterThan(10);
    }
  });

  it('SearchParameters by base, paged like any search', async () => {
    const token = backend.clinicians.northwind.token;
    const first = await search(token, 'SearchParameter?base=Task&_count=5&_total=accurate');
    expect(first.status).toBe(200);
    const bundle = first.body as Bundle;
    expect(bundle.entry).toHaveLength(5);
    expect(bundle.total).toBeGreaterThan(15);
    expect(bundle.link?.some((l) => l.relation === 'next')).toBe(true);
  });

  it('a `_filter` it cannot evaluate exactly is 400, never a loose match', async () => {
    for (const filter of ['name co Pat', 'name eq Patient or name eq Task', 'not (name eq Patient)', 'name eq']) {
      const answer = await search(
        backend.clinicians.northwind.token,
        `StructureDefinition?_filter=${encodeURIComponent(filter)}`,
      );
      expect(answer.status, filter).toBe(400);
    }
  });

  it('nobody but the server writes them: a clinician’s and a patient’s update are refused, the definition unchanged', async () => {
    for (const token of [backend.clinicians.northwind.token, backend.patients.alice.token]) {
      const read = await search(token, 'StructureDefinition/Patient');
      const sd = read.body as StructureDefinition;
      const put = await direct(backend, token, 'PUT', fhirPath('StructureDefinition/Patient'), {
        body: { ...sd, description: 'changed' },
      });
      expect(put.status).toBeGreaterThanOrEqual(400);
      expect(put.status).toBeLessThan(500);
      const again = await search(token, 'StructureDefinition/Patient');
      expect((again.body as StructureDefinition).description).toBe(sd.description);
    }
  });
});
