import { normalizeOperationOutcome, OperationOutcomeError, validateResource } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
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
 * Not done here: validation against `meta.profile` StructureDefinitions stored in the project (Medplum
 * loads and applies them); the embedded Medplum stores no profiles of its own.
 */
export function validateWrite(resource: Resource): void {
  loadFhirSchema();
  try {
    validateResource(resource, resource.resourceType === 'Binary' ? BINARY_CONTENT : undefined);
  } catch (err) {
    // A validator failure that is not a finding (e.g. a stack overflow) is still the input's fault:
    // Medplum's router answers it as normalizeOperationOutcome does, a 400, never a 500.
    throw err instanceof OperationOutcomeError ? err : new OperationOutcomeError(normalizeOperationOutcome(err));
  }
}
