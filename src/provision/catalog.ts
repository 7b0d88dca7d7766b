import type {
  ActivityDefinition,
  CodeableConcept,
  CodeSystem,
  Extension,
  HealthcareService,
  Location,
  Meta,
  ObservationDefinition,
  ObservationDefinitionQualifiedInterval,
  Organization,
  PlanDefinition,
  PlanDefinitionAction,
  Quantity,
  Questionnaire,
  QuestionnaireItem,
  Resource,
  Timing,
  ValueSet,
} from '@medplum/fhirtypes';
import { type Program, US_STATES, type UsState } from '../../contracts/clinic';
import { EXTENSIONS, type PlanType, SYSTEMS, VISIT_TYPES, type VisitType } from '../../contracts/systems';
import { PLATFORM_CATALOG_TAG, TENANT_CATALOG_TAG } from './agreements';
import type { KeyedResource } from './definition';
import { keyRef } from './definition';

/**
 * The demo care catalog (JOURNEY A): what `GET /v1/protocols` lists and the intake, program and
 * spine workflows start. Encoding:
 * - an offering is a HealthcareService (`active`, catalog tag, `fronts-plan` = the plan's `url|version`,
 *   `coverageArea` = jurisdiction Locations when it is restricted);
 * - a plan is a PlanDefinition whose `type` carries SYSTEMS.planType (assessment | program |
 *   clinical-protocol); its actions carry the kind of task they issue (`code`, SYSTEMS.taskKind) and
 *   point at a pinned Questionnaire or ActivityDefinition (`definitionCanonical`, `url|version`);
 * - a measurement is an ActivityDefinition (kind Task, code measurement) naming its ObservationDefinitions
 *   (`observationRequirement`); a treatment option an ActivityDefinition of kind MedicationRequest with
 *   its RxNorm product (JOURNEY D.2);
 * - an ObservationDefinition's `quantitativeDetails.unit` is the unit readings are stored in; a reading in
 *   `customaryUnit` converts as value / `conversionFactor` (R4: customary = unit x conversionFactor); the
 *   `absolute` interval bounds what can be recorded; `reference` (and `critical`) intervals interpret it,
 *   the ones with EXTENSIONS.intervalJurisdiction only for patients of that country.
 * Everything pinned by version (Questionnaire, ActivityDefinition, PlanDefinition `url|version`;
 * ObservationDefinition by its id's version) is write-once: a change is a new version under a new key.
 */

const BASE = 'https://patient-care.example';
const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
const HL7_PLAN_TYPE = 'http://terminology.hl7.org/CodeSystem/plan-definition-type';
const LOCATION_TYPE = 'http://terminology.hl7.org/CodeSystem/location-physical-type';
const RANGE_MEANING = 'http://terminology.hl7.org/CodeSystem/referencerange-meaning';
const OBSERVATION_CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';

/** Who publishes an item: a tenant (its key), or the platform (undefined). */
type Publisher = string | undefined;

function published(tenant: Publisher): Meta {
  return tenant
    ? { accounts: [keyRef<Organization>(`org-${tenant}`)], tag: [TENANT_CATALOG_TAG] }
    : { tag: [PLATFORM_CATALOG_TAG] };
}

const keyOf = (tenant: Publisher, name: string): string => (tenant ? `catalog-${tenant}-${name}` : `catalog-${name}`);
const urlOf = (tenant: Publisher, path: string): string => (tenant ? `${BASE}/${tenant}/${path}` : `${BASE}/${path}`);
const coding = (system: string, code: string, display?: string): CodeableConcept => ({
  coding: [{ system, code, ...(display ? { display } : {}) }],
});
const quantity = (value: number, unit: string): Quantity => ({ value, unit, system: UCUM, code: unit });

// ------------------------------------------------------------------ measurements

interface Interval {
  low?: number;
  high?: number;
  /** ISO 3166-1 alpha-2: the interval applies to patients of this country only. */
  country?: string;
}

interface MeasurementSpec {
  name: string;
  loinc: string;
  display: string;
  unit: string;
  customary?: { unit: string; factor: number };
  absolute: Required<Pick<Interval, 'low' | 'high'>>;
  reference?: Interval[];
  critical?: Interval[];
}

