import type { DatabaseSync, SQLInputValue } from 'node:sqlite';
import type { Filter, SearchRequest, WithId } from '@medplum/core';
import {
  AccessPolicyInteraction,
  badRequest,
  DEFAULT_SEARCH_COUNT,
  evalFhirPath,
  formatSearchQuery,
  getParsedExpressionForResourceType,
  getSearchParameter,
  matchesSearchRequest,
  OperationOutcomeError,
  Operator,
  parseSearchRequest,
  splitSearchOnComma,
} from '@medplum/core';
import type { AccessPolicy, AccessPolicyResource, Bundle, BundleLink, Resource } from '@medplum/fhirtypes';
import { removeFields } from './fields';
import { matchingPolicyEntry } from './policy-match';
import { isStringFilter, matchesStringFilter } from './string-match';

const MAX_COUNT = 1000;

export interface SearchScope {
  /** Only resources of this project (undefined: the system sees every project). */
  project: string | undefined;
  /** The caller's applicable policy entries, OR'ed; undefined means unrestricted. */
  policies: AccessPolicyResource[] | undefined;
  /** Her entries for searching another type (a chain's target); without it a restricted caller finds none there. */
  policiesOf?: (resourceType: string) => AccessPolicyResource[] | undefined;
  baseUrl: string;
  /** Resources every project sees besides its own (FHIR's definitions: ../definitions.ts), matched as rows are. */
  builtIn?: readonly WithId<Resource>[];
}

/** Rows read and parsed by searches so far: what the tests check the indexes by (no timing). */
export const searchStats = { rowsRead: 0 };

/** Which index narrows the candidate rows before the exact in-memory match. */
interface Candidates {
  table: 'compartment' | 'reference' | 'token' | 'id' | 'lastUpdated';
  /** The token parameter's code (table `token`). */
  code?: string;
  values: string[];
}

/** Medplum's `maxSearchOffset` (its default, config/utils.ts addDefaults): deeper pages are refused. */
export const MAX_SEARCH_OFFSET = 10_000;

/** A search's `_offset`, refused past MAX_SEARCH_OFFSET with Medplum's own words (search.ts applyCountAndOffsetLimits). */
export function checkedOffset(offset: number | undefined): number {
  if (offset !== undefined && offset > MAX_SEARCH_OFFSET) {
    throw new OperationOutcomeError(
      badRequest(`Search offset exceeds maximum (got ${offset}, max ${MAX_SEARCH_OFFSET})`),
    );
  }
  return Math.max(offset ?? 0, 0);
}

/**
 * FHIR search with Medplum's semantics: @medplum/core's matcher decides what matches (the same code
 * Medplum's clients and MemoryRepository use), while SQLite indexes keep patient- and
 * compartment-scoped searches from scanning the whole store.
 */
