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

  it('`_filter` `eq` is an exact, case-sensitive match, as Medplum evaluates it (packages/core/src/filter/parse.ts: eq is Operator.EXACT; packages/server/src/fhir/search.ts buildStringFilterExpression: EXACT is `column = value`; its search.test.ts "_filter eq": a prefix does not match)', async () => {
    const token = backend.patients.alice.token;
    const names = async (filter: string) => {
      const answer = await search(token, `StructureDefinition?_filter=${encodeURIComponent(filter)}&_count=50`);
      expect(answer.status, filter).toBe(200);
      return ((answer.body as Bundle<StructureDefinition>).entry ?? []).map((e) => e.resource?.name);
    };
    expect(await names('name eq Patient')).toEqual(['Patient']);
    expect(await names('name eq "Patient"')).toEqual(['Patient']);
    // A prefix, a substring, another case: nothing (a plain `name=Pati` search still matches by prefix).
    expect(await names('name eq Pati')).toEqual([]);
    expect(await names('name eq atient')).toEqual([]);
    expect(await names('name eq patient')).toEqual([]);
    expect(await names('name eq Patient and type eq Patient')).toEqual(['Patient']);
    expect(await names('name eq Patient and type eq Observation')).toEqual([]);
    const plain = await search(token, 'StructureDefinition?name=Pati&_count=50');
    expect(((plain.body as Bundle<StructureDefinition>).entry ?? []).map((e) => e.resource?.name)).toContain('Patient');
  });

  it('a plain string search is a prefix, `:contains` a substring, as on Medplum (the in-memory matcher of @medplum/core would find any substring)', async () => {
    const alice = backend.patients.alice;
    const count = async (query: string) => {
      const answer = await search(alice.token, query);
      expect(answer.status, query).toBe(200);
      return ((answer.body as Bundle).entry ?? []).length;
    };
    const family = alice.patient.name?.[0]?.family as string;
    expect(await count(`Patient?name=${family.slice(0, 3)}`)).toBe(1);
    expect(await count(`Patient?family=${family.slice(0, 3).toLowerCase()}`)).toBe(1);
    expect(await count(`Patient?name=${family.slice(1)}`)).toBe(0);
    expect(await count(`Patient?name:contains=${family.slice(1)}`)).toBe(1);
    expect(await count(`Patient?family:exact=${family}`)).toBe(1);
    expect(await count(`Patient?family:exact=${family.toLowerCase()}`)).toBe(0);
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