function interval(category: 'absolute' | 'reference' | 'critical', unit: string, spec: Interval) {
  const result: ObservationDefinitionQualifiedInterval = {
    category,
    range: {
      ...(spec.low === undefined ? {} : { low: quantity(spec.low, unit) }),
      ...(spec.high === undefined ? {} : { high: quantity(spec.high, unit) }),
    },
  };
  if (category === 'reference') {
    result.context = coding(RANGE_MEANING, 'normal', 'Normal Range');
  }
  if (spec.country) {
    result.extension = [
      { url: EXTENSIONS.intervalJurisdiction, valueCodeableConcept: coding(SYSTEMS.country, spec.country) },
    ];
  }
  return result;
}

function observationDefinition(tenant: Publisher, spec: MeasurementSpec): KeyedResource {
  const resource: ObservationDefinition = {
    resourceType: 'ObservationDefinition',
    meta: published(tenant),
    category: [coding(OBSERVATION_CATEGORY, 'vital-signs', 'Vital Signs')],
    code: coding(LOINC, spec.loinc, spec.display),
    permittedDataType: ['Quantity'],
    quantitativeDetails: {
      unit: coding(UCUM, spec.unit),
      ...(spec.customary
        ? { customaryUnit: coding(UCUM, spec.customary.unit), conversionFactor: spec.customary.factor }
        : {}),
      decimalPrecision: 1,
    },
    qualifiedInterval: [
      interval('absolute', spec.unit, spec.absolute),
      ...(spec.reference ?? []).map((r) => interval('reference', spec.unit, r)),
      ...(spec.critical ?? []).map((r) => interval('critical', spec.unit, r)),
    ],
  };
  return { key: keyOf(tenant, `measure-${spec.name}`), resource, writeOnce: true };
}

const BODY_WEIGHT: MeasurementSpec = {
  name: 'body-weight',
  loinc: '29463-7',
  display: 'Body weight',
  unit: 'kg',
  customary: { unit: '[lb_av]', factor: 2.20462 },
  absolute: { low: 20, high: 400 },
};

// ACC/AHA 2017 (US) calls under 120/80 normal; elsewhere (ESC, WHO) under 140/90 is the usual bound.
const SYSTOLIC: MeasurementSpec = {
  name: 'systolic',
  loinc: '8480-6',
  display: 'Systolic blood pressure',
  unit: 'mm[Hg]',
  customary: { unit: 'kPa', factor: 0.133322 },
  absolute: { low: 50, high: 300 },
  reference: [{ high: 120, country: 'US' }, { high: 140 }],
  critical: [{ low: 180 }],
};

const DIASTOLIC: MeasurementSpec = {
  name: 'diastolic',
  loinc: '8462-4',
  display: 'Diastolic blood pressure',
  unit: 'mm[Hg]',
  customary: { unit: 'kPa', factor: 0.133322 },
  absolute: { low: 30, high: 200 },
  reference: [{ high: 80, country: 'US' }, { high: 90 }],
  critical: [{ low: 120 }],
};

// ------------------------------------------------------------------ questionnaires and activities

interface Definition {
  key: string;
  canonical: string;
  title: string;
  resources: KeyedResource[];
}

function questionnaire(tenant: Publisher, name: string, title: string, item: QuestionnaireItem[]): Definition {
  const url = urlOf(tenant, `questionnaires/${name}`);
  const resource: Questionnaire = {
    resourceType: 'Questionnaire',
    meta: published(tenant),
    url,
    version: '1',
    name: title.replace(/[^A-Za-z0-9]/g, ''),
    title,
    status: 'active',
    subjectType: ['Patient'],
    item,
  };
  const key = keyOf(tenant, `questionnaire-${name}`);
  return { key, canonical: `${url}|1`, title, resources: [{ key, resource, writeOnce: true }] };
}

/** A measurement the patient takes: a Task naming the ObservationDefinitions its readings must meet. */
function measurement(tenant: Publisher, name: string, title: string, specs: MeasurementSpec[]): Definition {
  const definitions = specs.map((spec) => observationDefinition(tenant, spec));
  const url = urlOf(tenant, `activities/${name}`);
  const resource: ActivityDefinition = {
    resourceType: 'ActivityDefinition',
    meta: published(tenant),
    url,
    version: '1',
    name: title.replace(/[^A-Za-z0-9]/g, ''),
    title,
    status: 'active',
    kind: 'Task',
    code: coding(SYSTEMS.taskKind, 'measurement'),
    observationRequirement: definitions.map((d) => keyRef<ObservationDefinition>(d.key)),
  };
  const key = keyOf(tenant, `activity-${name}`);
  return { key, canonical: `${url}|1`, title, resources: [...definitions, { key, resource, writeOnce: true }] };
}