export function runSearch<T extends Resource>(
  db: DatabaseSync,
  searchRequest: SearchRequest<T>,
  scope: SearchScope,
): Bundle<WithId<T>> {
  if (searchRequest.types?.length) {
    throw new OperationOutcomeError(badRequest('Searching several types at once is not supported'));
  }
  const { resourceType } = searchRequest;
  const chained = withChainsResolved(db, searchRequest, scope);
  if (!chained) {
    return {
      resourceType: 'Bundle',
      type: 'searchset',
      entry: [],
      link: pageLinks(searchRequest, scope.baseUrl, 0, 0, 0),
    };
  }
  searchRequest = chained;
  checkSearchable(searchRequest);
  const filters = searchRequest.filters ?? [];
  const candidates = narrowFromFilters(resourceType, filters) ?? narrowFromPolicies(resourceType, scope.policies);
  const policy: AccessPolicy | undefined = scope.policies && { resourceType: 'AccessPolicy', resource: scope.policies };

  // Strings as Medplum's server compares them (prefix, exact, contains), not core's substring match.
  const stringFilters = filters.filter((f) => isStringFilter(resourceType, f));
  const otherFilters = filters.filter((f) => !isStringFilter(resourceType, f));
  const count = Math.min(Math.max(searchRequest.count ?? DEFAULT_SEARCH_COUNT, 0), MAX_COUNT);
  const offset = checkedOffset(searchRequest.offset);
  // A count walks the same index within the window's bounds, to its end (the days view counts each day so).
  const counting = searchRequest.total === 'accurate' || searchRequest.total === 'estimate';
  const ordered = scope.builtIn
    ? undefined
    : orderedSlots(db, searchRequest, scope.project, counting ? Number.POSITIVE_INFINITY : offset + count + 1);
  const matched: WithId<T>[] = [];
  const rows = function* (): Generator<WithId<T>> {
    if (ordered) {
      yield* ordered.rows(() => matched.length) as Iterable<WithId<T>>;
      return;
    }
    for (const content of loadCandidates(db, resourceType, scope.project, candidates)) {
      searchStats.rowsRead++;
      yield JSON.parse(content) as WithId<T>;
    }
    yield* (scope.builtIn ?? []) as WithId<T>[];
  };
  for (const resource of rows()) {
    const entry = policy && matchingPolicyEntry(resource, AccessPolicyInteraction.SEARCH, policy);
    if (policy && !entry) {
      continue;
    }
    if (
      stringFilters.every((f) => matchesStringFilter(resource, f)) &&
      matchesSearchRequest(resource, { resourceType, filters: otherFilters })
    ) {
      // Hidden fields go here, where the matching entry is known, not by matching again later.
      matched.push(removeFields(resource, entry ? entry.hiddenFields : undefined));
    }
  }
  sortResources(matched, searchRequest);

  const page = matched.slice(offset, offset + count);
  const bundle: Bundle<WithId<T>> = {
    resourceType: 'Bundle',
    type: 'searchset',
    entry: page.map((resource) => ({
      fullUrl: `${scope.baseUrl}fhir/R4/${resource.resourceType}/${resource.id}`,
      search: { mode: 'match' },
      resource: project(resource, searchRequest.fields),
    })),
    link: pageLinks(searchRequest, scope.baseUrl, offset, count, matched.length),
  };
  if (searchRequest.total === 'accurate' || searchRequest.total === 'estimate' || count === 0) {
    bundle.total = matched.length;
  }
  return bundle;
}

/** A Slot's start as the index `slot_by_schedule_start` holds it (the same expression, or SQLite ignores the index). */
const START = "julianday(json_extract(r.content, '$.start'))";

/** Slack around a `start` bound: a date without a zone may mean any zone's day (see ZONE_SLACK_MS). */
const START_SLACK_DAYS = 1.6;

/**
 * Slots of some schedules in start order, from the expression index `slot_by_schedule_start`
 * (database.ts), for a search sorted by `start` (then `_id`) whose answer is a page, not a count: the
 * availability search (a count too: then `needed` is unbounded). SQLite orders the index entries of those schedules within the window's
 * bounds (a superset: the matcher decides exactly) and the rows are read and parsed in that order until
 * `needed` have matched, plus every row that starts at the same instant as the last (ties are ordered by
 * the sort, as on the full path). Undefined when the search is not of that shape.
 */
