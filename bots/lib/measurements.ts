import type {
  CodeableConcept,
  Coding,
  Observation,
  ObservationDefinition,
  ObservationDefinitionQualifiedInterval,
  Patient,
  Range,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';

/**
 * Readings a patient submits for a measurement task, checked against the task's ObservationDefinitions
 * (JOURNEY B) and turned into the Observations the platform writes. Pure functions: the completion bot
 * reads, this decides, the bot writes.
 *
 * - A reading names its code as `system|code`; each of the task's definitions needs exactly one reading,
 *   and no reading may name anything else.
 * - Its unit is a UCUM code: the definition's `quantitativeDetails.unit` (stored as is) or its
 *   `customaryUnit` (converted: FHIR's `conversionFactor` turns the unit's value into the customary one,
 *   so customary / factor is stored). UCUM codes are case-sensitive and compared exactly.
 * - The value, in the stored unit, must lie inside the definition's `absolute` interval: outside it the
 *   reading cannot be real (a typo, a wrong unit), so it is refused rather than stored.
 * - It is not in the future (a minute of clock skew allowed).
 */
export interface Reading {
  code: string;
  value: number;
  unit: string;
  /** When it was taken (ISO 8601 with a time zone); absent: now. */
  effective?: string;
}

export type MeasurementProblem =
  | 'not_requested'
  | 'duplicate'
  | 'missing'
  | 'unit_not_allowed'
  | 'out_of_range'
  | 'in_future'
  | 'invalid_time';

/** One problem, as `422 invalid_measurement` lists them in `details.issues`. */
export interface MeasurementIssue {
  /** The reading's position in the request (absent for a missing reading). */
  index?: number;
  code: string;
  reason: MeasurementProblem;
  allowedUnits?: string[];
  /** The absolute interval, in the stored unit. */
  range?: { low?: number; high?: number; unit: string };
}

/** A reading that passed, in the stored (SI) unit, with what was entered when it was converted. */
export interface AcceptedReading {
  definition: ObservationDefinition;
  value: number;
  unit: string;
  entered?: { value: number; unit: string };
  effective: string;
}

const UCUM = 'http://unitsofmeasure.org';
const CLOCK_SKEW_MS = 60_000;

/** The UCUM code of a unit concept. */
const ucumCode = (unit: CodeableConcept | undefined): string | undefined =>
  unit?.coding?.find((c) => c.system === UCUM)?.code;

/** `system|code` of a definition's first coding (LOINC first where there is one). */
export function definitionCode(definition: ObservationDefinition): string {
  const codings = definition.code.coding ?? [];
  const coding = codings.find((c) => c.system === 'http://loinc.org') ?? codings[0];
  return `${coding?.system}|${coding?.code}`;
}

/** The units a reading of this definition may use: the stored unit first, then the customary one. */
export function allowedUnits(definition: ObservationDefinition): string[] {
  const details = definition.quantitativeDetails;
  const units = [ucumCode(details?.unit)];
  if (details?.conversionFactor) {
    units.push(ucumCode(details.customaryUnit));
  }
  return units.filter((u): u is string => u !== undefined);
}

function absoluteRange(definition: ObservationDefinition): Range | undefined {
  return definition.qualifiedInterval?.find((i) => i.category === 'absolute')?.range;
}

export function checkReadings(
  readings: readonly Reading[],
  definitions: readonly ObservationDefinition[],
  now: Date,
): { ok: true; readings: AcceptedReading[] } | { ok: false; issues: MeasurementIssue[] } {
  const issues: MeasurementIssue[] = [];
  const accepted: AcceptedReading[] = [];
  const byCode = new Map(definitions.map((d) => [definitionCode(d), d]));
  const seen = new Set<string>();
  for (const [index, reading] of readings.entries()) {
    const definition = byCode.get(reading.code);
    if (!definition) {
      issues.push({ index, code: reading.code, reason: 'not_requested' });
      continue;
    }
    if (seen.has(reading.code)) {
      issues.push({ index, code: reading.code, reason: 'duplicate' });
      continue;
    }
    seen.add(reading.code);
    const problem = checkReading(reading, definition, now);
    if ('reason' in problem) {
      issues.push({ index, code: reading.code, ...problem });
    } else {
      accepted.push(problem);
    }
  }
  for (const [code] of byCode) {
    if (!seen.has(code)) {
      issues.push({ code, reason: 'missing' });
    }
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, readings: accepted };
}

function checkReading(
  reading: Reading,
  definition: ObservationDefinition,
  now: Date,
): AcceptedReading | Omit<MeasurementIssue, 'index' | 'code'> {
  const details = definition.quantitativeDetails;
  const stored = ucumCode(details?.unit);
  const customary = details?.conversionFactor ? ucumCode(details.customaryUnit) : undefined;
  if (!stored || (reading.unit !== stored && reading.unit !== customary)) {
    return { reason: 'unit_not_allowed', allowedUnits: allowedUnits(definition) };
  }
  const converted = reading.unit === stored;
  const value = converted ? reading.value : reading.value / (details?.conversionFactor as number);
  const precision = details?.decimalPrecision;
  const rounded = precision === undefined ? value : Number(value.toFixed(precision));
  const range = absoluteRange(definition);
  if (!range || !within(rounded, range)) {
    // No absolute interval: nothing can be vouched for, so nothing is accepted (a definition error).
    return {
      reason: 'out_of_range',
      range: { low: range?.low?.value, high: range?.high?.value, unit: stored },
    };
  }
  const effective = reading.effective ?? now.toISOString();
  const at = Date.parse(effective);
  if (Number.isNaN(at)) {
    return { reason: 'invalid_time' };
  }
  if (at > now.getTime() + CLOCK_SKEW_MS) {
    return { reason: 'in_future' };
  }
  return {
    definition,
    value: rounded,
    unit: stored,
    entered: converted ? undefined : { value: reading.value, unit: reading.unit },
    effective: new Date(at).toISOString(),
  };
}

const within = (value: number, range: Range): boolean =>
  (range.low?.value === undefined || value >= range.low.value) &&
  (range.high?.value === undefined || value <= range.high.value);

/**
 * The intervals of one category that apply where the patient lives: those marked with the patient's
 * country (EXTENSIONS.intervalJurisdiction), else those marked with none. Age and gender qualifiers are
 * applied too, as @medplum/core's findObservationInterval applies them.
 */
function intervalsFor(
  definition: ObservationDefinition,
  patient: Patient,
  category: 'reference' | 'critical',
): ObservationDefinitionQualifiedInterval[] {
  const country = patient.address?.[0]?.country?.toUpperCase();
  const all = (definition.qualifiedInterval ?? []).filter((i) => i.category === category && fitsPerson(i, patient));
  const countryOf = (i: ObservationDefinitionQualifiedInterval) =>
    i.extension
      ?.find((e) => e.url === EXTENSIONS.intervalJurisdiction)
      ?.valueCodeableConcept?.coding?.find((c) => c.system === SYSTEMS.country)
      ?.code?.toUpperCase();
  const local = all.filter((i) => country !== undefined && countryOf(i) === country);
  return local.length > 0 ? local : all.filter((i) => countryOf(i) === undefined);
}

function fitsPerson(interval: ObservationDefinitionQualifiedInterval, patient: Patient): boolean {
  if (interval.gender && interval.gender !== patient.gender) {
    return false;
  }
  if (interval.age && patient.birthDate) {
    const years = (Date.now() - Date.parse(patient.birthDate)) / (365.25 * 24 * 3600 * 1000);
    return within(years, interval.age);
  }
  return true;
}

const INTERPRETATION = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
const DISPLAY: Record<string, string> = {
  L: 'Low',
  N: 'Normal',
  H: 'High',
  LL: 'Critical low',
  HH: 'Critical high',
};

/**
 * Interpretation against the patient's reference range (for their country): L, N or H; LL or HH when the
 * value also falls inside an applicable `critical` interval (such intervals describe the critical values,
 * as @medplum/core's findObservationInterval reads them). Undefined when no reference range applies.
 */
export function interpret(definition: ObservationDefinition, patient: Patient, value: number): Coding | undefined {
  const [reference] = intervalsFor(definition, patient, 'reference');
  if (!reference?.range) {
    return undefined;
  }
  const low = reference.range.low?.value;
  const high = reference.range.high?.value;
  const side = low !== undefined && value < low ? 'L' : high !== undefined && value > high ? 'H' : 'N';
  const critical = intervalsFor(definition, patient, 'critical').some((i) => i.range && within(value, i.range));
  const code = critical && side !== 'N' ? `${side}${side}` : side;
  return { system: INTERPRETATION, code, display: DISPLAY[code] };
}

/** True when an interpretation calls for a clinician's attention now (an urgent review task). */
export const isCritical = (interpretation: Coding | undefined): boolean =>
  interpretation?.code === 'LL' || interpretation?.code === 'HH';

const LOINC = 'http://loinc.org';
const VITAL_SIGNS: CodeableConcept = {
  coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }],
};

