import type { MedplumClient, WithId } from '@medplum/core';
import { MedplumClient as Client } from '@medplum/core';
import type { Bot, Consent, Patient, Project, ProjectMembership, User } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { bootstrapProject } from '../../src/embedded/bootstrap';
import { createEmbeddedMedplum, type EmbeddedMedplum } from '../../src/embedded/server';
import { applyDefinition, type ProvisionReport } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Provisioning goes only through the doors a project admin has on Medplum: FHIR for resources, and the
 * admin API for what carries a membership (packages/server/src/admin/bot.ts, client.ts, invite.ts,
 * project.ts `members/:membershipId`). `ProjectMembership.user` and `project` are read-only to a project
 * admin over FHIR (packages/server/src/fhir/accesspolicy.ts applyProjectAdminAccessPolicy).
 */
describe('provisioning with project-admin credentials only', () => {
  let embedded: EmbeddedMedplum;
  let admin: MedplumClient;
  let project: WithId<Project>;
  let first: ProvisionReport;
  const definition = demoDefinition();
  const historyRows = () =>
    (embedded.db.reader.prepare("SELECT count(*) AS n FROM history WHERE type <> 'AuditEvent'").get() as { n: number })
      .n;

  beforeAll(async () => {
    // Provisioning is run again and again here, as an admin: more than a minute's FHIR quota of one member.
    embedded = await createEmbeddedMedplum({ dbPath: ':memory:', fhirQuota: 1_000_000 });
    const bootstrap = await bootstrapProject(embedded.systemRepo, 'Admin API', definition.project.features);
    project = bootstrap.project;
    admin = new Client({ baseUrl: embedded.baseUrl, fetch: embedded.fetch, cacheTime: 0 });
    await admin.startClientLogin(bootstrap.adminClient.id, bootstrap.adminClient.secret as string);
    first = await applyDefinition(admin, definition, { bundles: readBotBundles(definition) });
  });
  afterAll(() => embedded?.close());

  it('creates bots, the SMS client and demo people with their memberships through the admin API', async () => {
    // The Project itself is brought to the definition (default patient policy) through FHIR, and the
    // client it runs as tagged, so that clinicians read it by name as the author of what it wrote.
    expect(first.updated).toEqual(['provisioning-client', 'project']);
    expect(first.created).toEqual(
      expect.arrayContaining(['bot-patient-home', 'membership-bot-patient-home', 'integration-sms']),
    );
    for (const bot of definition.bots) {
      const saved = await admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|${bot.key}` });
      const membership = await admin.searchOne('ProjectMembership', { profile: `Bot/${saved?.id}` });
      expect(membership?.user?.reference).toBe(`Bot/${saved?.id}`);
      expect(membership?.accessPolicy?.reference).toMatch(/^AccessPolicy\//);
      expect(membership?.admin).toBe(bot.admin);
    }
    const sms = await admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.provisioning}|integration-sms` });
    expect(sms?.secret).toBeTruthy();
    expect(
      (await admin.searchOne('ProjectMembership', { profile: `ClientApplication/${sms?.id}` }))?.user,
    ).toMatchObject({
      reference: `ClientApplication/${sms?.id}`,
    });

    // A demo patient: invited (project-scoped User), then demographics and tenant written through FHIR.
    const alice = (await admin.searchOne('Patient', { identifier: `${SYSTEMS.demoPatient}|alice` })) as WithId<Patient>;
    expect(alice.birthDate).toBe('1984-03-02');
    expect(alice.meta?.accounts?.[0]?.reference).toMatch(/^Organization\//);
    const membership = (await admin.searchOne('ProjectMembership', {
      profile: `Patient/${alice.id}`,
    })) as WithId<ProjectMembership>;
    expect(membership.externalId).toBe('demo-patient-alice');
    expect(membership.access?.[0]?.parameter?.[0]?.valueReference).toEqual(alice.meta?.accounts?.[0]);
    const user = await embedded.systemRepo.readReference<User>(membership.user as { reference: string });
    expect(user.project?.reference).toBe(`Project/${project.id}`);
  });

  it('a second run writes nothing', async () => {
    const before = historyRows();
    const again = await applyDefinition(admin, definition, { bundles: readBotBundles(definition) });
    expect(again.created).toEqual([]);
    expect(again.updated).toEqual([]);
    expect(again.deployed).toEqual([]);
    await embedded.subscriptions.idle();
    expect(historyRows()).toBe(before);
  });

  it('a changed bot policy moves the membership through members/:membershipId', async () => {
    const changed = {
      ...demoDefinition(),
      bots: definition.bots.map((b) =>
        b.key === 'patient-home' ? { ...b, accessPolicy: 'bot-withdraw-agreement' } : b,
      ),
    };
    if (!definition.accessPolicies.some((p) => p.key === 'bot-withdraw-agreement')) {
      return; // the policy names are the definition's; nothing to move if it changes
    }
    const report = await applyDefinition(admin, changed, { bundles: readBotBundles(changed) });
    expect(report.updated).toEqual(['membership-bot-patient-home']);
    const back = await applyDefinition(admin, definition, { bundles: readBotBundles(definition) });
    expect(back.updated).toEqual(['membership-bot-patient-home']);
  });
});