function orderedSlots(
  db: DatabaseSync,
  searchRequest: SearchRequest,
  project: string | undefined,
  needed: number,
): { rows(matchedSoFar: () => number): Iterable<Resource> } | undefined {
  const rules = searchRequest.sortRules ?? [];
  const sortedByStart =
    rules[0]?.code === 'start' &&
    !rules[0].descending &&
    (rules.length === 1 || (rules.length === 2 && rules[1].code === '_id' && !rules[1].descending));
  const filters = searchRequest.filters ?? [];
  const schedule = filters.find((f) => f.code === 'schedule' && f.operator === Operator.EQUALS);
  if (searchRequest.resourceType !== 'Slot' || !sortedByStart || !schedule) {
    return undefined;
  }
  const schedules = [...new Set(splitSearchOnComma(schedule.value))].map((v) =>
    v.includes('/') ? v : `Schedule/${v}`,
  );
  const bounds: string[] = [];
  const args: SQLInputValue[] = [...schedules];
  for (const f of filters.filter((f) => f.code === 'start')) {
    const at = Date.parse(f.value);
    if (Number.isNaN(at)) {
      continue;
    }
    const day = at / DAY_MS + 2440587.5; // julianday of the instant
    // A bound with a zone is an instant (one second of slack for its precision); one without may be
    // any zone's, so a day and a half either way. The matcher decides exactly.
    const slack = /(Z|[+-]\d\d:\d\d)$/.test(f.value) ? 1 / 86_400 : START_SLACK_DAYS;
    if (
      ([Operator.GREATER_THAN, Operator.GREATER_THAN_OR_EQUALS, Operator.STARTS_AFTER] as Operator[]).includes(
        f.operator,
      )
    ) {
      bounds.push(`${START} >= ?`);
      args.push(day - slack);
    } else if (
      ([Operator.LESS_THAN, Operator.LESS_THAN_OR_EQUALS, Operator.ENDS_BEFORE] as Operator[]).includes(f.operator)
    ) {
      bounds.push(`${START} <= ?`);
      args.push(day + slack);
    }
  }
  if (project !== undefined) {
    args.push(project);
  }
  const sql =
    // INDEXED BY: SQLite's planner, without statistics, prefers the primary key (every Slot of the store).
    `SELECT r.content AS content, ${START} AS s FROM resource r INDEXED BY slot_by_schedule_start ` +
    `WHERE r.type = 'Slot' AND json_extract(r.content, '$.schedule.reference') IN (${schedules.map(() => '?').join(', ')})` +
    `${bounds.map((b) => ` AND ${b}`).join('')}` +
    `${project === undefined ? '' : ' AND r.project = ?'} ORDER BY s, r.id`;
  return {
    *rows(matchedSoFar) {
      let last: number | undefined;
      for (const row of db.prepare(sql).iterate(...args)) {
        const { content, s } = row as { content: string; s: number | null };
        if (last !== undefined && s !== last) {
          return;
        }
        searchStats.rowsRead++;
        yield JSON.parse(content) as Resource;
        if (last === undefined && matchedSoFar() >= needed) {
          last = s ?? Number.NaN;
        }
      }
    },
  };
}

/** `param:Type.targetParam` (one link: Medplum's chained search of a reference to one type). */
const CHAIN = /^([a-z][A-Za-z0-9-]*):([A-Z][A-Za-z]+)\.([a-z_][A-Za-z0-9-]*)$/;

/**
 * The search with each chained filter (`entity:Observation.patient=Patient/x`) replaced by the references
 * it names: the target type searched with the caller's own access (a target she may not search matches
 * nothing), every page of it; undefined when a chain names nothing (the search then matches nothing).
 * Only one link, to a type the reference parameter can point at, as Medplum allows.
 */