/**
 * The panels FHIR's vital signs profile (and US Core's) records some readings as: a blood pressure is one
 * Observation, the panel, whose components are the systolic and diastolic readings, never two Observations
 * (clinicians' tools read it so: the Provider app's Vitals looks for the panel). A measurement whose
 * readings are all of one panel's components is recorded as that panel.
 */
export const VITAL_SIGN_PANELS = [
  {
    code: { system: LOINC, code: '85354-9', display: 'Blood pressure panel with all children optional' },
    text: 'Blood pressure',
    components: ['8480-6', '8462-4'],
    // US Core's profile (which Medplum does not load, so it does not check it). Not FHIR's own `bp`: Medplum
    // 5.1.29 validates a resource against it and cannot match its component slices, refusing every panel
    // ("Incorrect number of values provided for slice 'SystolicBP'"; seen on a real Medplum, issue 48).
    profiles: ['http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure'],
  },
] as const;

/** The FHIR and US Core vital-sign profiles of a single reading's LOINC code. */
const SINGLE_PROFILES: Record<string, string[]> = {
  '29463-7': [
    'http://hl7.org/fhir/StructureDefinition/bodyweight',
    'http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight',
  ],
};

/** How the platform tells her own readings from a clinician's: she measured them and reported them. */
export const PATIENT_REPORTED: CodeableConcept = {
  coding: [
    { system: SYSTEMS.readingMethod, code: 'patient-reported', display: 'Measured and reported by the patient' },
  ],
  text: 'Measured and reported by the patient',
};