describe('what a project admin may not do (as on Medplum)', () => {
  let embedded: EmbeddedMedplum;
  let admin: MedplumClient;
  let project: WithId<Project>;

  beforeAll(async () => {
    embedded = await createEmbeddedMedplum({ dbPath: ':memory:' });
    const bootstrap = await bootstrapProject(embedded.systemRepo, 'Refusals', ['bots']);
    project = bootstrap.project;
    admin = new Client({ baseUrl: embedded.baseUrl, fetch: embedded.fetch, cacheTime: 0 });
    await admin.startClientLogin(bootstrap.adminClient.id, bootstrap.adminClient.secret as string);
  });
  afterAll(() => embedded?.close());

  /** The HTTP status of a POST to the admin API, as `client`'s member (none: no token). */
  const status = async (client: MedplumClient | undefined, path: string, body: unknown) => {
    const res = await embedded.fetch(`${embedded.baseUrl}admin/projects/${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(client ? { authorization: `Bearer ${client.getAccessToken()}` } : {}),
      },
      body: JSON.stringify(body),
    });
    return res.status;
  };

  it('writes of ProjectMembership.user through FHIR are refused or ignored (accesspolicy.ts applyProjectAdminAccessPolicy)', async () => {
    const bot = (await admin.post(`admin/projects/${project.id}/bot`, { name: 'target' })) as WithId<Bot>;
    const other = (await admin.post(`admin/projects/${project.id}/bot`, { name: 'other' })) as WithId<Bot>;
    const membership = (await admin.searchOne('ProjectMembership', {
      profile: `Bot/${bot.id}`,
    })) as WithId<ProjectMembership>;
    // Update: `user` keeps its value, whatever the admin sends.
    const updated = await admin.updateResource({ ...membership, user: { reference: `Bot/${other.id}` } });
    expect(updated.user).toMatchObject({ reference: `Bot/${bot.id}` });
    // Create: without a writable `user` a membership cannot be made over FHIR at all.
    await expect(
      admin.createResource<ProjectMembership>({
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${project.id}` },
        user: { reference: `Bot/${other.id}` },
        profile: { reference: `Bot/${other.id}` },
      }),
    ).rejects.toThrow();
    expect(await admin.searchResources('ProjectMembership', { profile: `Bot/${other.id}` })).toHaveLength(1);
  });

  it('the admin endpoints answer Medplum shapes: bot 201, client 201 with a secret, invite 200 membership, 409 twice', async () => {
    const res = await embedded.fetch(`${embedded.baseUrl}admin/projects/${project.id}/bot`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin.getAccessToken()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shape' }),
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ resourceType: 'Bot', name: 'shape', runtimeVersion: 'vmcontext' });
    const client = await admin.post(`admin/projects/${project.id}/client`, { name: 'machine' });
    expect(client).toMatchObject({ resourceType: 'ClientApplication', name: 'machine', secret: expect.any(String) });
    const invite = {
      resourceType: 'Practitioner',
      firstName: 'Ada',
      lastName: 'Admin',
      externalId: 'ada',
      sendEmail: false,
    };
    const membership = (await admin.post(`admin/projects/${project.id}/invite`, invite)) as ProjectMembership;
    expect(membership).toMatchObject({ resourceType: 'ProjectMembership', externalId: 'ada' });
    expect(membership.profile?.reference).toMatch(/^Practitioner\//);
    expect(await status(admin, `${project.id}/bot`, {})).toBe(400);
    // externalId users are made anew each time (no email to match); the same email is a 409.
    const byEmail = { ...invite, externalId: undefined, email: 'ada@example.test' };
    await admin.post(`admin/projects/${project.id}/invite`, byEmail);
    expect(await status(admin, `${project.id}/invite`, byEmail)).toBe(409);
  });

  it('invite refuses a malformed access list with 400 and creates nothing', async () => {
    const users = async () => (await embedded.systemRepo.searchResources({ resourceType: 'User', count: 1000 })).length;
    const before = await users();
    const base = { resourceType: 'Practitioner', firstName: 'Mal', lastName: 'Formed', sendEmail: false };
    for (const [i, access] of [
      'not-a-list',
      { policy: { reference: 'AccessPolicy/x' } },
      [null],
      [42],
      [{ policy: { reference: 'AccessPolicy/x' }, parameter: 'organization' }],
      [{ policy: { reference: 'AccessPolicy/x' }, parameter: [{ name: 'organization' }] }],
      [{ policy: { reference: 'AccessPolicy/x' }, parameter: [{ name: 3, valueString: 'x' }] }],
    ].entries()) {
      expect(await status(admin, `${project.id}/invite`, { ...base, externalId: `mal-${i}`, access }), String(i)).toBe(
        400,
      );
    }
    expect(await users()).toBe(before);
  });

  it('the admin endpoints refuse a non-admin member (admin/utils.ts verifyProjectAdmin: 403) and other projects', async () => {
    const membership = (await admin.post(`admin/projects/${project.id}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Nia',
      lastName: 'Nonadmin',
      externalId: 'nia',
      sendEmail: false,
    })) as WithId<ProjectMembership>;
    const member = await embedded.clientFor(membership);
    for (const [path, body] of [
      ['bot', { name: 'x' }],
      ['client', { name: 'x' }],
      ['invite', { resourceType: 'Patient', firstName: 'a', lastName: 'b', externalId: 'c', sendEmail: false }],
      [`members/${membership.id}`, { ...membership, admin: true }],
    ] as const) {
      expect(await status(member, `${project.id}/${path}`, body)).toBe(403);
    }
    expect((await embedded.systemRepo.readResource<ProjectMembership>('ProjectMembership', membership.id)).admin).toBe(
      undefined,
    );
    expect(await status(admin, 'not-this-one/bot', { name: 'x' })).toBe(403);
    expect(await status(undefined, `${project.id}/bot`, { name: 'x' })).toBe(401);
  });

  it('members/:membershipId changes the policy but never who the membership is', async () => {
    const membership = (await admin.post(`admin/projects/${project.id}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Mo',
      lastName: 'Moved',
      externalId: 'mo',
      sendEmail: false,
    })) as WithId<ProjectMembership>;
    const updated = (await admin.post(`admin/projects/${project.id}/members/${membership.id}`, {
      ...membership,
      admin: true,
      user: { reference: 'User/someone-else' },
    })) as ProjectMembership;
    expect(updated).toMatchObject({ admin: true, user: membership.user, profile: membership.profile });
    expect(await status(admin, `${project.id}/members/${membership.id}`, { ...membership, id: 'x' })).toBe(403);
  });
});

describe('the provisioned project works end to end', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  it('an invited demo patient accepts the agreements through the gateway', async () => {
    const dave = gw.backend.patients.dave;
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: dave.token });
    expect(requirements.status, requirements.text).toBe(200);
    const unmet = (requirements.body as { unmet: { url: string; version: string }[] }).unmet;
    expect(unmet.length).toBeGreaterThan(0);
    const res = await gw.call('POST', '/v1/agreements/acceptances', {
      token: dave.token,
      body: { agreements: unmet.map((u) => `${u.url}|${u.version}`) },
      headers: { 'content-type': 'application/json', 'user-agent': 'test-agent/1.0' },
    });
    expect(res.status, res.text).toBe(200);
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${dave.patient.id}` }],
    });
    expect(consents).toHaveLength(unmet.length);
    // Dave's membership is the one the invite made: a User of the project, not written over FHIR.
    const user = await gw.backend.systemRepo.readReference<User>(dave.membership.user as { reference: string });
    expect(user.resourceType).toBe('User');
  });
});