/**
 * A visit: an Appointment of a kind (SYSTEMS.visitType, VISIT_TYPES) and its length. The segments it is
 * made of are the plan action's sub-actions (purpose, in order), so the same visit can be composed
 * differently by two plans.
 */
function visitDefinition(tenant: Publisher, name: string, title: string, type: VisitType): Definition {
  const url = urlOf(tenant, `visits/${name}`);
  const length =
    type === 'async-review'
      ? { value: VISIT_TYPES[type].reviewHours, unit: 'h', system: 'http://unitsofmeasure.org', code: 'h' }
      : { value: VISIT_TYPES[type].minutes, unit: 'min', system: 'http://unitsofmeasure.org', code: 'min' };
  const resource: ActivityDefinition = {
    resourceType: 'ActivityDefinition',
    meta: published(tenant),
    url,
    version: '1',
    name: title.replace(/[^A-Za-z0-9]/g, ''),
    title,
    status: 'active',
    kind: 'Appointment',
    code: coding(SYSTEMS.visitType, type, VISIT_TYPES[type].display),
    timingDuration: length,
  };
  const key = keyOf(tenant, `visit-${name}`);
  return { key, canonical: `${url}|1`, title, resources: [{ key, resource, writeOnce: true }] };
}

/**
 * An eligibility rule of a treatment option (JOURNEY D.2), as data on the option: a FHIRPath expression
 * over the patient's record (a Bundle of her Patient, Conditions, Observations, MedicationRequests and
 * AllergyIntolerances) that is true when the rule FIRES, i.e. the option is not safe for her for this
 * reason: a contraindication or an interaction she has, or a prerequisite she lacks.
 */
interface RuleSpec {
  code: string;
  kind: 'contraindication' | 'interaction' | 'prerequisite';
  description: string;
  expression: string;
  /**
   * The facts the rule needs to be decided: each a name (what the clinician would record) and a FHIRPath
   * expression true when her record has it. A rule that does not fire while one of them is missing is
   * "not determined", never clear (issue 48).
   */
  requires?: Fact[];
}

interface Fact {
  fact: string;
  known: string;
}

interface TreatmentSpec {
  name: string;
  title: string;
  rxnorm: string;
  product: string;
  dosage: string;
  rules: RuleSpec[];
  /** Its published version ('1' when absent); a later one is published under its own key. */
  version?: string;
}

const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';

/** An active Condition of hers with one of these ICD-10-CM codes (a code ending in `*`: that prefix). */
const hasCondition = (...codes: string[]): string =>
  `entry.resource.ofType(Condition).where(clinicalStatus.coding.code = 'active' and code.coding.where(system = '${ICD10CM}' and (${codes
    .map((c) => (c.endsWith('*') ? `code.startsWith('${c.slice(0, -1)}')` : `code = '${c}'`))
    .join(' or ')})).exists()).exists()`;

/** An active order of hers for one of these RxNorm codes. */
const takes = (...codes: string[]): string =>
  `entry.resource.ofType(MedicationRequest).where(status = 'active' and intent = 'order' and medicationCodeableConcept.coding.where(system = '${RXNORM}' and (${codes
    .map((c) => `code = '${c}'`)
    .join(' or ')})).exists()).exists()`;

/** No systolic blood pressure reading of hers is on record (alone, as before, or in a blood pressure panel). */
const NO_BLOOD_PRESSURE =
  "entry.resource.ofType(Observation).where(code.coding.where(code = '8480-6').exists() or component.code.coding.where(code = '8480-6').exists()).exists().not()";

/** A final result of hers for one of these LOINC codes. */
const hasResult = (...codes: string[]): string =>
  `entry.resource.ofType(Observation).where(status in ('final' | 'amended' | 'corrected') and code.coding.where(system = '${LOINC}' and (${codes
    .map((c) => `code = '${c}'`)
    .join(' or ')})).exists()).exists()`;

