import type {
  ActivityDefinition,
  HealthcareService,
  ObservationDefinition,
  PlanDefinition,
  Questionnaire,
  Resource,
} from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { type AssessmentDefinitions, assessmentPlanIssues, frontedCanonical, planTypeOf } from '../../bots/lib/catalog';
import { CATALOG, EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { demoCatalog } from '../../src/provision/catalog';
import { DEMO_TENANTS } from '../../src/provision/demo';

/** The demo catalog as provisioning defines it: checked as data, before any Medplum sees it. */
const catalog = demoCatalog();
const resources = catalog.map((entry) => entry.resource);
const ofType = <T extends Resource>(type: T['resourceType']) =>
  resources.filter((r): r is T => r.resourceType === type);
const canonical = (r: { url?: string; version?: string }) => `${r.url}|${r.version}`;
const publisherOf = (r: Resource): string =>
  r.meta?.tag?.some((t) => t.system === CATALOG.system && t.code === CATALOG.platform)
    ? 'platform'
    : (r.meta?.accounts?.[0]?.reference ?? 'none');

const definitions: AssessmentDefinitions = {
  questionnaires: new Set(ofType<Questionnaire>('Questionnaire').map(canonical)),
  activities: new Map(ofType<ActivityDefinition>('ActivityDefinition').map((a) => [canonical(a), a])),
};
const plans = ofType<PlanDefinition>('PlanDefinition');
const typeOf = (plan: PlanDefinition) => planTypeOf(plan);

describe('the demo catalog', () => {
  it('passes the assessment lint (JOURNEY A): questionnaire and measurement actions only, pinned, no timing, no condition focus', () => {
    const assessments = plans.filter((p) => typeOf(p) === 'assessment');
    expect(assessments.length).toBeGreaterThanOrEqual(3);
    for (const plan of assessments) {
      expect(assessmentPlanIssues(plan, definitions), canonical(plan)).toEqual([]);
    }
  });

  it('the lint refuses what an assessment may not hold', () => {
    const [plan] = plans.filter((p) => typeOf(p) === 'assessment');
    const [first] = plan.action ?? [];
    const bad: [string, PlanDefinition][] = [
      ['timing', { ...plan, action: [{ ...first, timingTiming: { repeat: { period: 1, periodUnit: 'wk' } } }] }],
      ['focus', { ...plan, useContext: [{ code: { code: 'focus' }, valueCodeableConcept: { text: 'I10' } }] }],
      ['reason', { ...plan, action: [{ ...first, reason: [{ text: 'Hypertension' }] }] }],
      ['goal', { ...plan, goal: [{ description: { text: 'x' }, addresses: [{ text: 'Hypertension' }] }] }],
      ['unpinned', { ...plan, action: [{ ...first, definitionCanonical: first.definitionCanonical?.split('|')[0] }] }],
      ['treatment', { ...plan, action: [{ ...first, code: [{ coding: [{ system: SYSTEMS.taskKind, code: 'x' }] }] }] }],
      [
        'unknown questionnaire',
        { ...plan, action: [{ ...first, definitionCanonical: 'https://nowhere.example/q|1' }] },
      ],
      ['no actions', { ...plan, action: [] }],
    ];
    for (const [what, candidate] of bad) {
      expect(assessmentPlanIssues(candidate, definitions), what).not.toEqual([]);
    }
  });

  it('in both tenants: two assessments (one with an agreement, one with measurements), a program and a protocol', () => {
    for (const tenant of DEMO_TENANTS) {
      const org = `key:org-${tenant.key}`;
      const visible = plans.filter((p) => ['platform', org].includes(publisherOf(p)));
      const assessments = visible.filter((p) => typeOf(p) === 'assessment');
      expect(assessments.length, tenant.key).toBeGreaterThanOrEqual(2);
      expect(assessments.some((p) => p.relatedArtifact?.some((a) => a.label === 'agreement'))).toBe(true);
      expect(assessments.some((p) => p.action?.some((a) => a.code?.[0]?.coding?.[0]?.code === 'measurement'))).toBe(
        true,
      );
      expect(visible.filter((p) => typeOf(p) === 'program').length, tenant.key).toBeGreaterThanOrEqual(1);
      const protocols = visible.filter((p) => typeOf(p) === 'clinical-protocol');
      expect(protocols.length, tenant.key).toBeGreaterThanOrEqual(1);
      for (const protocol of protocols) {
        // JOURNEY D.2: the first action chooses exactly one of the treatment options.
        const [choice] = protocol.action ?? [];
        expect(choice.selectionBehavior).toBe('exactly-one');
        const options = (choice.action ?? []).map((a) => definitions.activities.get(a.definitionCanonical ?? ''));
        expect(options).toHaveLength(2);
        for (const option of options) {
          expect(option?.kind).toBe('MedicationRequest');
          expect(option?.productCodeableConcept?.coding?.[0]?.system).toBe(
            'http://www.nlm.nih.gov/research/umls/rxnorm',
          );
          expect(publisherOf(option as Resource)).toBe(publisherOf(protocol));
        }
      }
    }
  });

  it('every service fronts a plan of the same publisher, and one per tenant is restricted to a jurisdiction', () => {
    const services = ofType<HealthcareService>('HealthcareService');
    for (const service of services) {
      const plan = plans.find((p) => canonical(p) === frontedCanonical(service));
      expect(plan, service.name).toBeDefined();
      expect(publisherOf(service)).toBe(publisherOf(plan as PlanDefinition));
      expect(service.active).toBe(true);
    }
    for (const tenant of DEMO_TENANTS) {
      const restricted = services.filter(
        (s) => publisherOf(s) === `key:org-${tenant.key}` && (s.coverageArea ?? []).length > 0,
      );
      expect(restricted.length, tenant.key).toBeGreaterThanOrEqual(1);
    }
  });

  it('measurements: LOINC, UCUM units with a conversion, an absolute range and reference ranges, some per country', () => {
    const observationDefinitions = ofType<ObservationDefinition>('ObservationDefinition');
    expect(observationDefinitions.length).toBeGreaterThanOrEqual(3);
    for (const definition of observationDefinitions) {
      expect(definition.code.coding?.[0]?.system).toBe('http://loinc.org');
      const details = definition.quantitativeDetails;
      expect(details?.unit?.coding?.[0]?.system).toBe('http://unitsofmeasure.org');
      expect(details?.customaryUnit?.coding?.[0]?.system).toBe('http://unitsofmeasure.org');
      expect(details?.conversionFactor).toBeGreaterThan(0);
      const absolute = definition.qualifiedInterval?.filter((i) => i.category === 'absolute') ?? [];
      expect(absolute).toHaveLength(1);
      expect(absolute[0].range?.low?.code).toBe(details?.unit?.coding?.[0]?.code);
    }
    const references = observationDefinitions.flatMap(
      (d) => d.qualifiedInterval?.filter((i) => i.category === 'reference') ?? [],
    );
    const byCountry = references.filter((i) => i.extension?.some((e) => e.url === EXTENSIONS.intervalJurisdiction));
    expect(byCountry.length).toBeGreaterThan(0);
    expect(references.length).toBeGreaterThan(byCountry.length);
  });

  it('everything pinned by version is versioned, write-once and published; every canonical an action names exists', () => {
    const pinned = new Set(['Questionnaire', 'ActivityDefinition', 'PlanDefinition', 'ObservationDefinition']);
    // Superseded versions are only retired (their keys, no content): the versions that replace them are here.
    const retired = catalog.filter((e) => e.retire);
    expect(retired.map((e) => e.key).sort()).toEqual(
      ['northwind', 'southridge'].flatMap((t) => [
        `catalog-${t}-option-amlodipine-5`,
        `catalog-${t}-option-lisinopril-10`,
        `catalog-${t}-plan-hypertension-treatment`,
      ]),
    );
    for (const entry of retired) {
      expect(
        catalog.some((e) => e.key === `${entry.key}-v2` && e.writeOnce),
        entry.key,
      ).toBe(true);
    }
    for (const entry of catalog.filter((e) => !e.retire)) {
      expect(publisherOf(entry.resource), entry.key).not.toBe('none');
      if (pinned.has(entry.resource.resourceType)) {
        expect(entry.writeOnce, entry.key).toBe(true);
      }
      if (entry.resource.resourceType !== 'ObservationDefinition' && pinned.has(entry.resource.resourceType)) {
        const { url, version } = entry.resource as { url?: string; version?: string };
        expect(url && version, entry.key).toBeTruthy();
      }
    }
    const known = new Set([...definitions.questionnaires, ...definitions.activities.keys()]);
    const named = plans.flatMap((p) =>
      (p.action ?? []).flatMap((a) => [a, ...(a.action ?? [])]).map((a) => a.definitionCanonical),
    );
    for (const canonical of named.filter(Boolean)) {
      expect(known.has(canonical as string), canonical).toBe(true);
    }
    expect(new Set(catalog.map((e) => e.key)).size).toBe(catalog.length);
  });
});
