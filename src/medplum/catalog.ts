import type { MedplumClient } from '@medplum/core';
import type { Bundle, HealthcareService, Location, Patient, PlanDefinition } from '@medplum/fhirtypes';
import { frontedCanonical, isAvailableTo, missingWhereabouts, planTypeOf, whereaboutsOf } from '../../bots/lib/catalog';
import { type Protocol, START_ENDPOINT } from '../../contracts/protocols';
import { CATALOG, PLAN_TYPES } from '../../contracts/systems';

/** The catalog answers at most this many offerings (one search page; DESIGN section 4's largest). */
const MAX_OFFERINGS = 100;

const PUBLISHED = `${CATALOG.system}|${CATALOG.tenant},${CATALOG.system}|${CATALOG.platform}`;

/**
 * The offerings published to the patient, read with their own token: Medplum's access policy decides
 * what is published to them (their tenant's and the platform's catalog tags), the jurisdiction filter
 * is ours. Three reads: their Patient and the services with their coverage areas (together), then the
 * plans the services front.
 */
export async function publishedOfferings(
  medplum: MedplumClient,
  patientId: string,
): Promise<{ protocols: Protocol[]; withheld: number; missing: string[] }> {
  const [patient, services]: [Patient, Bundle] = await Promise.all([
    medplum.readResource('Patient', patientId),
    medplum.search('HealthcareService', {
      active: 'true',
      _tag: PUBLISHED,
      _include: 'HealthcareService:coverage-area',
      _count: String(MAX_OFFERINGS),
    }),
  ]);
  const where = whereaboutsOf(patient);
  const locations = new Map<string, Location>();
  const offered: { service: HealthcareService & { id: string }; canonical: string }[] = [];
  for (const { resource, search } of services.entry ?? []) {
    if (resource?.resourceType === 'Location' && resource.id) {
      locations.set(`Location/${resource.id}`, resource);
    } else if (resource?.resourceType === 'HealthcareService' && resource.id && search?.mode !== 'include') {
      const canonical = frontedCanonical(resource);
      if (canonical) {
        offered.push({ service: resource as HealthcareService & { id: string }, canonical });
      }
    }
  }
  const available = offered.filter(({ service }) => isAvailableTo(service, locations, where));
  // What her address lacks, and how many offerings limited to an area she may be in are withheld for it.
  const missing = missingWhereabouts(where);
  const withheld =
    missing.length === 0 ? 0 : offered.filter(({ service }) => (service.coverageArea ?? []).length > 0).length;
  const plans = await plansByCanonical(
    medplum,
    available.map((o) => o.canonical),
  );
  const protocols: Protocol[] = [];
  for (const { service, canonical } of available) {
    const plan = plans.get(canonical);
    const type = plan ? planTypeOf(plan) : undefined;
    if (!plan || !type) {
      continue;
    }
    const common = {
      healthcareService: `HealthcareService/${service.id}`,
      name: service.name ?? plan.title ?? plan.name ?? canonical,
      ...(service.comment ? { description: service.comment } : {}),
    };
    protocols.push(
      type === 'assessment'
        ? { ...common, type, assessment: canonical, start: START_ENDPOINT.assessment }
        : type === 'program'
          ? { ...common, type, protocol: canonical, start: START_ENDPOINT.program }
          : { ...common, type, protocol: canonical, start: START_ENDPOINT['clinical-protocol'] },
    );
  }
  protocols.sort(
    (a, b) => PLAN_TYPES.indexOf(a.type) - PLAN_TYPES.indexOf(b.type) || a.name.localeCompare(b.name, 'en'),
  );
  return { protocols, withheld, missing };
}
/** The active PlanDefinitions the patient may read, by the `url|version` each is pinned as. */
async function plansByCanonical(medplum: MedplumClient, canonicals: string[]): Promise<Map<string, PlanDefinition>> {
  const plans = new Map<string, PlanDefinition>();
  const urls = [...new Set(canonicals.map((c) => c.slice(0, c.lastIndexOf('|'))))];
  if (urls.length === 0) {
    return plans;
  }
  const found: Bundle<PlanDefinition> = await medplum.search('PlanDefinition', {
    url: urls.join(','),
    status: 'active',
    _count: String(MAX_OFFERINGS),
  });
  for (const { resource } of found.entry ?? []) {
    if (resource?.url && resource.version) {
      plans.set(`${resource.url}|${resource.version}`, resource);
    }
  }
  return plans;
}