/** A final result of hers for this LOINC code whose value (in this UCUM unit) satisfies the comparison. */
const resultWhere = (codes: string[], unit: string, comparison: string): string =>
  `entry.resource.ofType(Observation).where(status in ('final' | 'amended' | 'corrected') and code.coding.where(system = '${LOINC}' and (${codes
    .map((c) => `code = '${c}'`)
    .join(
      ' or ',
    )})).exists() and value.ofType(Quantity).where(code = '${unit}' and value ${comparison}).exists()).exists()`;

const PREGNANCY_STATUS = '82810-3';
const PREGNANT = 'LA15173-0';
const POTASSIUM = '2823-3';
const EGFR = ['33914-3', '62238-1', '98979-8'];

const SEX: Fact = { fact: 'sex (administrative gender)', known: 'entry.resource.ofType(Patient).gender.exists()' };
const BIRTH_DATE: Fact = { fact: 'date of birth', known: 'entry.resource.ofType(Patient).birthDate.exists()' };
/** Known for a man (by his record's gender); for anyone else, a pregnancy status result (LOINC 82810-3). */
const PREGNANCY: Fact = {
  fact: `pregnancy status (LOINC ${PREGNANCY_STATUS}; not needed for a male patient)`,
  known: `entry.resource.ofType(Patient).where(gender = 'male').exists() or ${hasResult(PREGNANCY_STATUS)}`,
};
const KIDNEY_FUNCTION: Fact = {
  fact: `kidney function (an eGFR result, LOINC ${EGFR.join(' or ')})`,
  known: hasResult(...EGFR),
};
const POTASSIUM_LEVEL: Fact = { fact: `serum potassium (LOINC ${POTASSIUM})`, known: hasResult(POTASSIUM) };

const RECENT_READING: RuleSpec = {
  code: 'blood-pressure-on-record',
  kind: 'prerequisite',
  description: 'A blood pressure reading must be on record before an antihypertensive is started.',
  expression: NO_BLOOD_PRESSURE,
};

function eligibilityRule(rule: RuleSpec): Extension {
  return {
    url: EXTENSIONS.eligibilityRule,
    extension: [
      { url: 'code', valueCode: rule.code },
      { url: 'kind', valueCode: rule.kind },
      { url: 'description', valueString: rule.description },
      { url: 'expression', valueExpression: { language: 'text/fhirpath', expression: rule.expression } },
      ...(rule.requires ?? []).map((f) => ({
        url: 'requires',
        valueExpression: { language: 'text/fhirpath' as const, description: f.fact, expression: f.known },
      })),
    ],
  };
}

/** A treatment option (JOURNEY D.2): a MedicationRequest template with its RxNorm product and dosage. */
function treatmentOption(tenant: Publisher, spec: TreatmentSpec): Definition {
  const url = urlOf(tenant, `treatment-options/${spec.name}`);
  const resource: ActivityDefinition = {
    resourceType: 'ActivityDefinition',
    meta: published(tenant),
    url,
    version: spec.version ?? '1',
    name: spec.title.replace(/[^A-Za-z0-9]/g, ''),
    title: spec.title,
    status: 'active',
    kind: 'MedicationRequest',
    intent: 'proposal',
    extension: spec.rules.map(eligibilityRule),
    productCodeableConcept: coding(RXNORM, spec.rxnorm, spec.product),
    dosage: [
      {
        text: spec.dosage,
        timing: { repeat: { frequency: 1, period: 1, periodUnit: 'd' } },
        doseAndRate: [{ doseQuantity: { value: 1, unit: 'tablet', system: UCUM, code: '{tbl}' } }],
      },
    ],
  };
  const version = spec.version ?? '1';
  const first = keyOf(tenant, `option-${spec.name}`);
  const key = version === '1' ? first : `${first}-v${version}`;
  return {
    key,
    canonical: `${url}|${version}`,
    title: spec.title,
    resources: [...superseded(first, version, resource), { key, resource, writeOnce: true }],
  };
}

/** The entries that retire a definition's earlier versions (published under the keys before this one's). */
function superseded(key: string, version: string, resource: Resource): KeyedResource[] {
  return Array.from({ length: Number(version) - 1 }, (_, i) => ({
    key: i === 0 ? key : `${key}-v${i + 1}`,
    resource: { resourceType: resource.resourceType } as Resource,
    retire: true,
  }));
}