function withChainsResolved<T extends Resource>(
  db: DatabaseSync,
  searchRequest: SearchRequest<T>,
  scope: SearchScope,
): SearchRequest<T> | undefined {
  const filters: Filter[] = [];
  for (const filter of searchRequest.filters ?? []) {
    if (filter.code.startsWith('_has:')) {
      const ids = reverseChainIds(db, searchRequest.resourceType, filter, scope);
      if (ids.length === 0) {
        return undefined;
      }
      filters.push({ code: '_id', operator: Operator.EQUALS, value: ids.join(',') });
      continue;
    }
    const chain = CHAIN.exec(filter.code);
    if (!filter.code.includes('.')) {
      filters.push(filter);
      continue;
    }
    const param = chain ? getSearchParameter(searchRequest.resourceType, chain[1]) : undefined;
    if (!chain || param?.type !== 'reference' || !param.target?.includes(chain[2] as never)) {
      throw new OperationOutcomeError(
        badRequest(`Search parameter not supported by the embedded Medplum: ${filter.code}`),
      );
    }
    const ids: string[] = [];
    for (let offset = 0; ; offset += MAX_COUNT) {
      const target: SearchRequest = {
        resourceType: chain[2] as Resource['resourceType'],
        filters: [{ ...filter, code: chain[3] }],
        count: MAX_COUNT,
        offset,
        fields: ['id'],
      };
      const policies = scope.policiesOf ? scope.policiesOf(chain[2]) : scope.policies && [];
      const page = runSearch(db, target, { ...scope, policies, builtIn: undefined });
      ids.push(...(page.entry ?? []).map((e) => `${chain[2]}/${e.resource?.id}`));
      if ((page.entry ?? []).length < MAX_COUNT) {
        break;
      }
    }
    if (ids.length === 0) {
      return undefined;
    }
    filters.push({ code: chain[1], operator: Operator.EQUALS, value: ids.join(',') });
  }
  return { ...searchRequest, filters };
}

/** `_has:Type:param:targetParam[:modifier]` (Medplum's reverse chain: one link). */
const HAS = /^_has:([A-Z][A-Za-z]+):([a-z][A-Za-z0-9-]*):([a-z_][A-Za-z0-9-]*)(?::([a-z-]+))?$/;

/**
 * The ids of `resourceType` that a reverse chain names (`_has:Communication:part-of:_id:not=null`: the
 * Communications some other Communication is `partOf`, as Medplum's Provider app lists its threads): the
 * other type searched with the caller's own access (what she may not read names nothing), every page of
 * it, and the references its `param` holds to `resourceType` collected. A `param` that is not a reference
 * to that type is 400, as Medplum answers an unknown one.
 */
function reverseChainIds(db: DatabaseSync, resourceType: string, filter: Filter, scope: SearchScope): string[] {
  const has = HAS.exec(filter.code);
  const param = has ? getSearchParameter(has[1], has[2]) : undefined;
  if (!has || param?.type !== 'reference' || !param.expression || !param.target?.includes(resourceType as never)) {
    throw new OperationOutcomeError(
      badRequest(`Search parameter not supported by the embedded Medplum: ${filter.code}`),
    );
  }
  const inner = parseSearchRequest(
    `${has[1]}?${has[3]}${has[4] ? `:${has[4]}` : ''}=${encodeURIComponent(filter.value)}`,
  );
  const policies = scope.policiesOf ? scope.policiesOf(has[1]) : scope.policies && [];
  const ids = new Set<string>();
  for (let offset = 0; ; offset += MAX_COUNT) {
    const page = runSearch(db, { ...inner, count: MAX_COUNT, offset }, { ...scope, policies, builtIn: undefined });
    for (const entry of page.entry ?? []) {
      for (const value of evalFhirPath(param.expression, entry.resource)) {
        const reference = (value as { reference?: unknown } | undefined)?.reference;
        if (typeof reference === 'string' && reference.startsWith(`${resourceType}/`)) {
          ids.add(reference.slice(resourceType.length + 1));
        }
      }
    }
    if ((page.entry ?? []).length < MAX_COUNT) {
      return [...ids];
    }
  }
}

/** What @medplum/core's matcher can decide (any type also takes `:missing` and `:present`). */
const MATCHED_TYPES = new Set(['reference', 'string', 'uri', 'token', 'date']);
/** Medplum's own special parameters that have no SearchParameter definition and no matcher here. */
const UNSUPPORTED_SPECIAL = new Set(['_filter', '_deleted']);

/**
 * Refuses, up front, what real Medplum refuses (packages/server/src/fhir/search.ts: an unknown filter
 * code in buildSearchFilterExpression, an unknown `_sort` code in addOrderByClause, both 400 `Unknown
 * search parameter`), and what this store cannot answer faithfully (chains it did not resolve,
 * `_filter`, number and quantity parameters), which would otherwise silently match nothing.
 */
