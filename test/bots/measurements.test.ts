import type { ObservationDefinition, ObservationDefinitionQualifiedInterval, Patient } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import {
  allowedUnits,
  checkReadings,
  definitionCode,
  interpret,
  isCritical,
  observationsFor,
  PATIENT_REPORTED,
} from '../../bots/lib/measurements';
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
    const [{ observation }] = observationsFor(result.readings, alice, (r) => interpret(weight, alice, r.value));
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

describe('vital signs as FHIR records them (issue 48)', () => {
  const systolic: ObservationDefinition = {
    resourceType: 'ObservationDefinition',
    category: [
      { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
    ],
    code: { coding: [{ system: 'http://loinc.org', code: '8480-6', display: 'Systolic blood pressure' }] },
    permittedDataType: ['Quantity'],
    quantitativeDetails: { unit: { coding: [{ system: UCUM, code: 'mm[Hg]' }] }, decimalPrecision: 1 },
    qualifiedInterval: [
      { category: 'absolute', range: { low: { value: 50, unit: 'mm[Hg]' }, high: { value: 300, unit: 'mm[Hg]' } } },
      { category: 'reference', range: { high: { value: 120, unit: 'mm[Hg]' } } },
      { category: 'critical', range: { low: { value: 180, unit: 'mm[Hg]' } } },
    ],
  };
  const diastolic: ObservationDefinition = {
    ...systolic,
    code: { coding: [{ system: 'http://loinc.org', code: '8462-4', display: 'Diastolic blood pressure' }] },
    qualifiedInterval: [
      { category: 'absolute', range: { low: { value: 30, unit: 'mm[Hg]' }, high: { value: 200, unit: 'mm[Hg]' } } },
      { category: 'reference', range: { high: { value: 80, unit: 'mm[Hg]' } } },
    ],
  };

  it('a blood pressure is one panel (85354-9) with systolic and diastolic components, patient-reported, US Core profiled', () => {
    const result = checkReadings(
      [
        { code: 'http://loinc.org|8462-4', value: 96, unit: 'mm[Hg]' },
        { code: 'http://loinc.org|8480-6', value: 152, unit: 'mm[Hg]' },
      ],
      [systolic, diastolic],
      NOW,
    );
    if (!result.ok) {
      throw new Error('expected the readings to pass');
    }
    const her = patient('US');
    const recorded = observationsFor(result.readings, her, (r) => interpret(r.definition, her, r.value));
    expect(recorded).toHaveLength(1);
    const [{ observation, critical }] = recorded;
    expect(critical).toBe(false);
    expect(observation).toMatchObject({
      meta: { profile: ['http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure'] },
      status: 'final',
      category: [{ coding: [{ code: 'vital-signs' }] }],
      code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }], text: 'Blood pressure' },
      subject: { reference: 'Patient/p1' },
      performer: [{ reference: 'Patient/p1' }],
      method: PATIENT_REPORTED,
      component: [
        {
          code: systolic.code,
          valueQuantity: { value: 152, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' },
          interpretation: [{ coding: [{ code: 'H' }] }],
        },
        {
          code: diastolic.code,
          valueQuantity: { value: 96, unit: 'mm[Hg]', system: UCUM, code: 'mm[Hg]' },
          interpretation: [{ coding: [{ code: 'H' }] }],
        },
      ],
    });
    expect(observation.valueQuantity).toBeUndefined();
    // A critical component makes the panel critical.
    const high = checkReadings(
      [
        { code: 'http://loinc.org|8480-6', value: 190, unit: 'mm[Hg]' },
        { code: 'http://loinc.org|8462-4', value: 96, unit: 'mm[Hg]' },
      ],
      [systolic, diastolic],
      NOW,
    );
    if (!high.ok) {
      throw new Error('expected the readings to pass');
    }
    expect(observationsFor(high.readings, her, (r) => interpret(r.definition, her, r.value))[0].critical).toBe(true);
  });
});

