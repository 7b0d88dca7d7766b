import { createHash, randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type {
  Bundle,
  HealthcareService,
  Login,
  OperationOutcome,
  Patient,
  Project,
  ProjectMembership,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG, SYSTEMS } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

async function post(
  path: string,
  body: unknown,
  form = false,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json' },
    body: form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

async function tenantApp(key: string): Promise<string> {
  const app = await backend.admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.provisioning}|app-${key}` });
  return app?.id as string;
}

/** newuser -> newpatient -> code -> token (PKCE), as a patient app does it. */
async function register(email: string, clientId: string): Promise<{ token: string; patientId: string }> {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const user = await post('auth/newuser', {
    firstName: 'Rita',
    lastName: 'Registrant',
    email,
    password: 'correct horse battery',
    projectId: backend.project.id,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  expect(user.status).toBe(200);
  const patient = await post('auth/newpatient', { login: user.json.login, projectId: backend.project.id });
  expect(patient.status).toBe(200);
  const wrong = await post(
    'oauth2/token',
    { grant_type: 'authorization_code', code: patient.json.code as string, code_verifier: 'wrong' },
    true,
  );
  expect(wrong.status).toBe(400);
  const tokens = await post(
    'oauth2/token',
    { grant_type: 'authorization_code', code: patient.json.code as string, code_verifier: verifier },
    true,
  );
  expect(tokens.status).toBe(200);
  const profile = (tokens.json.profile as { reference: string }).reference;
  return { token: tokens.json.access_token as string, patientId: profile.split('/')[1] };
}

describe('patient self-registration and the patient-home bot', () => {
  it('registers, gets a token with PKCE, and is placed in the tenant of the app it registered with', async () => {
    const clientId = await tenantApp('southridge');
    const { token, patientId } = await register('rita@example.test', clientId);
    const medplum = new MedplumClient({ baseUrl: backend.baseUrl, fetch: backend.fetch, cacheTime: 0 });
    medplum.setAccessToken(token);
    const registered = await medplum.readResource('Patient', patientId);
    expect(registered.name?.[0]?.family).toBe('Registrant');
    // Her sign-up email as Medplum's createProfile writes it (packages/server/src/auth/utils.ts): use `work`.
    expect(registered.telecom).toEqual([{ system: 'email', use: 'work', value: 'rita@example.test' }]);

    const bot = { system: SYSTEMS.bots, value: 'patient-home' };
    const result = await medplum.executeBot(bot, {}, 'application/json');
    const org = `Organization/${(await backend.admin.searchOne('Organization', { identifier: `${SYSTEMS.tenant}|southridge` }))?.id}`;
    expect(result).toEqual({ ok: true, organization: org, patient: `Patient/${patientId}` });

    const patient = await backend.systemRepo.readResource<Patient>('Patient', patientId);
    expect(patient.managingOrganization?.reference).toBe(org);
    expect(patient.meta?.accounts).toEqual([{ reference: org }]);
    const membership = await backend.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: `Patient/${patientId}` }],
    });
    expect(membership?.access?.[0]?.parameter).toEqual([{ name: 'organization', valueReference: { reference: org } }]);

    // Idempotent: the same call again writes nothing new.
    const versionBefore = patient.meta?.versionId;
    expect(await medplum.executeBot(bot, {}, 'application/json')).toEqual(result);
    expect((await backend.systemRepo.readResource<Patient>('Patient', patientId)).meta?.versionId).toBe(versionBefore);

    // Naming another tenant's app in the input is refused: the tenant never comes from input.
    const named = await medplum.executeBot(bot, { clientId: await tenantApp('northwind') }, 'application/json');
    expect(named).toMatchObject({ ok: false, error: { status: 400, code: 'invalid_request' } });
    // Signing in through another tenant's app later cannot move the patient: homing is final.
    const membership2 = (await backend.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: `Patient/${patientId}` }],
    })) as ProjectMembership;
    const elsewhere = await backend.clientFor(membership2, await tenantApp('northwind'));
    const moved = await elsewhere.executeBot(bot, {}, 'application/json');
    expect(moved).toMatchObject({ ok: false, error: { status: 409, code: 'invalid_state' } });
  });

  it('refuses patient registration into a project without a default patient policy, and creates nothing', async () => {
    // packages/server/src/auth/newpatient.ts (createPatient): the user may be created, the patient may not.
    const closed = await backend.systemRepo.createResource<Project>({ resourceType: 'Project', name: 'Closed clinic' });
    expect(closed.defaultPatientAccessPolicy).toBeUndefined();
    const user = await post('auth/newuser', {
      firstName: 'Cora',
      lastName: 'Closed',
      email: 'cora@example.test',
      password: 'correct horse battery',
      projectId: closed.id,
    });
    expect(user.status).toBe(200);
    const patient = await post('auth/newpatient', { login: user.json.login, projectId: closed.id });
    expect(patient.status).toBe(400);
    expect((patient.json as unknown as OperationOutcome).issue?.[0]?.details?.text).toBe(
      'Project does not allow open registration',
    );
    expect(patient.json.code).toBeUndefined();
    const inClosed = backend.db.reader
      .prepare(
        "SELECT type, count(*) AS n FROM resource WHERE project = ? AND type IN ('Patient', 'ProjectMembership') GROUP BY type",
      )
      .all(closed.id);
    expect(inClosed).toEqual([]);
    // The login got no membership, so no code: it can never become a session.
    const login = await backend.systemRepo.readResource<Login>('Login', user.json.login as string);
    expect(login.membership).toBeUndefined();
  });

  it('refuses a second registration with the same email', async () => {
    const clientId = await tenantApp('northwind');
    await register('dup@example.test', clientId);
    const again = await post('auth/newuser', {
      firstName: 'A',
      lastName: 'B',
      email: 'DUP@example.test',
      password: 'another password',
      projectId: backend.project.id,
    });
    expect(again.status).toBe(400);
    expect((again.json as unknown as OperationOutcome).issue?.[0]?.details?.text).toBe('Email already registered');
  });

  it('a tenant catalog item is visible only to that tenant', async () => {
    const northwind = await backend.admin.searchOne('Organization', { identifier: `${SYSTEMS.tenant}|northwind` });
    const service = await backend.admin.createResource<HealthcareService>({
      resourceType: 'HealthcareService',
      name: 'Northwind weight clinic',
      meta: {
        accounts: [{ reference: `Organization/${northwind?.id}` }],
        tag: [{ system: CATALOG.system, code: CATALOG.tenant }],
      },
    });
    const alice = await backend.patients.alice.medplum.search('HealthcareService', { _id: service.id });
    const carol = await backend.patients.carol.medplum.search('HealthcareService', { _id: service.id });
    expect((alice as Bundle).entry?.length).toBe(1);
    expect((carol as Bundle).entry ?? []).toEqual([]);
  });
});