// ------------------------------------------------------------------ plans and offerings

const kind = (code: 'questionnaire' | 'measurement' | 'visit') => [coding(SYSTEMS.taskKind, code)];
const WEEKLY: Timing = { repeat: { frequency: 1, period: 1, periodUnit: 'wk' } };
const MONTHLY: Timing = { repeat: { frequency: 1, period: 1, periodUnit: 'mo' } };
const QUARTERLY: Timing = { repeat: { frequency: 1, period: 3, periodUnit: 'mo' } };

const answer = (definition: Definition, title: string, timing?: Timing): PlanDefinitionAction => ({
  title,
  code: kind('questionnaire'),
  definitionCanonical: definition.canonical,
  ...(timing ? { timingTiming: timing } : {}),
});

const measure = (definition: Definition, title: string, timing?: Timing): PlanDefinitionAction => ({
  title,
  code: kind('measurement'),
  definitionCanonical: definition.canonical,
  ...(timing ? { timingTiming: timing } : {}),
});

/** A visit the plan books, made of segments in this order (its sub-actions: purpose only). */
const visit = (definition: Definition, title: string, segments: string[], timing?: Timing): PlanDefinitionAction => ({
  title,
  code: kind('visit'),
  definitionCanonical: definition.canonical,
  ...(timing ? { timingTiming: timing } : {}),
  action: segments.map((purpose) => ({ title: purpose })),
});

interface OfferingSpec {
  name: string;
  /** The plan's url path under the publisher, e.g. `assessments/weight-intake`. */
  path: string;
  type: PlanType;
  title: string;
  service: string;
  comment: string;
  action: PlanDefinitionAction[];
  /** Agreement urls the plan depends on (spec: agreements attached to the assessment or care plan). */
  agreements?: string[];
  /** Jurisdiction Location keys the offering is restricted to. */
  coverage?: string[];
  /** ICD-10-CM codes of the conditions a protocol treats (its goal's `addresses`). */
  treats?: string[];
  /** Keys kept from before this file existed (tests and stores know them). */
  keys?: { plan: string; service: string };
  /** The plan's published version ('1' when absent); a later one is published under its own key. */
  version?: string;
}

function offering(tenant: Publisher, spec: OfferingSpec): KeyedResource[] {
  const url = urlOf(tenant, spec.path);
  const version = spec.version ?? '1';
  const plan: PlanDefinition = {
    resourceType: 'PlanDefinition',
    meta: published(tenant),
    url,
    version,
    name: spec.title.replace(/[^A-Za-z0-9]/g, ''),
    title: spec.title,
    status: 'active',
    type: {
      coding: [
        { system: SYSTEMS.planType, code: spec.type },
        ...(spec.type === 'clinical-protocol' ? [{ system: HL7_PLAN_TYPE, code: 'clinical-protocol' }] : []),
      ],
    },
    ...(spec.agreements
      ? {
          // FHIR-natural attachment of an agreement: the plan depends on it (the agreement's url).
          relatedArtifact: spec.agreements.map((resource) => ({
            type: 'depends-on' as const,
            label: 'agreement',
            resource,
          })),
        }
      : {}),
    ...(spec.treats
      ? {
          goal: [
            {
              description: { text: `Treat ${spec.title.toLowerCase()}` },
              addresses: spec.treats.map((code) => coding(ICD10CM, code)),
            },
          ],
        }
      : {}),
    action: spec.action,
  };
  const service: HealthcareService = {
    resourceType: 'HealthcareService',
    meta: published(tenant),
    active: true,
    name: spec.service,
    comment: spec.comment,
    ...(tenant ? { providedBy: keyRef<Organization>(`org-${tenant}`) } : {}),
    ...(spec.coverage ? { coverageArea: spec.coverage.map((key) => keyRef<Location>(key)) } : {}),
    extension: [{ url: EXTENSIONS.frontsPlan, valueCanonical: `${url}|${version}` }],
  };
  const planKey = spec.keys?.plan ?? keyOf(tenant, `plan-${spec.name}`);
  return [
    ...superseded(planKey, version, plan),
    { key: version === '1' ? planKey : `${planKey}-v${version}`, resource: plan, writeOnce: true },
    { key: spec.keys?.service ?? keyOf(tenant, `service-${spec.name}`), resource: service },
  ];
}