function checkSearchable(searchRequest: SearchRequest): void {
  const { resourceType } = searchRequest;
  for (const { code, operator } of searchRequest.filters ?? []) {
    if (code.includes('.') || UNSUPPORTED_SPECIAL.has(code)) {
      throw new OperationOutcomeError(badRequest(`Search parameter not supported by the embedded Medplum: ${code}`));
    }
    const param = getSearchParameter(resourceType, code);
    if (!param) {
      throw new OperationOutcomeError(badRequest(`Unknown search parameter: ${code}`));
    }
    if (!MATCHED_TYPES.has(param.type as string) && operator !== Operator.MISSING && operator !== Operator.PRESENT) {
      throw new OperationOutcomeError(
        badRequest(`Search parameter not supported by the embedded Medplum: ${code} (${param.type})`),
      );
    }
  }
  for (const { code } of searchRequest.sortRules ?? []) {
    if (code !== '_id' && code !== '_lastUpdated' && !getSearchParameter(resourceType, code)?.expression) {
      throw new OperationOutcomeError(badRequest(`Unknown search parameter: ${code}`));
    }
  }
}

/**
 * The index that narrows best among the filters: an id, an identifier, a reference or a compartment
 * (each names a handful of rows) before any other token (a status or a category can name most of
 * a type) and a `_lastUpdated` range last.
 */
function narrowFromFilters(resourceType: string, filters: Filter[]): Candidates | undefined {
  let best: Candidates | undefined;
  for (const filter of filters) {
    const candidates = narrowFromFilter(resourceType, filter);
    if (candidates && (!best || rank(candidates) < rank(best))) {
      best = candidates;
    }
  }
  return best;
}

function rank(candidates: Candidates): number {
  if (candidates.table === 'lastUpdated') {
    return 3;
  }
  return candidates.table === 'token' && candidates.code !== 'identifier' ? 2 : 1;
}

function narrowFromFilter(resourceType: string, filter: Filter): Candidates | undefined {
  if (filter.code === '_lastUpdated') {
    return narrowFromLastUpdated(filter);
  }
  if (filter.operator !== Operator.EQUALS) {
    return undefined;
  }
  const values = splitSearchOnComma(filter.value);
  if (filter.code === '_id') {
    return { table: 'id', values };
  }
  if (filter.code === '_compartment') {
    return { table: 'compartment', values };
  }
  const param = getSearchParameter(resourceType, filter.code);
  if (param?.type === 'token') {
    // Every form but a bare `|` (which matches nothing) is a key of the token index.
    return values.every((v) => v && v !== '|')
      ? { table: 'token', code: filter.code, values: values.map((v) => v.toLowerCase()) }
      : undefined;
  }
  if (param?.type === 'reference') {
    const targets = values.map((v) =>
      v.includes('/') ? v : param.target?.length === 1 ? `${param.target[0]}/${v}` : '',
    );
    return targets.every((t) => /^[A-Z][A-Za-z]+\/[^/]+$/.test(t))
      ? { table: 'reference', values: targets }
      : undefined;
  }
  return undefined;
}

/** Slack around a `_lastUpdated` bound: a date without a zone may mean any zone's day (UTC-12..+14). */
const ZONE_SLACK_MS = 14 * 3600_000;
const DAY_MS = 24 * 3600_000;

/**
 * A `_lastUpdated` range as a superset of instants (`[from, to]`, ISO strings as stored): from a
 * `gt`/`ge`/`sa` bound, or up to a `lt`/`le`/`eb` one, widened by a day and the widest zone offset so
 * that no precision or zone reading can exclude a match; the matcher decides exactly.
 */
