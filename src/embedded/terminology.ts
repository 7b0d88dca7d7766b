import { allOk, badRequest, OperationOutcomeError, Operator, type WithId } from '@medplum/core';
import type { FhirRequest, FhirResponse, FhirRouter } from '@medplum/fhir-router';
import type { CodeSystem, CodeSystemConcept, ValueSet, ValueSetExpansionContains } from '@medplum/fhirtypes';
import type { SqliteRepository } from './store/repo';

/** Codes an expansion answers by default and at most (Medplum's `$expand` pages the same way). */
const DEFAULT_COUNT = 10;
const MAX_COUNT = 1000;
/** How deep ValueSets may include other ValueSets before the expansion is refused. */
const MAX_DEPTH = 5;

/**
 * `ValueSet/$expand` (packages/server/src/fhir/operations/expand.ts), what Medplum's app calls to fill a
 * coded field's choices (the binding's ValueSet, `filter` the text typed so far). The ValueSet and its
 * CodeSystems are found with the caller's own repository, so her access policy decides what she may
 * expand, as on Medplum (operations/utils/terminology.ts findTerminologyResource): FHIR's own (served
 * by definitions.ts) and the project's (the tenants' catalogs).
 *
 * What it expands, as Medplum does (operations/expand.ts computeExpansion): a ValueSet that comes fully
 * expanded, as it is; otherwise each include: other ValueSets, a code system's listed codes (each checked
 * against the code system, which must be there), or a whole code system. Excludes are not applied, as
 * Medplum 5.0.10 does not apply them. Not here: code system property filters (`include.filter`: 400;
 * nothing, on a code system whose codes are not loaded, such as SNOMED's stub) and code systems not
 * loaded at all (ICD-10-CM, RxNorm: 400 naming it, as on a Medplum without them).
 * `filter` matches a code or its display case-insensitively anywhere in it.
 */
export function registerTerminology(router: FhirRouter): void {
  router.add('GET', 'ValueSet/$expand', (req, repo) => expand(req, repo as unknown as SqliteRepository));
}

async function expand(req: FhirRequest, repo: SqliteRepository): Promise<FhirResponse> {
  const url = single(req.query.url);
  if (!url) {
    return [badRequest('ValueSet not specified', 'url')];
  }
  const filter = single(req.query.filter)?.trim().toLowerCase();
  // A typeahead (a filter) gets a small page by default; a whole expansion, up to the maximum
  // (packages/server/src/fhir/operations/expand.ts: count defaults to 10 only with a filter).
  const asked = single(req.query.count) ?? (filter ? DEFAULT_COUNT : MAX_COUNT);
  const count = Math.min(Math.max(Number(asked) || 0, 0), MAX_COUNT);
  const offset = Math.max(Number(single(req.query.offset) ?? 0) || 0, 0);
  const valueSet = await findTerminology<ValueSet>(repo, 'ValueSet', url);
  const codes = await codesOf(repo, valueSet, 0);
  const matched = filter
    ? codes.filter((c) => c.code?.toLowerCase().includes(filter) || c.display?.toLowerCase().includes(filter))
    : codes;
  const expanded: ValueSet = {
    resourceType: 'ValueSet',
    id: valueSet.id,
    url: valueSet.url,
    version: valueSet.version,
    name: valueSet.name,
    title: valueSet.title,
    status: valueSet.status,
    expansion: {
      timestamp: new Date().toISOString(),
      total: matched.length,
      offset,
      contains: matched.slice(offset, offset + count),
    },
  };
  return [allOk, expanded];
}

const single = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/** A ValueSet or CodeSystem by canonical (`url|version` too), as the caller may read it; 400 when none. */
async function findTerminology<T extends ValueSet | CodeSystem>(
  repo: SqliteRepository,
  resourceType: T['resourceType'],
  canonical: string,
): Promise<WithId<T>> {
  const [url, version] = canonical.split('|');
  const found = (await repo.searchResources<T>({
    resourceType,
    filters: [
      { code: 'url', operator: Operator.EQUALS, value: url },
      ...(version ? [{ code: 'version', operator: Operator.EQUALS, value: version }] : []),
    ],
  })) as WithId<T>[];
  const [first] = found;
  if (!first) {
    throw new OperationOutcomeError(badRequest(`${resourceType} ${url} not found`, 'url'));
  }
  return first;
}

/** Medplum's expand, step for step (operations/expand.ts computeExpansion), on what this server holds. */
async function codesOf(
  repo: SqliteRepository,
  valueSet: ValueSet,
  depth: number,
): Promise<ValueSetExpansionContains[]> {
  if (depth > MAX_DEPTH) {
    throw new OperationOutcomeError(badRequest('ValueSet includes nest too deep to expand'));
  }
  const pre = valueSet.expansion;
  if (pre?.contains?.length && !pre.parameter && (!pre.total || pre.total === pre.contains.length)) {
    return pre.contains;
  }
  if (!valueSet.compose?.include.length) {
    throw new OperationOutcomeError(badRequest('Missing ValueSet definition', 'ValueSet.compose.include'));
  }
  const codes = new Map<string, ValueSetExpansionContains>();
  const add = (c: ValueSetExpansionContains) => codes.set(`${c.system}|${c.code}`, c);
  for (const include of valueSet.compose.include) {
    if (include.valueSet) {
      for (const nested of include.valueSet) {
        for (const c of await codesOf(repo, await findTerminology<ValueSet>(repo, 'ValueSet', nested), depth + 1)) {
          add(c);
        }
      }
      continue;
    }
    if (!include.system) {
      throw new OperationOutcomeError(
        badRequest('Missing system URL for ValueSet include', 'ValueSet.compose.include.system'),
      );
    }
    // As on Medplum, the code system must be there, also for a list of codes: each listed code must be one
    // of its codes. One that is not loaded here (SNOMED, ICD-10-CM...) makes the expansion a 400.
    const codeSystem = await findTerminology<CodeSystem>(repo, 'CodeSystem', include.system);
    const known = new Map(flatten(codeSystem.concept ?? []).map((c) => [c.code, c]));
    if (include.concept) {
      for (const concept of include.concept) {
        const found = known.get(concept.code);
        if (found) {
          add({ system: include.system, code: concept.code, display: concept.display ?? found.display });
        }
      }
    } else if (include.filter?.length) {
      if (known.size === 0) {
        // A code system whose codes are not loaded (SNOMED's stub): nothing matches, as on Medplum.
        continue;
      }
      throw new OperationOutcomeError(
        badRequest('Code system filters are not supported by the embedded Medplum', 'ValueSet.compose.include.filter'),
      );
    } else {
      for (const concept of known.values()) {
        add({ system: include.system, code: concept.code, display: concept.display });
      }
    }
  }
  return [...codes.values()];
}

function flatten(concepts: CodeSystemConcept[]): CodeSystemConcept[] {
  return concepts.flatMap((c) => [c, ...flatten(c.concept ?? [])]);
}
