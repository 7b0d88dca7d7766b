import { FhirRouter } from '@medplum/fhir-router';
import type { Project } from '@medplum/fhirtypes';
import { systemContext } from '../../src/embedded/auth/authenticate';
import { loadFhirSchema } from '../../src/embedded/schema';
import { Database } from '../../src/embedded/store/database';
import { type ResourceChange, SqliteRepository } from '../../src/embedded/store/repo';

export const TEST_PROJECT: Project = { resourceType: 'Project', id: 'test-project', name: 'test' };

/** A bare store + Medplum's FHIR router, for storage-level tests that need no HTTP or auth. */
export function createTestStore(path = ':memory:') {
  loadFhirSchema();
  const db = new Database(path);
  const commits: ResourceChange[][] = [];
  const repo = new SqliteRepository(
    { db, baseUrl: 'http://embedded.test/', onCommit: (changes) => commits.push(changes) },
    systemContext(TEST_PROJECT),
  );
  return { db, repo, router: new FhirRouter(), commits };
}
