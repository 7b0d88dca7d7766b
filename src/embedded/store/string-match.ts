import {
  evalFhirPathTyped,
  type Filter,
  getSearchParameter,
  Operator,
  splitSearchOnComma,
  toTypedValue,
} from '@medplum/core';
import type { Address, HumanName, Resource } from '@medplum/fhirtypes';

/**
 * String and uri search parameters as Medplum's server compares them (packages/server/src/fhir/search.ts
 * buildStringFilterExpression), where @medplum/core's in-memory matcher finds any substring:
 * - `name=x` (EQUALS) and `:sw`: a case-insensitive prefix (`LOWER(col) LIKE 'x%'`);
 * - `:exact` and `_filter`'s `eq` (Operator.EXACT): the whole value, case-sensitive (`col = 'x'`);
 * - `:contains`: a case-insensitive substring.
 * A HumanName is compared by its name as a whole, its given names and its family name (the columns of
 * Medplum's HumanName lookup table); an Address by its text and each of its parts. The embedded Medplum
 * is then never looser than Medplum: a prefix never matches the middle of a word.
 */
export function isStringFilter(resourceType: string, filter: Filter): boolean {
  const type = getSearchParameter(resourceType, filter.code)?.type;
  return (type === 'string' || type === 'uri') && STRING_OPERATORS.has(filter.operator);
}

const STRING_OPERATORS = new Set<string>([Operator.EQUALS, Operator.STARTS_WITH, Operator.EXACT, Operator.CONTAINS]);

export function matchesStringFilter(resource: Resource, filter: Filter): boolean {
  const param = getSearchParameter(resource.resourceType, filter.code);
  if (!param?.expression) {
    return false;
  }
  const values = evalFhirPathTyped(param.expression, [toTypedValue(resource)]).flatMap((v) =>
    searchableStrings(v.value),
  );
  const wanted = splitSearchOnComma(filter.value);
  return values.some((value) => wanted.some((w) => compare(filter.operator, value, w)));
}

function compare(operator: string, value: string, wanted: string): boolean {
  switch (operator) {
    case Operator.EXACT:
      return value === wanted;
    case Operator.CONTAINS:
      return value.toLowerCase().includes(wanted.toLowerCase());
    default:
      return value.toLowerCase().startsWith(wanted.toLowerCase());
  }
}

function searchableStrings(value: unknown): string[] {
  if (typeof value === 'string') {
    return [value];
  }
  if (!value || typeof value !== 'object') {
    return value === undefined || value === null ? [] : [String(value)];
  }
  if ('family' in value || 'given' in value || 'prefix' in value || 'suffix' in value) {
    const name = value as HumanName;
    const given = (name.given ?? []).join(' ');
    const whole =
      name.text ?? [...(name.prefix ?? []), given, name.family, ...(name.suffix ?? [])].filter(Boolean).join(' ');
    return [whole, given, name.family ?? ''].filter(Boolean);
  }
  const address = value as Address;
  if ('line' in value || 'city' in value || 'state' in value || 'postalCode' in value || 'country' in value) {
    return [
      address.text,
      ...(address.line ?? []),
      address.city,
      address.district,
      address.state,
      address.postalCode,
      address.country,
    ].filter((s): s is string => !!s);
  }
  return 'text' in value && typeof (value as { text?: unknown }).text === 'string'
    ? [(value as { text: string }).text]
    : [];
}
