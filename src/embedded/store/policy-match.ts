import type { SearchRequest } from '@medplum/core';
import { matchesSearchRequest, parseSearchRequest, projectAdminResourceTypes } from '@medplum/core';
import type { AccessPolicy, AccessPolicyResource, Resource } from '@medplum/fhirtypes';

const READ_INTERACTIONS = ['read', 'vread', 'history', 'search'];
const parsedCriteria = new Map<string, SearchRequest>();

/** Parsed once per distinct criteria string: policies repeat across every request of every patient. */
function criteriaOf(criteria: string): SearchRequest {
  let parsed = parsedCriteria.get(criteria);
  if (!parsed) {
    parsed = parseSearchRequest(criteria);
    if (parsedCriteria.size > 10_000) {
      parsedCriteria.clear();
    }
    parsedCriteria.set(criteria, parsed);
  }
  return parsed;
}

export function entryAllows(entry: AccessPolicyResource, resourceType: string, interaction: string): boolean {
  if (
    entry.resourceType !== resourceType &&
    (entry.resourceType !== '*' || projectAdminResourceTypes.includes(resourceType))
  ) {
    return false;
  }
  if (!entry.interaction) {
    return !entry.readonly || READ_INTERACTIONS.includes(interaction);
  }
  return (entry.interaction as string[]).includes(interaction);
}

/**
 * The first policy entry that grants `interaction` on this resource: the same rules as
 * @medplum/core's satisfiedAccessPolicy (type, interaction/readonly, criteria), with criteria parsed
 * once instead of once per resource, which dominated patient-scoped searches.
 */
export function matchingPolicyEntry(
  resource: Resource,
  interaction: string,
  policy: AccessPolicy,
): AccessPolicyResource | undefined {
  return policy.resource?.find((entry) => {
    if (!entryAllows(entry, resource.resourceType, interaction)) {
      return false;
    }
    if (resource.resourceType === 'Binary') {
      return true;
    }
    if (entry.compartment && !resource.meta?.compartment?.some((c) => c.reference === entry.compartment?.reference)) {
      return false;
    }
    return !entry.criteria || matchesSearchRequest(resource, criteriaOf(entry.criteria));
  });
}