/** A jurisdiction an offering may be restricted to: a Location of kind jurisdiction (physicalType jdn). */
function jurisdiction(country: string, state: string, name: string): KeyedResource {
  const resource: Location = {
    resourceType: 'Location',
    meta: published(undefined),
    identifier: [{ system: SYSTEMS.jurisdiction, value: `${country}-${state}` }],
    status: 'active',
    mode: 'kind',
    name,
    physicalType: coding(LOCATION_TYPE, 'jdn', 'Jurisdiction'),
    address: { state, country },
  };
  return { key: jurisdictionKey(country, state), resource };
}

export const jurisdictionKey = (country: string, state: string) =>
  `catalog-jurisdiction-${country}-${state}`.toLowerCase();

const JURISDICTIONS = [
  jurisdiction('US', 'CA', 'California'),
  jurisdiction('US', 'NY', 'New York'),
  jurisdiction('US', 'TX', 'Texas'),
];

/** The platform's assessment with an attached agreement: weight-management intake, every tenant's. */
function platformCatalog(): KeyedResource[] {
  const history = questionnaire(undefined, 'weight-history', 'Weight history', [
    { linkId: 'goal', text: 'What weight would you like to reach (kg)?', type: 'decimal' },
    {
      linkId: 'previous-programs',
      text: 'Have you taken part in a weight-management program before?',
      type: 'boolean',
      required: true,
    },
    { linkId: 'lab-results', text: 'Recent lab results, if you have them (PDF or image)', type: 'attachment' },
  ]);
  const weight = measurement(undefined, 'body-weight', 'Body weight', [BODY_WEIGHT]);
  return [
    ...history.resources,
    ...weight.resources,
    ...offering(undefined, {
      name: 'weight-intake',
      path: 'assessments/weight-intake',
      type: 'assessment',
      title: 'Weight-management intake',
      service: 'Weight-management assessment',
      comment: 'A short questionnaire and your current weight, reviewed by a clinician.',
      agreements: [`${BASE}/agreements/weight-program`],
      action: [answer(history, 'Your weight history'), measure(weight, 'Your current weight')],
      keys: { plan: 'assessment-weight-intake', service: 'service-weight-intake' },
    }),
  ];
}

/**
 * A tenant's own catalog: a blood-pressure assessment (questionnaire and measurements), a monitoring
 * program and a treatment protocol with two options. Treatment is prescribed under a state licence, so
 * the protocol is offered only where the tenant is licensed (`licensedIn`, a jurisdiction Location).
 */
