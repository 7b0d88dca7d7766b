import type { Observation } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { validateWrite } from '../../src/embedded/store/validation';

/**
 * The embedded Medplum checks a resource against the FHIR profiles it declares, as Medplum does (issue 48:
 * Medplum 5.1.29 refused every blood pressure panel declaring FHIR's `bp` profile, which the embedded
 * Medplum had let through).
 */
const panel = (profile: string[]): Observation => ({
  resourceType: 'Observation',
  meta: { profile },
  status: 'final',
  category: [
    { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
  ],
  code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
  subject: { reference: 'Patient/p' },
  effectiveDateTime: '2026-12-01T10:00:00Z',
  component: [
    {
      code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] },
      valueQuantity: { value: 152, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
    },
    {
      code: { coding: [{ system: 'http://loinc.org', code: '8462-4' }] },
      valueQuantity: { value: 96, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
    },
  ],
});

describe('declared profiles', () => {
  it('refuses what FHIR’s bp profile refuses on Medplum, accepts the same panel declaring US Core’s (not loaded) or none', () => {
    expect(() => validateWrite(panel(['http://hl7.org/fhir/StructureDefinition/bp']))).toThrow(/slice/i);
    expect(() =>
      validateWrite(panel(['http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure'])),
    ).not.toThrow();
    expect(() => validateWrite(panel([]))).not.toThrow();
  });
});