function narrowFromLastUpdated(filter: Filter): Candidates | undefined {
  const at = Date.parse(filter.value);
  if (Number.isNaN(at)) {
    return undefined;
  }
  const iso = (ms: number) => new Date(Math.max(0, Math.min(ms, 253402300799999))).toISOString();
  switch (filter.operator) {
    case Operator.GREATER_THAN:
    case Operator.GREATER_THAN_OR_EQUALS:
    case Operator.STARTS_AFTER:
      return { table: 'lastUpdated', values: [iso(at - ZONE_SLACK_MS - DAY_MS), iso(Number.MAX_SAFE_INTEGER)] };
    case Operator.LESS_THAN:
    case Operator.LESS_THAN_OR_EQUALS:
    case Operator.ENDS_BEFORE:
      return { table: 'lastUpdated', values: [iso(0), iso(at + ZONE_SLACK_MS + DAY_MS)] };
    default:
      return undefined;
  }
}

/** Every applicable policy entry must be narrowable for the union of their candidates to be complete. */
function narrowFromPolicies(
  resourceType: string,
  policies: AccessPolicyResource[] | undefined,
): Candidates | undefined {
  if (!policies?.length) {
    return undefined;
  }
  let union: Candidates | undefined;
  for (const entry of policies) {
    if (!entry.criteria || entry.resourceType === '*') {
      return undefined;
    }
    const criteria = parseSearchRequest(entry.criteria);
    const candidates = narrowFromFilters(resourceType, criteria.filters ?? []);
    if (
      !candidates ||
      candidates.table === 'lastUpdated' ||
      (union && (union.table !== candidates.table || union.code !== candidates.code))
    ) {
      return undefined;
    }
    union = union ? { table: union.table, values: [...union.values, ...candidates.values] } : candidates;
  }
  return union;
}

function* loadCandidates(
  db: DatabaseSync,
  resourceType: string,
  project: string | undefined,
  candidates: Candidates | undefined,
): Iterable<string> {
  const projectClause = project === undefined ? '' : ' AND r.project = ?';
  const projectArgs: SQLInputValue[] = project === undefined ? [] : [project];
  if (!candidates) {
    const sql = `SELECT r.content FROM resource r WHERE r.type = ?${projectClause}`;
    for (const row of db.prepare(sql).iterate(resourceType, ...projectArgs)) {
      yield (row as { content: string }).content;
    }
    return;
  }
  if (candidates.table === 'lastUpdated') {
    const [from, to] = candidates.values;
    const sql = `SELECT r.content FROM resource r WHERE r.type = ?${projectClause} AND r.last_updated >= ? AND r.last_updated <= ?`;
    for (const row of db.prepare(sql).iterate(resourceType, ...projectArgs, from, to)) {
      yield (row as { content: string }).content;
    }
    return;
  }
  const seen = new Set<string>();
  const unique = [...new Set(candidates.values)];
  const sql = candidateSql(candidates.table, projectClause);
  for (const value of unique) {
    const args: SQLInputValue[] =
      candidates.table === 'id'
        ? [resourceType, value]
        : candidates.table === 'token'
          ? [resourceType, candidates.code as string, value]
          : [value, resourceType];
    for (const row of db.prepare(sql).iterate(...args, ...projectArgs)) {
      const { id, content } = row as { id: string; content: string };
      if (!seen.has(id)) {
        seen.add(id);
        yield content;
      }
    }
  }
}

function candidateSql(table: Exclude<Candidates['table'], 'lastUpdated'>, projectClause: string): string {
  switch (table) {
    case 'id':
      return `SELECT r.id, r.content FROM resource r WHERE r.type = ? AND r.id = ?${projectClause}`;
    case 'token':
      return `SELECT r.id, r.content FROM token x JOIN resource r ON r.type = x.type AND r.id = x.id WHERE x.type = ? AND x.code = ? AND x.key = ?${projectClause}`;
    case 'compartment':
      return `SELECT r.id, r.content FROM compartment x JOIN resource r ON r.type = x.type AND r.id = x.id WHERE x.compartment = ? AND x.type = ?${projectClause}`;
    case 'reference':
      return `SELECT r.id, r.content FROM reference x JOIN resource r ON r.type = x.type AND r.id = x.id WHERE x.target = ? AND x.type = ?${projectClause}`;
  }
}