function tenantCatalog(tenant: string, licensedIn: readonly string[]): KeyedResource[] {
  const history = questionnaire(tenant, 'blood-pressure-history', 'Blood pressure history', [
    {
      linkId: 'diagnosed',
      text: 'Has a clinician ever told you that you have high blood pressure?',
      type: 'boolean',
      required: true,
    },
    { linkId: 'medication', text: 'Do you take medicine for your blood pressure?', type: 'boolean', required: true },
    { linkId: 'symptoms', text: 'Headaches, dizziness or other symptoms you have noticed', type: 'text' },
    {
      linkId: 'reading-photo',
      text: 'A photo of a recent reading or a letter from your doctor (optional)',
      type: 'attachment',
    },
  ]);
  const checkIn = questionnaire(tenant, 'monthly-check-in', 'Monthly check-in', [
    { linkId: 'side-effects', text: 'Have you had side effects from your treatment?', type: 'boolean' },
    { linkId: 'notes', text: 'Anything your care team should know', type: 'text' },
  ]);
  const reading = measurement(tenant, 'blood-pressure', 'Blood pressure reading', [SYSTOLIC, DIASTOLIC]);
  const videoVisit = visitDefinition(tenant, 'video-visit', 'Video visit', 'video-visit');
  const review = visitDefinition(tenant, 'async-review', 'Asynchronous review', 'async-review');
  const options = [
    treatmentOption(tenant, {
      name: 'lisinopril-10',
      version: '2',
      title: 'Lisinopril 10 mg daily',
      rxnorm: '314076',
      product: 'lisinopril 10 MG Oral Tablet',
      dosage: 'One tablet by mouth once a day',
      rules: [
        {
          code: 'pregnancy',
          kind: 'contraindication',
          description: 'ACE inhibitors are contraindicated in pregnancy.',
          expression: `${hasCondition('Z33.1', 'O*')} or entry.resource.ofType(Observation).where(status in ('final' | 'amended' | 'corrected') and code.coding.where(system = '${LOINC}' and code = '${PREGNANCY_STATUS}').exists() and value.ofType(CodeableConcept).coding.where(code = '${PREGNANT}').exists()).exists()`,
          requires: [SEX, BIRTH_DATE, PREGNANCY],
        },
        {
          code: 'hyperkalaemia',
          kind: 'contraindication',
          description: 'ACE inhibitors raise potassium: not started with serum potassium above 5.0 mmol/L.',
          expression: resultWhere([POTASSIUM], 'mmol/L', '> 5.0'),
          requires: [POTASSIUM_LEVEL],
        },
        {
          code: 'renal-impairment',
          kind: 'contraindication',
          description: 'ACE inhibitors need a lower dose and close monitoring with eGFR below 30 mL/min/1.73m2.',
          expression: resultWhere(EGFR, 'mL/min/{1.73_m2}', '< 30'),
          requires: [KIDNEY_FUNCTION],
        },
        {
          code: 'potassium-sparing-diuretic',
          kind: 'interaction',
          description: 'With spironolactone (a potassium-sparing diuretic): risk of hyperkalaemia.',
          expression: takes('9997', '313096'),
        },
        RECENT_READING,
      ],
    }),
    treatmentOption(tenant, {
      name: 'amlodipine-5',
      version: '2',
      title: 'Amlodipine 5 mg daily',
      rxnorm: '197361',
      product: 'amlodipine 5 MG Oral Tablet',
      dosage: 'One tablet by mouth once a day',
      rules: [
        {
          code: 'aortic-stenosis',
          kind: 'contraindication',
          description: 'Dihydropyridine calcium-channel blockers are contraindicated in severe aortic stenosis.',
          expression: hasCondition('I35.0'),
        },
        RECENT_READING,
      ],
    }),
  ];
  return [
    ...history.resources,
    ...checkIn.resources,
    ...reading.resources,
    ...videoVisit.resources,
    ...review.resources,
    ...options.flatMap((o) => o.resources),
    ...offering(tenant, {
      name: 'blood-pressure-check',
      path: 'assessments/blood-pressure-check',
      type: 'assessment',
      title: 'Blood pressure check',
      service: 'Blood pressure check',
      comment: 'A few questions and two blood pressure readings, reviewed by a clinician.',
      action: [answer(history, 'Your blood pressure history'), measure(reading, 'Your blood pressure')],
    }),
    ...offering(tenant, {
      name: 'blood-pressure-monitoring',
      path: 'programs/blood-pressure-monitoring',
      type: 'program',
      title: 'Blood pressure monitoring',
      service: 'Blood pressure monitoring program',
      comment: 'A weekly reading, a monthly check-in and video visit, and a quarterly review of your readings.',
      action: [
        measure(reading, 'Weekly blood pressure', WEEKLY),
        answer(checkIn, 'Monthly check-in', MONTHLY),
        visit(videoVisit, 'Monthly video visit', ['Check-in with a nurse', 'Visit with your clinician'], MONTHLY),
        visit(review, 'Quarterly review of your readings', ['Review by your care team'], QUARTERLY),
      ],
    }),
    ...offering(tenant, {
      name: 'hypertension-treatment',
      version: '2',
      path: 'protocols/hypertension-treatment',
      type: 'clinical-protocol',
      title: 'Hypertension treatment',
      service: 'Hypertension treatment',
      comment: 'Medication for high blood pressure, chosen by a clinician, with weekly readings.',
      coverage: [...licensedIn],
      treats: ['I10'],
      action: [
        {
          title: 'Treatment',
          groupingBehavior: 'logical-group',
          selectionBehavior: 'exactly-one',
          // The guideline's first choice is a label for the clinician, never a preselection (spec step 4).
          action: options.map((o, i) => ({
            title: o.title,
            definitionCanonical: o.canonical,
            ...(i === 0 ? { extension: [{ url: EXTENSIONS.guidelinePreferred, valueBoolean: true }] } : {}),
          })),
        },
        measure(reading, 'Weekly blood pressure', WEEKLY),
        visit(videoVisit, 'Follow-up video visit', ['Visit with your clinician'], MONTHLY),
      ],
    }),
  ];
}