describe('measurement rules at their edges', () => {
  const check = (value: number, effective?: string, definition = heartRate) =>
    checkReadings([{ code: definitionCode(definition), value, unit: '/min', effective }], [definition], NOW);
  const reason = (result: ReturnType<typeof checkReadings>) => (result.ok ? 'ok' : result.issues[0]?.reason);

  it('the absolute range is inclusive: its low and high are recorded, a step beyond is refused', () => {
    expect([19, 20, 250, 251].map((value) => reason(check(value)))).toEqual([
      'out_of_range',
      'ok',
      'ok',
      'out_of_range',
    ]);
    // Without a decimal precision the value is kept as entered.
    expect(check(64.45)).toMatchObject({ ok: true, readings: [{ value: 64.45 }] });
  });

  it('a one-sided absolute range bounds one side; without one nothing is accepted', () => {
    const floorOnly: ObservationDefinition = {
      ...heartRate,
      qualifiedInterval: [{ category: 'absolute', range: range(20, undefined, '/min') }],
    };
    expect(check(10_000, undefined, floorOnly).ok).toBe(true);
    expect(check(10, undefined, floorOnly)).toEqual({
      ok: false,
      issues: [
        {
          index: 0,
          code: HEART_RATE,
          reason: 'out_of_range',
          range: { low: 20, high: undefined, unit: '/min' },
        },
      ],
    });
    const ceilingOnly: ObservationDefinition = {
      ...heartRate,
      qualifiedInterval: [{ category: 'absolute', range: range(undefined, 250, '/min') }],
    };
    expect(check(251, undefined, ceilingOnly)).toMatchObject({
      ok: false,
      issues: [{ range: { low: undefined, high: 250 } }],
    });
    for (const qualifiedInterval of [undefined, [interval('reference', 0, 500)]]) {
      expect(check(60, undefined, { ...heartRate, qualifiedInterval })).toMatchObject({
        ok: false,
        issues: [{ reason: 'out_of_range', range: { low: undefined, high: undefined, unit: '/min' } }],
      });
    }
  });

  it('up to a minute ahead of the clock is now; a millisecond more is the future; a time that is none is refused', () => {
    expect(reason(check(60, '2026-11-25T12:01:00.000Z'))).toBe('ok');
    expect(reason(check(60, '2026-11-25T12:01:00.001Z'))).toBe('in_future');
    expect(reason(check(60, 'yesterday'))).toBe('invalid_time');
  });

  it('units: the stored one, the customary one only with its conversion, UCUM codes only', () => {
    const noConversion: ObservationDefinition = {
      ...weight,
      quantitativeDetails: { ...weight.quantitativeDetails, conversionFactor: undefined },
    };
    expect(allowedUnits(noConversion)).toEqual(['kg']);
    expect(checkReadings([{ code: WEIGHT, value: 150, unit: '[lb_av]' }], [noConversion], NOW)).toMatchObject({
      ok: false,
      issues: [{ reason: 'unit_not_allowed', allowedUnits: ['kg'] }],
    });
    const notUcum: ObservationDefinition = {
      ...heartRate,
      quantitativeDetails: { unit: { coding: [{ system: 'urn:local', code: '/min' }] } },
    };
    const withoutDetails: ObservationDefinition = { ...heartRate, quantitativeDetails: undefined };
    for (const definition of [notUcum, withoutDetails]) {
      expect(allowedUnits(definition)).toEqual([]);
      expect(check(60, undefined, definition)).toMatchObject({
        ok: false,
        issues: [{ reason: 'unit_not_allowed', allowedUnits: [] }],
      });
    }
  });

  it('a definition is known by its LOINC coding when it has one, else by its first', () => {
    const coded = (...coding: { system: string; code: string }[]): ObservationDefinition => ({
      ...heartRate,
      code: { coding },
    });
    expect(
      definitionCode(coded({ system: 'urn:local', code: 'hr' }, { system: 'http://loinc.org', code: '8867-4' })),
    ).toBe(HEART_RATE);
    expect(definitionCode(coded({ system: 'urn:local', code: 'hr' }, { system: 'urn:other', code: 'x' }))).toBe(
      'urn:local|hr',
    );
    expect(definitionCode({ ...heartRate, code: {} })).toBe('undefined|undefined');
  });

  it('the reference range is inclusive too: its low and high are normal', () => {
    const us = patient('US');
    expect([49.9, 50, 100, 100.1].map((value) => interpret(weight, us, value)?.code)).toEqual(['L', 'N', 'N', 'H']);
    expect(interpret(weight, us, 35)).toEqual({
      system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation',
      code: 'LL',
      display: 'Critical low',
    });
    expect(isCritical(interpret(weight, us, 30))).toBe(true);
    expect(isCritical({ code: 'L' })).toBe(false);
    expect(isCritical(undefined)).toBe(false);
    // A critical interval reaching into the reference range does not make a normal value critical.
    const overlapping: ObservationDefinition = {
      ...weight,
      qualifiedInterval: [interval('reference', 50, 100), interval('critical', 90, undefined)],
    };
    expect(interpret(overlapping, us, 95)?.code).toBe('N');
    expect(interpret(overlapping, us, 101)?.code).toBe('HH');
  });

  it('the country’s range: hers by its code in any case, else one for no country, never another country’s', () => {
    const jpFirst: ObservationDefinition = {
      ...weight,
      qualifiedInterval: [interval('reference', 45, 90, 'JP'), interval('reference', 50, 100)],
    };
    expect(interpret(jpFirst, patient('US'), 95)?.code).toBe('N');
    expect(interpret(jpFirst, patient('jp'), 95)?.code).toBe('H');
    expect(interpret(jpFirst, { resourceType: 'Patient' }, 95)?.code).toBe('N');
    expect(interpret(jpFirst, { resourceType: 'Patient', address: [{ city: 'Lyon' }] }, 95)?.code).toBe('N');
    // Only the jurisdiction extension, and only its country coding, say whose range it is.
    const marked = (extension: ObservationDefinitionQualifiedInterval['extension']): ObservationDefinition => ({
      ...weight,
      qualifiedInterval: [{ ...interval('reference', 45, 90), extension }, interval('reference', 50, 100)],
    });
    const other = { valueCodeableConcept: { coding: [{ system: SYSTEMS.country, code: 'US' }] } };
    expect(interpret(marked([{ url: 'urn:other', ...other }]), patient('US'), 95)?.code).toBe('H');
    expect(
      interpret(
        marked([
          { url: 'urn:other', ...other },
          {
            url: EXTENSIONS.intervalJurisdiction,
            valueCodeableConcept: {
              coding: [
                { system: 'urn:other', code: 'US' },
                { system: SYSTEMS.country, code: 'JP' },
              ],
            },
          },
        ]),
        patient('US'),
        95,
      )?.code,
    ).toBe('N');
  });

  it('gender and age qualifiers: an interval for someone else does not apply', () => {
    const child = new Date(Date.now() - 6 * 365.25 * 24 * 3600_000).toISOString().slice(0, 10);
    const qualified: ObservationDefinition = {
      ...weight,
      qualifiedInterval: [
        { ...interval('reference', 10, 30), age: { low: { value: 0 }, high: { value: 17 } } },
        { ...interval('reference', 40, 60), gender: 'female' },
        interval('reference', 50, 100),
      ],
    };
    const person = (gender: 'female' | 'male', birthDate?: string): Patient => ({
      resourceType: 'Patient',
      gender,
      birthDate,
      address: [{ country: 'US' }],
    });
    expect(interpret(qualified, person('male', child), 25)?.code).toBe('N');
    expect(interpret(qualified, person('male', '1980-01-01'), 25)?.code).toBe('L');
    // Not the women's range (40-60) either: his is 50-100.
    expect(interpret(qualified, person('male', '1980-01-01'), 45)?.code).toBe('L');
    expect(interpret(qualified, person('female', '1980-01-01'), 55)?.code).toBe('N');
    expect(interpret(qualified, person('female', '1980-01-01'), 65)?.code).toBe('H');
    // Without a birth date an age qualifier cannot set her apart: the first interval applies.
    expect(interpret(qualified, person('male'), 35)?.code).toBe('H');
  });

  it('the Observation: vital signs unless the definition says otherwise; nothing entered when none was converted', () => {
    const result = checkReadings([{ code: HEART_RATE, value: 64, unit: '/min' }], [heartRate], NOW);
    if (!result.ok) {
      throw new Error('expected the reading to pass');
    }
    const [{ observation }] = observationsFor(result.readings, patient('US'), () => undefined);
    expect(observation.resourceType).toBe('Observation');
    expect(observation.category).toEqual([
      { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
    ]);
    expect(observation.extension).toBeUndefined();
    expect(observation.interpretation).toBeUndefined();
    const laboratory = [{ coding: [{ code: 'laboratory' }] }];
    const [{ observation: own }] = observationsFor(
      [{ ...result.readings[0], definition: { ...heartRate, category: laboratory } }],
      patient('US'),
      () => undefined,
    );
    expect(own.category).toEqual(laboratory);
  });
});

describe('measurement rules, what the first round of mutation testing found untested', () => {
  it('a unit given only as text is no unit; a one-sided reference range judges one side', () => {
    const textOnly: ObservationDefinition = {
      ...heartRate,
      quantitativeDetails: { unit: { text: 'beats per minute' } },
    };
    expect(checkReadings([{ code: HEART_RATE, value: 60, unit: '/min' }], [textOnly], NOW)).toMatchObject({
      ok: false,
      issues: [{ reason: 'unit_not_allowed', allowedUnits: [] }],
    });
    const above = (low: number | undefined, high: number | undefined, value: number) =>
      interpret({ ...weight, qualifiedInterval: [interval('reference', low, high)] }, patient('US'), value)?.code;
    expect([above(50, undefined, 49), above(50, undefined, 1_000)]).toEqual(['L', 'N']);
    expect([above(undefined, 100, 1), above(undefined, 100, 101)]).toEqual(['N', 'H']);
  });

  it('each interpretation carries its display', () => {
    const us = patient('US');
    expect([30, 48, 70, 95, 150, 250].map((value) => interpret(weight, us, value)?.display)).toEqual([
      'Critical low',
      'Low',
      'Normal',
      'Normal',
      'High',
      'Critical high',
    ]);
  });

  it('an address without a country, or no address at all, gets the range for no country', () => {
    for (const address of [[], [{ city: 'Lyon' }]]) {
      expect(interpret(weight, { resourceType: 'Patient', address }, 95)?.code).toBe('N');
    }
  });

  it('a jurisdiction marking that names no country marks nothing: the interval is one for no country', () => {
    const jurisdiction = (extension: Record<string, unknown>) =>
      ({ url: EXTENSIONS.intervalJurisdiction, ...extension }) as NonNullable<
        ObservationDefinitionQualifiedInterval['extension']
      >[number];
    for (const marking of [
      jurisdiction({ valueString: 'US' }),
      jurisdiction({ valueCodeableConcept: { text: 'United States' } }),
      jurisdiction({ valueCodeableConcept: { coding: [{ system: 'urn:other', code: 'US' }] } }),
      jurisdiction({ valueCodeableConcept: { coding: [{ system: SYSTEMS.country, display: 'United States' }] } }),
    ]) {
      const definition: ObservationDefinition = {
        ...weight,
        qualifiedInterval: [{ ...interval('reference', 45, 90), extension: [marking] }, interval('reference', 50, 100)],
      };
      expect(interpret(definition, patient('US'), 95)?.code, JSON.stringify(marking)).toBe('H');
    }
  });
});
