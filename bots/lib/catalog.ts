import type { MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  HealthcareService,
  Location,
  Patient,
  PlanDefinition,
  PlanDefinitionAction,
  ValueSet,
} from '@medplum/fhirtypes';
import { EXTENSIONS, PLAN_TYPES, type PlanType, SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import { isPublishedTo } from './agreements';
import { publishedDefinition } from './journey';

/**
 * The catalog's rules, shared by the gateway (`GET /v1/protocols`) and the workflow bots that start
 * what it lists, so that what a patient is shown and what they may start can never disagree.
 */

/** The plan a service fronts, `url|version` (its fronts-plan extension). */
export function frontedCanonical(service: HealthcareService): string | undefined {
  const canonical = service.extension?.find((e) => e.url === EXTENSIONS.frontsPlan)?.valueCanonical;
  return canonical && /^\S+\|\S+$/.test(canonical) ? canonical : undefined;
}

/** The platform's plan type of a PlanDefinition (its `type` coding under SYSTEMS.planType). */
export function planTypeOf(plan: PlanDefinition): PlanType | undefined {
  const code = plan.type?.coding?.find((c) => c.system === SYSTEMS.planType)?.code;
  return (PLAN_TYPES as readonly string[]).includes(code ?? '') ? (code as PlanType) : undefined;
}

/** Where a patient is, as the agreement rules read it: `Patient.address[0]` country and state. */
export interface Whereabouts {
  country?: string;
  state?: string;
}

export function whereaboutsOf(patient: Patient): Whereabouts {
  const address = patient.address?.[0];
  return { country: address?.country?.toUpperCase(), state: address?.state?.toUpperCase() };
}

/** The parts of her address (`Patient.address[0]`) that where-she-lives rules read and she has not given. */
export function missingWhereabouts(where: Whereabouts): string[] {
  return [
    ...(where.country ? [] : ['Patient.address[0].country']),
    ...(where.state ? [] : ['Patient.address[0].state']),
  ];
}

/**
 * Whether an offering is available where the patient is. No `coverageArea`: everywhere. Otherwise one of
 * its jurisdiction Locations must match: its country, and its state when it names one. A coverage area
 * that cannot be read (not published, gone) matches nobody: a restriction never fails open.
 */
export function isAvailableTo(
  service: HealthcareService,
  locations: ReadonlyMap<string, Location>,
  where: Whereabouts,
): boolean {
  const areas = service.coverageArea ?? [];
  if (areas.length === 0) {
    return true;
  }
  return areas.some((area) => {
    const address = locations.get(area.reference ?? '')?.address;
    if (!address?.country || !where.country || address.country.toUpperCase() !== where.country) {
      return false;
    }
    return !address.state || address.state.toUpperCase() === where.state;
  });
}

/** What an assessment plan's action is, by its code (SYSTEMS.taskKind): the kind of task it issues. */
export function actionKind(action: PlanDefinitionAction): string | undefined {
  return action.code?.flatMap((c) => c.coding ?? []).find((c) => c.system === SYSTEMS.taskKind)?.code;
}

/** Definitions an assessment plan's actions point at, by `url|version`. */
export interface AssessmentDefinitions {
  questionnaires: ReadonlySet<string>;
  activities: ReadonlyMap<string, ActivityDefinition>;
}

/**
 * JOURNEY A's lint of an assessment ("one-time", "never pre-binds candidate conditions"): only
 * questionnaire and measurement actions, each pinned (`url|version`) to a published definition; no timing
 * anywhere; no condition focus (useContext focus, goal addresses, action reasons). Empty when it passes.
 */
export function assessmentPlanIssues(plan: PlanDefinition, definitions: AssessmentDefinitions): string[] {
  const issues: string[] = [];
  if (planTypeOf(plan) !== 'assessment') {
    issues.push('type is not assessment');
  }
  if (plan.useContext?.some((u) => u.code?.code === 'focus')) {
    issues.push('useContext binds a focus');
  }
  if (plan.goal?.some((g) => (g.addresses ?? []).length > 0)) {
    issues.push('a goal addresses a condition');
  }
  if ((plan.action ?? []).length === 0) {
    issues.push('no actions');
  }
  for (const [index, action] of (plan.action ?? []).entries()) {
    const at = `action[${index}]`;
    const kind = actionKind(action);
    const canonical = action.definitionCanonical ?? '';
    if (action.timingTiming || action.timingDateTime || action.timingDuration || action.timingRange) {
      issues.push(`${at} has timing`);
    }
    if (action.timingAge || action.timingPeriod) {
      issues.push(`${at} has timing`);
    }
    if ((action.reason ?? []).length > 0) {
      issues.push(`${at} has a reason (a condition focus)`);
    }
    if ((action.action ?? []).length > 0) {
      issues.push(`${at} has sub-actions`);
    }
    if (!/^\S+\|\S+$/.test(canonical)) {
      issues.push(`${at} is not pinned to url|version`);
    } else if (kind === 'questionnaire') {
      if (!definitions.questionnaires.has(canonical)) {
        issues.push(`${at} names no published Questionnaire ${canonical}`);
      }
    } else if (kind === 'measurement') {
      const activity = definitions.activities.get(canonical);
      if (!activity || (activity.observationRequirement ?? []).length === 0) {
        issues.push(`${at} names no published measurement ActivityDefinition ${canonical}`);
      } else if (activity.timingTiming || activity.timingDateTime || activity.timingPeriod || activity.timingRange) {
        issues.push(`${at}'s ActivityDefinition has timing`);
      } else if (activity.timingAge || activity.timingDuration) {
        issues.push(`${at}'s ActivityDefinition has timing`);
      }
    } else {
      issues.push(`${at} is neither a questionnaire nor a measurement`);
    }
  }
  return issues;
}

/**
 * For a bot: whether an offering is available where the patient lives, its coverage Locations read as
 * she could read them (published to her tenant or the platform); what the catalog lists, nothing more.
 */
export async function availableWhereSheLives(
  medplum: MedplumClient,
  service: HealthcareService,
  patient: Patient,
): Promise<boolean> {
  const organization = patient.managingOrganization?.reference;
  const locations = new Map<string, Location>();
  const areas = service.coverageArea ?? [];
  const read = await Promise.all(
    areas.map((area) => medplum.readReference(area).catch(absent) as Promise<Location | undefined>),
  );
  areas.forEach((area, index) => {
    const location = read[index];
    if (location && area.reference && isPublishedTo(location, organization)) {
      locations.set(area.reference, location);
    }
  });
  return isAvailableTo(service, locations, whereaboutsOf(patient));
}

/** The active condition catalogs (JOURNEY D.1) published to the tenant: the codes its clinicians assign. */
export async function conditionCatalogs(medplum: MedplumClient, organization: string | undefined): Promise<ValueSet[]> {
  const catalogs = await medplum.searchResources('ValueSet', {
    identifier: `${SYSTEMS.conditionCatalog}|conditions`,
    status: 'active',
  });
  return catalogs.filter((v) => isPublishedTo(v, organization));
}

/** The published, available offering's plan, or undefined (unknown, another tenant's, another place's). */
export async function offeredPlan(
  medplum: MedplumClient,
  reference: string,
  patient: Patient,
): Promise<{ plan: PlanDefinition; canonical: string } | undefined> {
  const organization = patient.managingOrganization?.reference;
  const id = reference.split('/')[1];
  const service = (await medplum.readResource('HealthcareService', id).catch(absent)) as HealthcareService | undefined;
  // What GET /v1/protocols lists, and nothing else: an active offering of an active plan.
  if (service?.active !== true || !isPublishedTo(service, organization)) {
    return undefined;
  }
  const canonical = frontedCanonical(service);
  // Where it is offered and what it fronts, read at once.
  const [available, plan] = await Promise.all([
    availableWhereSheLives(medplum, service, patient),
    canonical ? publishedDefinition<PlanDefinition>(medplum, 'PlanDefinition', canonical, organization) : undefined,
  ]);
  return available && plan && canonical && plan.status === 'active' ? { plan, canonical } : undefined;
}
