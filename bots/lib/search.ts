import type { MedplumClient, QueryTypes, WithId } from '@medplum/core';
import type { ExtractResource, ResourceType } from '@medplum/fhirtypes';

/** The largest page Medplum serves (packages/server/src/fhir/search.ts: maxSearchCount 1000). */
const PAGE = '1000';

/**
 * Every match of a search, page after page through the `next` links, so that nothing relevant can
 * fall off the end of one page (a first page of 1,000 is not "all"). For reads whose answer the
 * workflow must see whole: the catalog of agreement versions, a patient's active acceptances.
 */
export async function searchAll<RT extends ResourceType>(
  medplum: MedplumClient,
  resourceType: RT,
  query: Record<string, string> | URLSearchParams,
): Promise<WithId<ExtractResource<RT>>[]> {
  const all: WithId<ExtractResource<RT>>[] = [];
  // A total order, oldest first: a version published while the pages are read lands after them, and
  // rows with one timestamp cannot swap places between two pages (Postgres gives no order otherwise;
  // Medplum orders by both columns: packages/server/src/fhir/search.ts, addOrderByClause).
  const paged = new URLSearchParams(query);
  paged.set('_sort', '_lastUpdated,_id');
  paged.set('_count', PAGE);
  for await (const page of medplum.searchResourcePages(resourceType, paged as QueryTypes)) {
    all.push(...page);
  }
  return all;
}