/**
 * The tenant's condition catalog (JOURNEY D.1): the ICD-10-CM codes its clinicians assign, a published,
 * versioned ValueSet (`SYSTEMS.conditionCatalog|conditions` names its role).
 */
export function conditionCatalog(tenant: string): KeyedResource {
  const resource: ValueSet = {
    resourceType: 'ValueSet',
    meta: published(tenant),
    url: urlOf(tenant, 'valuesets/conditions'),
    version: '1',
    identifier: [{ system: SYSTEMS.conditionCatalog, value: 'conditions' }],
    name: 'ConditionCatalog',
    title: 'Conditions our clinicians assign',
    status: 'active',
    compose: { include: [{ system: ICD10CM, concept: CATALOG_CONDITIONS }] },
  };
  return { key: keyOf(tenant, 'conditions'), resource, writeOnce: true };
}

/** The ICD-10-CM codes the condition catalogs offer. */
const CATALOG_CONDITIONS = [
  { code: 'I10', display: 'Essential (primary) hypertension' },
  { code: 'R03.0', display: 'Elevated blood-pressure reading, without diagnosis of hypertension' },
  { code: 'E66.9', display: 'Obesity, unspecified' },
];

/**
 * The ICD-10-CM codes the catalogs use, as a CodeSystem: Medplum expands a ValueSet's listed
 * codes only against their code system (packages/server/src/fhir/operations/expand.ts), and indexes the
 * codes of a CodeSystem whose content is `complete` or `example` (fhir/lookups/coding.ts). This is not
 * ICD-10-CM: `example`, the catalogs' codes only, so that a clinician's form offers them; an operator who
 * loads the whole of ICD-10-CM into the project does not need it.
 */
function catalogCodeSystem(): KeyedResource {
  const resource: CodeSystem = {
    resourceType: 'CodeSystem',
    meta: published(undefined),
    url: ICD10CM,
    name: 'ICD10CMCatalogCodes',
    title: 'ICD-10-CM: the codes of the condition catalogs',
    status: 'active',
    content: 'example',
    caseSensitive: true,
    concept: CATALOG_CONDITIONS,
  };
  return { key: keyOf(undefined, 'icd-10-cm-codes'), resource };
}

/** Where each demo tenant is licensed to treat: one restricted offering each, so the filter shows. */
const DEMO_LICENCES: Record<string, string> = {
  northwind: jurisdictionKey('US', 'CA'),
  southridge: jurisdictionKey('US', 'NY'),
};

/** The platform's catalog and each demo tenant's own, in the order provisioning must apply them. */
export function demoCatalog(): KeyedResource[] {
  return [
    ...JURISDICTIONS,
    catalogCodeSystem(),
    ...platformCatalog(),
    ...Object.entries(DEMO_LICENCES).flatMap(([tenant, licensedIn]) => [
      conditionCatalog(tenant),
      ...tenantCatalog(tenant, [licensedIn]),
    ]),
  ];
}

/** The jurisdiction Locations of these US states (what roles and offerings name), by provisioning key. */
export const stateJurisdictions = (states: readonly UsState[]): KeyedResource[] =>
  states.map((state) => jurisdiction('US', state, US_STATES[state]));

/** What every tenant's patients are offered (the platform's catalog) and the codes clinicians assign. */
export const platformCatalogResources = (): KeyedResource[] => [catalogCodeSystem(), ...platformCatalog()];

/**
 * One of the platform's programs (contracts/clinic.ts PROGRAMS) as a tenant's own catalog; what is
 * prescribed is offered only in `states` (jurisdiction keys must be provisioned before it).
 */
export function programResources(tenant: string, program: Program, states: readonly UsState[]): KeyedResource[] {
  switch (program) {
    case 'blood-pressure':
      return tenantCatalog(
        tenant,
        states.map((state) => jurisdictionKey('US', state)),
      );
  }
}
