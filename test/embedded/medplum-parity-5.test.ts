import type {
  AccessPolicy,
  Binary,
  Observation,
  Organization,
  ProjectMembership,
  Subscription,
  User,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_PASSWORD, DEMO_TENANTS, demoEmail } from '../../src/provision/demo';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';
import { deployFixtureBot } from '../support/bots';

/**
 * Where the embedded Medplum differed from Medplum 5.0.10 (issue 23, item 6), made as Medplum's source says.
 * Each test names the file it mirrors.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const EXTENDED = { headers: { 'X-Medplum': 'extended' } };

/** A membership of a ClientApplication with the given policy: a non-admin writer of our choosing. */
async function writerWith(policy: AccessPolicy): Promise<{ token: string }> {
  const stored = await backend.systemRepo.createResource<AccessPolicy>({
    ...policy,
    meta: { project: backend.project.id },
  });
  const membership = await backend.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: backend.project.id },
    project: { reference: `Project/${backend.project.id}` },
    user: { reference: `ClientApplication/writer-${stored.id}` },
    profile: { reference: `ClientApplication/writer-${stored.id}` },
    accessPolicy: { reference: `AccessPolicy/${stored.id}` },
  });
  return { token: (await backend.login(membership)).token };
}

describe('meta.accounts, as packages/server/src/fhir/repo.ts getAccounts computes them', () => {
  it('a project admin in extended mode gets exactly the accounts sent, not the patient’s added', async () => {
    const alice = backend.patients.alice.patient;
    const other = await backend.systemRepo.createResource<Organization>({
      resourceType: 'Organization',
      name: 'Elsewhere',
      meta: { project: backend.project.id },
    });
    const observation = await backend.admin.createResource<Observation>(
      {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'sent accounts' },
        subject: { reference: `Patient/${alice.id}` },
        meta: { accounts: [{ reference: `Organization/${other.id}` }] },
      },
      EXTENDED,
    );
    const stored = await backend.systemRepo.readResource<Observation>('Observation', observation.id as string);
    expect(stored.meta?.accounts).toEqual([{ reference: `Organization/${other.id}` }]);
    // Without extended mode (MedplumClient always sends it; a plain request does not), what was sent
    // is ignored and the patient's accounts are taken.
    const plain = await direct(backend, backend.admin.getAccessToken() as string, 'POST', fhirPath('Observation'), {
      headers: { 'x-medplum': '' },
      body: {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'derived accounts' },
        subject: { reference: `Patient/${alice.id}` },
        meta: { accounts: [{ reference: `Organization/${other.id}` }] },
      },
    });
    expect(plain.status, plain.text).toBe(201);
    const derived = await backend.systemRepo.readResource<Observation>(
      'Observation',
      (plain.body as Observation).id as string,
    );
    expect(derived.meta?.accounts).toEqual(alice.meta?.accounts);
  });

  it("a writer's policy compartment is stamped on create only; an edit does not pull a resource into it; with nothing to derive, the accounts sent stand", async () => {
    const tenant = await backend.systemRepo.createResource<Organization>({
      resourceType: 'Organization',
      name: 'Compartment',
      meta: { project: backend.project.id },
    });
    const writer = await writerWith({
      resourceType: 'AccessPolicy',
      compartment: { reference: `Organization/${tenant.id}` },
      resource: [{ resourceType: 'Organization' }],
    });
    const created = await direct(backend, writer.token, 'POST', fhirPath('Organization'), {
      body: { resourceType: 'Organization', name: 'Made by the writer' },
    });
    expect(created.status, created.text).toBe(201);
    expect((created.body as Organization).meta?.accounts).toEqual([{ reference: `Organization/${tenant.id}` }]);
    // Someone else's Organization, in another account: the writer's edit does not add its compartment;
    // with no patient to derive from, what the writer sends stands, the account it had or none.
    const owned = await backend.systemRepo.createResource<Organization>({
      resourceType: 'Organization',
      name: 'Made elsewhere',
      meta: { project: backend.project.id, accounts: [{ reference: 'Organization/elsewhere' }] },
    });
    const edited = await direct(backend, writer.token, 'PUT', fhirPath(`Organization/${owned.id}`), {
      body: { ...owned, name: 'Edited by the writer' },
    });
    expect(edited.status, edited.text).toBe(200);
    expect((edited.body as Organization).meta?.accounts).toEqual([{ reference: 'Organization/elsewhere' }]);
    const { meta: _dropped, ...withoutMeta } = owned;
    const bare = await direct(backend, writer.token, 'PUT', fhirPath(`Organization/${owned.id}`), {
      body: { ...withoutMeta, name: 'Edited without meta' },
    });
    expect(bare.status, bare.text).toBe(200);
    expect((bare.body as Organization).meta?.accounts).toBeUndefined();
  });
});

