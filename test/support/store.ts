import { FhirRouter } from '@medplum/fhir-router';
import type { Project } from '@medplum/fhirtypes';
import type { CallerContext } from '../../src/embedded/context';
import { loadFhirSchema } from '../../src/embedded/schema';
import { Database } from '../../src/embedded/store/database';
import { type ResourceChange, SqliteRepository } from '../../src/embedded/store/repo';

export const TEST_PROJECT: Project = { resourceType: 'Project', id: 'test-project', name: 'test' };

const SYSTEM_CALLER: CallerContext = {
  system: true,
  project: TEST_PROJECT,
  membership: {
    resourceType: 'ProjectMembership',
    project: { reference: 'Project/test-project' },
    user: { reference: 'system' },
    profile: { reference: 'system' },
  },
  profile: { reference: 'system' },
};

/** A bare store + Medplum's FHIR router, for storage-level tests that need no HTTP or auth. */
export function createTestStore(path = ':memory:') {
  loadFhirSchema();
  const db = new Database(path);
  const commits: ResourceChange[][] = [];
  const repo = new SqliteRepository(
    { db, baseUrl: 'http://embedded.test/', onCommit: (changes) => commits.push(changes) },
    SYSTEM_CALLER,
  );
  return { db, repo, router: new FhirRouter(), commits };
}
