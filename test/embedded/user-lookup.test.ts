import type { Patient, Project, ProjectMembership, User } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/embedded/auth/routes';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Password sign-in finds the User an email names as Medplum does (packages/server/src/oauth/utils.ts,
 * getUserByEmail): the project's own user of that email, else a server-wide one, never another
 * project's. Two projects may each have a patient with one email; each signs in to their own.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const EMAIL = 'shared.inbox@example.test';

const login = (password: string) =>
  backend.fetch(new URL('auth/login', backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: EMAIL, password, projectId: backend.project.id }),
  });

describe('password sign-in by email', () => {
  it('finds the project’s own user, never another project’s user of the same email', async () => {
    const other = await backend.systemRepo.createResource<Project>({ resourceType: 'Project', name: 'Other' });
    // The other project's user first, so that a lookup by email alone finds it first.
    await backend.systemRepo.createResource<User>({
      resourceType: 'User',
      meta: { project: other.id },
      firstName: 'Other',
      lastName: 'Project',
      email: EMAIL,
      passwordHash: hashPassword('Other-Password-1'),
      project: { reference: `Project/${other.id}` },
    });
    const project = backend.project.id as string;
    const user = await backend.systemRepo.createResource<User>({
      resourceType: 'User',
      meta: { project },
      firstName: 'Own',
      lastName: 'Project',
      email: EMAIL,
      passwordHash: hashPassword('Own-Password-1'),
      project: { reference: `Project/${project}` },
    });
    const patient = await backend.systemRepo.createResource<Patient>({
      resourceType: 'Patient',
      meta: { project },
      name: [{ given: ['Own'], family: 'Project' }],
    });
    await backend.systemRepo.createResource<ProjectMembership>({
      resourceType: 'ProjectMembership',
      meta: { project },
      project: { reference: `Project/${project}` },
      user: { reference: `User/${user.id}` },
      profile: { reference: `Patient/${patient.id}` },
    });

    const own = await login('Own-Password-1');
    expect(own.status).toBe(200);
    expect(((await own.json()) as { login?: string }).login).toEqual(expect.any(String));
    expect((await login('Other-Password-1')).status).toBe(400);
  });
});
