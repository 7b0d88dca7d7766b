import { randomUUID } from 'node:crypto';
import type { OperationOutcome, Patient, Project, ProjectMembership, User } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/embedded/auth/routes';
import { DEMO_PASSWORD, DEMO_TENANTS, demoEmail } from '../../src/provision/demo';
import { direct } from '../support/attack';
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

/** `POST auth/login` (or `auth/method`) as Medplum's app sends it: status and body. */
async function post(
  path: string,
  body: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const signIn = (email: string, password: string, extra: Record<string, string> = {}) =>
  post('auth/login', { email, password, codeChallenge: 'x'.repeat(43), codeChallengeMethod: 'plain', ...extra });

/**
 * A refused sign-in: 400, an OperationOutcome of code `invalid`, no code. Where Medplum says "User not found"
 * (no user by its lookup) the embedded Medplum says what it says of a wrong password: no answer tells
 * whether an account exists (stricter than Medplum, see login-throttle.test.ts).
 */
function expectRefused(
  answer: { status: number; body: Record<string, unknown> },
  text = 'Email or password is invalid',
) {
  expect(answer.status).toBe(400);
  expect(answer.body.code).toBeUndefined();
  const outcome = answer.body as unknown as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue?.[0]).toMatchObject({ severity: 'error', code: 'invalid', details: { text } });
}

const invite = (body: Record<string, unknown>) =>
  direct(backend, backend.admin.getAccessToken() as string, 'POST', `admin/projects/${backend.project.id}/invite`, {
    body: { resourceType: 'Practitioner', firstName: 'Invited', lastName: 'Colleague', sendEmail: false, ...body },
    headers: { 'content-type': 'application/json' },
  });

const userOf = (membership: ProjectMembership) =>
  backend.systemRepo.readReference<User>(membership.user as { reference: string });

describe('a project-scoped user signs in only with their project (packages/server/src/auth/login.ts, oauth/utils.ts tryLogin and getUserByEmail)', () => {
  it('the demo patients and clinicians are Users of the project: without projectId or clientId, no user is found (Medplum: 400 "User not found")', async () => {
    const northwind = DEMO_TENANTS[0];
    for (const person of ['alice', 'clinician']) {
      const email = demoEmail(person, northwind.key);
      const [user] = await backend.systemRepo.searchResources<User>({
        resourceType: 'User',
        filters: [{ code: 'email', operator: 'exact', value: email }],
      });
      expect(user.project?.reference, email).toBe(`Project/${backend.project.id}`);
      // Medplum looks up a server-wide User only (getUserByEmailWithoutProject), and finds none.
      expectRefused(await signIn(email, DEMO_PASSWORD));
      const signedIn = await signIn(email, DEMO_PASSWORD, { projectId: backend.project.id as string });
      expect(signedIn.status, email).toBe(200);
      expect(signedIn.body.code).toEqual(expect.any(String));
      // auth/method answers the same for every email (packages/server/src/auth/method.ts): the password form.
      expect(await post('auth/method', { email })).toEqual({ status: 200, body: {} });
    }
    // The patient app's client names the project too (getProjectIdByClientId).
    expect((await signIn(demoEmail('alice', northwind.key), DEMO_PASSWORD, { clientId: northwind.appId })).status).toBe(
      200,
    );
  });

  it('a client names its project: a projectId naming another is refused (packages/server/src/auth/utils.ts getProjectIdByClientId)', async () => {
    const other = await backend.systemRepo.createResource<Project>({ resourceType: 'Project', name: 'Elsewhere' });
    const answer = await signIn(demoEmail('alice', 'northwind'), DEMO_PASSWORD, {
      clientId: DEMO_TENANTS[0].appId,
      projectId: other.id,
    });
    expectRefused(answer, 'Invalid projectId');
  });

  it('an invite with scope "project" makes a User of the project; without it, a server-wide one that signs in without projectId (packages/server/src/admin/invite.ts makeUserResource)', async () => {
    const password = 'Invited-Password-1';
    const scoped = `scoped-${randomUUID()}@example.test`;
    const invited = await invite({ email: scoped, password, scope: 'project' });
    expect(invited.status, invited.text).toBe(200);
    expect((await userOf(invited.body as ProjectMembership)).project?.reference).toBe(`Project/${backend.project.id}`);
    expectRefused(await signIn(scoped, password));
    expect((await signIn(scoped, password, { projectId: backend.project.id as string })).status).toBe(200);

    const serverWide = `server-wide-${randomUUID()}@example.test`;
    const member = await invite({ email: serverWide, password });
    expect(member.status, member.text).toBe(200);
    expect((await userOf(member.body as ProjectMembership)).project).toBeUndefined();
    // Medplum finds the server-wide User, and its one membership is the login's (tryLogin).
    const signedIn = await signIn(serverWide, password);
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.code).toEqual(expect.any(String));
    // The same person invited again at the other scope: 409, one person would be two Users (inviteUser).
    expect((await invite({ email: serverWide, password, scope: 'project' })).status).toBe(409);
    expect((await invite({ email: scoped, password })).status).toBe(409);
  });

  it('a server-wide invite never takes another project’s User of the same email', async () => {
    const email = `elsewhere-${randomUUID()}@example.test`;
    const other = await backend.systemRepo.createResource<Project>({ resourceType: 'Project', name: 'Other' });
    const foreign = await backend.systemRepo.createResource<User>({
      resourceType: 'User',
      meta: { project: other.id },
      firstName: 'Other',
      lastName: 'Project',
      email,
      passwordHash: hashPassword('Other-Password-1'),
      project: { reference: `Project/${other.id}` },
    });
    const member = await invite({ email, password: 'Own-Password-1' });
    expect(member.status, member.text).toBe(200);
    const user = await userOf(member.body as ProjectMembership);
    expect(user.id).not.toBe(foreign.id);
    expect(user.project).toBeUndefined();
  });
});