describe('subscription deliveries (packages/server/src/workers/subscription.ts, buildRestHookHeaders)', () => {
  it('hand the bot the headers Medplum sends: X-Medplum-Subscription, X-Medplum-Interaction, the channel headers', async () => {
    const bot = await deployFixtureBot(backend, 'record-delivery');
    const subscription = await backend.admin.createResource<Subscription>({
      resourceType: 'Subscription',
      status: 'active',
      reason: 'test',
      criteria: 'Organization?name=Delivered',
      channel: { type: 'rest-hook', endpoint: `Bot/${bot.id}`, header: ['X-Test: yes'] },
    });
    await backend.admin.createResource<Organization>({ resourceType: 'Organization', name: 'Delivered' });
    await backend.subscriptions.idle();
    const [delivery] = await backend.systemRepo.searchResources<Observation>({
      resourceType: 'Observation',
      filters: [{ code: 'code', operator: 'eq', value: 'https://patient-care.example/test|delivery' }],
    });
    const recorded = JSON.parse(delivery?.note?.[0]?.text ?? '{}') as {
      headers: Record<string, string>;
      input: string;
    };
    expect(recorded.input).toBe('Organization');
    expect(recorded.headers).toMatchObject({
      'X-Medplum-Subscription': subscription.id,
      'X-Medplum-Interaction': 'create',
      'X-Test': 'yes',
    });
  });
});

describe('Binary uploads (packages/server/src/fhir/binary.ts)', () => {
  it('a raw body is the content whatever its type, JSON included; only a Binary sent as application/fhir+json is a resource', async () => {
    const json = await direct(backend, backend.admin.getAccessToken() as string, 'POST', fhirPath('Binary'), {
      headers: { 'content-type': 'application/json', accept: 'application/fhir+json' },
      rawBody: '{"resourceType":"Patient","name":[{"family":"Content"}]}',
    });
    expect(json.status, json.text).toBe(201);
    const stored = await backend.systemRepo.readResource<Binary>('Binary', (json.body as Binary).id as string);
    expect(stored.contentType).toBe('application/json');
    expect(Buffer.from(stored.data ?? '', 'base64').toString()).toContain('"family":"Content"');
    const resource = await direct(backend, backend.admin.getAccessToken() as string, 'POST', fhirPath('Binary'), {
      headers: { 'content-type': 'application/fhir+json' },
      rawBody: JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain', data: btoa('as a resource') }),
    });
    expect(resource.status).toBe(201);
    expect((resource.body as Binary).contentType).toBe('text/plain');
  });
});

describe('sign-in (packages/server/src/auth/login.ts)', () => {
  it('auth/login takes the project from projectId or from the client; without either, a project-scoped user is not found', async () => {
    const northwind = DEMO_TENANTS[0];
    const login = (extra: Record<string, string>) =>
      backend.fetch(new URL('auth/login', backend.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          email: demoEmail('alice', northwind.key),
          password: DEMO_PASSWORD,
          codeChallenge: 'x'.repeat(43),
          codeChallengeMethod: 'plain',
          ...extra,
        }),
      });
    for (const extra of [{ projectId: backend.project.id }, { clientId: northwind.appId }] as Record<
      string,
      string
    >[]) {
      const answer = await login(extra);
      expect(answer.status, JSON.stringify(extra)).toBe(200);
      expect(((await answer.json()) as { code?: string }).code).toBeTruthy();
    }
    // Her User is the project's (a patient's always is): Medplum then looks for a server-wide User only
    // (oauth/utils.ts getUserByEmail) and answers 400 "User not found" (test/embedded/user-lookup.test.ts).
    expect((await login({})).status).toBe(400);
  });
});

describe('project admins and User (packages/server/src/fhir/accesspolicy.ts, applyProjectAdminAccessPolicy)', () => {
  it('never see passwordHash: read, vread, history, search, _elements', async () => {
    const users = await backend.admin.search('User', { _count: '50' });
    expect(users.entry?.length).toBeGreaterThan(0);
    const seen: unknown[] = [users, await backend.admin.search('User', { _elements: 'passwordHash,email' })];
    for (const entry of users.entry ?? []) {
      const user = entry.resource as User & { id: string };
      seen.push(await backend.admin.readResource('User', user.id));
      seen.push(await backend.admin.readVersion('User', user.id, user.meta?.versionId as string));
      seen.push(await backend.admin.readHistory('User', user.id));
    }
    for (const answer of seen) {
      expect(JSON.stringify(answer)).not.toMatch(/"passwordHash":"/);
    }
  });
});