const loincOf = (definition: ObservationDefinition): string | undefined =>
  definition.code.coding?.find((c) => c.system === LOINC)?.code;

/** A reading's value as an Observation (or one of its components) states it. */
function readingValue(reading: AcceptedReading, interpretation: Coding | undefined) {
  return {
    valueQuantity: { value: reading.value, unit: reading.unit, system: UCUM, code: reading.unit },
    ...(interpretation ? { interpretation: [{ coding: [interpretation] }] } : {}),
    ...(reading.entered
      ? {
          extension: [
            {
              url: EXTENSIONS.enteredQuantity,
              valueQuantity: {
                value: reading.entered.value,
                unit: reading.entered.unit,
                system: UCUM,
                code: reading.entered.unit,
              },
            },
          ],
        }
      : {}),
  };
}

/**
 * The Observations the platform writes for a measurement's accepted readings (JOURNEY B: final, by the
 * patient, told apart from a clinician's by its performer and method), each with its interpretation: the
 * readings of a vital-sign panel as that panel (its components in the panel's order), any other reading
 * alone. `critical` is whether one of its values calls for a clinician now.
 */
export function observationsFor(
  readings: readonly AcceptedReading[],
  patient: Patient & { id: string },
  interpretation: (reading: AcceptedReading) => Coding | undefined,
): { observation: Observation; critical: boolean }[] {
  const byCode = new Map(readings.map((r) => [loincOf(r.definition), r]));
  const panel = VITAL_SIGN_PANELS.find(
    (p) => readings.length === p.components.length && p.components.every((code) => byCode.has(code)),
  );
  const common = (effective: string) => ({
    resourceType: 'Observation' as const,
    status: 'final' as const,
    subject: { reference: `Patient/${patient.id}` },
    performer: [{ reference: `Patient/${patient.id}` }],
    method: PATIENT_REPORTED,
    effectiveDateTime: effective,
  });
  if (panel) {
    const parts = panel.components.map((code) => byCode.get(code) as AcceptedReading);
    const interpreted = parts.map((r) => interpretation(r));
    return [
      {
        observation: {
          meta: { profile: [...panel.profiles] },
          ...common(parts[0].effective),
          category: [VITAL_SIGNS],
          code: { coding: [{ ...panel.code }], text: panel.text },
          component: parts.map((r, i) => ({ code: r.definition.code, ...readingValue(r, interpreted[i]) })),
        },
        critical: interpreted.some(isCritical),
      },
    ];
  }
  return readings.map((reading) => {
    const interpreted = interpretation(reading);
    const profiles = SINGLE_PROFILES[loincOf(reading.definition) ?? ''];
    return {
      observation: {
        ...(profiles ? { meta: { profile: profiles } } : {}),
        ...common(reading.effective),
        category: reading.definition.category?.length ? reading.definition.category : [VITAL_SIGNS],
        code: reading.definition.code,
        ...readingValue(reading, interpreted),
      },
      critical: isCritical(interpreted),
    };
  });
}