/** `_sort` rules in order; without one, oldest first then id, so paging is stable. */
function sortResources(resources: Resource[], searchRequest: SearchRequest): void {
  const rules = searchRequest.sortRules?.length ? searchRequest.sortRules : [{ code: '_lastUpdated' }];
  const keyCache = new Map<Resource, unknown[]>();
  const keyOf = (resource: Resource, index: number): unknown => {
    let keys = keyCache.get(resource);
    if (!keys) {
      keys = rules.map((rule) => sortKey(resource, rule.code));
      keyCache.set(resource, keys);
    }
    return keys[index];
  };
  resources.sort((a, b) => {
    for (let i = 0; i < rules.length; i++) {
      const order = compareKeys(keyOf(a, i), keyOf(b, i));
      if (order !== 0) {
        return rules[i].descending ? -order : order;
      }
    }
    return (a.id ?? '').localeCompare(b.id ?? '');
  });
}

function sortKey(resource: Resource, code: string): unknown {
  if (code === '_lastUpdated') {
    return resource.meta?.lastUpdated;
  }
  if (code === '_id') {
    return resource.id;
  }
  const param = getSearchParameter(resource.resourceType, code);
  if (!param?.expression) {
    throw new OperationOutcomeError(badRequest(`Unknown search parameter: ${code}`));
  }
  // The type-specific part of a shared expression (`date` spans ~30 types): far cheaper per resource.
  const [first] = evalFhirPath(getParsedExpressionForResourceType(resource.resourceType, param.expression), resource);
  if (first === null || first === undefined) {
    return undefined;
  }
  if (typeof first === 'object') {
    const value = first as Record<string, unknown>;
    const key = value.start ?? value.value ?? value.family ?? value.code ?? value.reference ?? JSON.stringify(first);
    return param.type === 'date' ? instantOf(key) : key;
  }
  return param.type === 'date' ? instantOf(first) : first;
}

/** A date's sort key: its instant (offsets compared as instants, as Medplum's timestamp columns are). */
function instantOf(value: unknown): number | undefined {
  const at = typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isNaN(at) ? undefined : at;
}

function compareKeys(a: unknown, b: unknown): number {
  if (a === b) {
    return 0;
  }
  if (a === undefined) {
    return 1;
  }
  if (b === undefined) {
    return -1;
  }
  if (typeof a === 'number' && typeof b === 'number') {
    return a - b;
  }
  return String(a).localeCompare(String(b));
}

function project<T extends Resource>(resource: WithId<T>, fields: string[] | undefined): WithId<T> {
  if (!fields?.length) {
    return resource;
  }
  const kept: Record<string, unknown> = { resourceType: resource.resourceType, id: resource.id, meta: resource.meta };
  for (const field of fields) {
    const value = (resource as unknown as Record<string, unknown>)[field];
    if (value !== undefined) {
      kept[field] = value;
    }
  }
  return kept as unknown as WithId<T>;
}

function pageLinks(
  searchRequest: SearchRequest,
  baseUrl: string,
  offset: number,
  count: number,
  total: number,
): BundleLink[] {
  const url = (pageOffset: number): string =>
    `${baseUrl}fhir/R4/${searchRequest.resourceType}${formatSearchQuery({ ...searchRequest, offset: pageOffset, count })}`;
  const links: BundleLink[] = [
    { relation: 'self', url: url(offset) },
    { relation: 'first', url: url(0) },
  ];
  if (count > 0 && offset + count < total) {
    links.push({ relation: 'next', url: url(offset + count) });
  }
  if (offset > 0) {
    links.push({ relation: 'previous', url: url(Math.max(offset - count, 0)) });
  }
  return links;
}
