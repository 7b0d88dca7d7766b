import type { ObservationDefinition, ObservationDefinitionQualifiedInterval, Patient } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { checkReadings, interpret, isCritical, observationFor } from '../../bots/lib/measurements';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';

/** bots/lib/measurements.ts: the rules a measurement task's readings are held to (JOURNEY B). */
const UCUM = 'http://unitsofmeasure.org';
const NOW = new Date('2026-11-25T12:00:00Z');

const range = (low: number | undefined, high: number | undefined, unit: string) => ({
  ...(low === undefined ? {} : { low: { value: low, unit, system: UCUM, code: unit } }),
  ...(high === undefined ? {} : { high: { value: high, unit, system: UCUM, code: unit } }),
});

function interval(
  category: 'absolute' | 'reference' | 'critical',
  low: number | undefined,
  high: number | undefined,
  country?: string,
): ObservationDefinitionQualifiedInterval {
  return {
    category,
    range: range(low, high, 'kg'),
    ...(country
      ? {
          extension: [
            {
              url: EXTENSIONS.intervalJurisdiction,
              valueCodeableConcept: { coding: [{ system: SYSTEMS.country, code: country }] },
            },
          ],
        }
      : {}),
  };
}

/** Body weight: kg, or pounds converted (1 kg = 2.20462 [lb_av]); 20-300 kg can be recorded. */
const weight: ObservationDefinition = {
  resourceType: 'ObservationDefinition',
  code: { coding: [{ system: 'http://loinc.org', code: '29463-7', display: 'Body weight' }] },
  quantitativeDetails: {
    unit: { coding: [{ system: UCUM, code: 'kg' }] },
    customaryUnit: { coding: [{ system: UCUM, code: '[lb_av]' }] },
    conversionFactor: 2.20462,
    decimalPrecision: 1,
  },
  qualifiedInterval: [
    interval('absolute', 20, 300),
    interval('reference', 50, 100),
    interval('reference', 45, 90, 'JP'),
    interval('critical', undefined, 35),
    interval('critical', 200, undefined),
  ],
};

const heartRate: ObservationDefinition = {
  resourceType: 'ObservationDefinition',
  code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
  quantitativeDetails: { unit: { coding: [{ system: UCUM, code: '/min' }] } },
  qualifiedInterval: [{ category: 'absolute', range: range(20, 250, '/min') }],
};

const WEIGHT = 'http://loinc.org|29463-7';
const HEART_RATE = 'http://loinc.org|8867-4';
const patient = (country: string): Patient & { id: string } => ({
  resourceType: 'Patient',
  id: 'p1',
  address: [{ country, state: 'CA' }],
});

describe('measurement readings', () => {
  it('accepts a reading in the stored unit as it is, and one in the customary unit converted', () => {
    const result = checkReadings(
      [
        { code: WEIGHT, value: 180, unit: '[lb_av]', effective: '2026-11-25T08:00:00+01:00' },
        { code: HEART_RATE, value: 64, unit: '/min' },
      ],
      [weight, heartRate],
      NOW,
    );
    expect(result.ok).toBe(true);
    const [kg, bpm] = result.ok ? result.readings : [];
    expect(kg).toMatchObject({ value: 81.6, unit: 'kg', entered: { value: 180, unit: '[lb_av]' } });
    expect(kg.effective).toBe('2026-11-25T07:00:00.000Z');
    expect(bpm).toMatchObject({ value: 64, unit: '/min', effective: NOW.toISOString() });
    expect(bpm.entered).toBeUndefined();
  });

  it('names every problem with its reading: unknown code, wrong unit, out of range, future, missing, duplicate', () => {
    const result = checkReadings(
      [
        { code: 'http://loinc.org|8302-2', value: 170, unit: 'cm' },
        { code: WEIGHT, value: 80, unit: 'KG' },
        { code: WEIGHT, value: 80, unit: 'kg' },
      ],
      [weight, heartRate],
      NOW,
    );
    expect(result).toEqual({
      ok: false,
      issues: [
        { index: 0, code: 'http://loinc.org|8302-2', reason: 'not_requested' },
        { index: 1, code: WEIGHT, reason: 'unit_not_allowed', allowedUnits: ['kg', '[lb_av]'] },
        { index: 2, code: WEIGHT, reason: 'duplicate' },
        { code: HEART_RATE, reason: 'missing' },
      ],
    });
    const bounds = checkReadings(
      [
        { code: WEIGHT, value: 700, unit: '[lb_av]' },
        { code: HEART_RATE, value: 60, unit: '/min', effective: '2026-11-25T12:05:00Z' },
      ],
      [weight, heartRate],
      NOW,
    );
    expect(bounds).toEqual({
      ok: false,
      issues: [
        { index: 0, code: WEIGHT, reason: 'out_of_range', range: { low: 20, high: 300, unit: 'kg' } },
        { index: 1, code: HEART_RATE, reason: 'in_future' },
      ],
    });
    // Within the minute of clock skew is not the future.
    const skewed = checkReadings(
      [{ code: HEART_RATE, value: 60, unit: '/min', effective: '2026-11-25T12:00:30Z' }],
      [heartRate],
      NOW,
    );
    expect(skewed.ok).toBe(true);
  });

  it('interprets against the reference range of the patient’s country, critical values as LL/HH', () => {
    expect(interpret(weight, patient('US'), 70)?.code).toBe('N');
    expect(interpret(weight, patient('US'), 95)?.code).toBe('N');
    // Japan has its own reference range; others fall back to the one without a country.
    expect(interpret(weight, patient('JP'), 95)?.code).toBe('H');
    expect(interpret(weight, patient('US'), 48)?.code).toBe('L');
    expect(interpret(weight, patient('US'), 30)?.code).toBe('LL');
    expect(interpret(weight, patient('US'), 250)?.code).toBe('HH');
    expect(isCritical(interpret(weight, patient('US'), 250))).toBe(true);
    expect(isCritical(interpret(weight, patient('US'), 95))).toBe(false);
    expect(interpret(heartRate, patient('US'), 60)).toBeUndefined();
  });

  it('builds the Observation the platform writes: final, by the patient, with what was entered', () => {
    const result = checkReadings([{ code: WEIGHT, value: 180, unit: '[lb_av]' }], [weight], NOW);
    if (!result.ok) {
      throw new Error('expected the reading to pass');
    }
    const alice = patient('US');
    const observation = observationFor(result.readings[0], alice, interpret(weight, alice, result.readings[0].value));
    expect(observation).toMatchObject({
      status: 'final',
      code: weight.code,
      subject: { reference: 'Patient/p1' },
      performer: [{ reference: 'Patient/p1' }],
      valueQuantity: { value: 81.6, unit: 'kg', system: UCUM, code: 'kg' },
      interpretation: [{ coding: [{ code: 'N' }] }],
      extension: [{ url: EXTENSIONS.enteredQuantity, valueQuantity: { value: 180, code: '[lb_av]' } }],
    });
  });
});
