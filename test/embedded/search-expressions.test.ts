import { evalFhirPath, globalSchema } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fullSearchExpressions } from '../../src/embedded/schema';
import { minimalResource } from '../support/attack-resources';
import { startTestBackend, type TestBackend } from '../support/backend';
import { freshPatient } from '../support/patients';

/**
 * Every shared search parameter now carries only its type's part of the expression
 * (src/embedded/schema.ts). On every resource the demo store holds (the platform's and the demo
 * data's) and on one made-up resource of every type, each narrowed parameter yields exactly the values the
 * whole expression yields, so no search, policy criteria or subscription matches differently.
 */
let backend: TestBackend;
let resources: Resource[];

beforeAll(async () => {
  backend = await startTestBackend();
  await freshPatient(backend, { tenant: 'northwind', state: 'CA' });
  resources = (backend.db.reader.prepare('SELECT content FROM resource').all() as { content: string }[]).map(
    (row) => JSON.parse(row.content) as Resource,
  );
  // And one of every resource type, its required elements and patient references filled in.
  const targets = {
    patient: 'Patient/p1',
    organization: 'Organization/o1',
    practitioner: 'Practitioner/r1',
    project: 'Project/x',
  };
  for (const [type, info] of Object.entries(globalSchema.types)) {
    if (info.searchParams && /^[A-Z]/.test(type)) {
      try {
        resources.push(minimalResource(type, targets));
      } catch {
        // A type whose required elements the attack suite cannot make up: the stored ones cover it or not.
      }
    }
  }
});
afterAll(() => backend?.close());

describe('search parameters narrowed to one type', () => {
  it('are narrowed (the common shared ones among them)', () => {
    const narrowed = (type: string, code: string) =>
      fullSearchExpressions.has(globalSchema.types[type]?.searchParams?.[code] as never);
    expect(narrowed('DocumentReference', 'identifier')).toBe(true);
    expect(narrowed('Consent', 'patient')).toBe(true);
    expect(narrowed('Observation', 'code')).toBe(true);
    expect(globalSchema.types.DocumentReference.searchParams?.identifier.expression).toBe(
      'DocumentReference.masterIdentifier | DocumentReference.identifier',
    );
  });

  it('yield on every stored resource exactly what the whole expression yields', () => {
    const types = new Set(resources.map((r) => r.resourceType));
    expect(types.size).toBeGreaterThan(100);
    let compared = 0;
    const differing: string[] = [];
    for (const resource of resources) {
      for (const param of Object.values(globalSchema.types[resource.resourceType]?.searchParams ?? {})) {
        const full = fullSearchExpressions.get(param);
        if (!full) {
          continue;
        }
        const narrowedValues = JSON.stringify(evalFhirPath(param.expression as string, resource));
        if (narrowedValues !== JSON.stringify(evalFhirPath(full, resource))) {
          differing.push(`${resource.resourceType} ${param.code}`);
        }
        compared++;
      }
    }
    expect(differing).toEqual([]);
    expect(compared).toBeGreaterThan(500);
  });
});
