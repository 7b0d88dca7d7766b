import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient } from '@medplum/core';
import type { Patient, ProjectMembership, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { type LaunchedMedplum, launchEmbeddedMedplum } from '../../src/embedded/launch';
import { StoreInUseError } from '../../src/embedded/store/lock';
import { DEMO_PASSWORD, DEMO_TENANTS, demoDefinition, demoEmail } from '../../src/provision/demo';
import { startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';

/**
 * A restart on the same store after a demo patient's own writes. A PUT of her Patient without `meta`
 * drops the provisioning tag (Medplum stores the resource as sent), yet the next start finds her by
 * her demo identifier (read-only to patients), makes no second Patient, leaves her edits, answers and
 * acceptances as they were, and her login (token and password) still names her.
 */
const dir = mkdtempSync(join(tmpdir(), 'pc-restart-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alices = (medplum: LaunchedMedplum) =>
  medplum.admin.searchResources('Patient', { identifier: `${SYSTEMS.demoPatient}|alice` }, { cache: 'no-cache' });

/** Her own view of her record: what she would lose if a start lost it. */
async function herRecord(client: MedplumClient) {
  const [consents, answers] = await Promise.all([
    client.searchResources('Consent', { _count: '100' }, { cache: 'no-cache' }),
    client.searchResources('QuestionnaireResponse', { _count: '100' }, { cache: 'no-cache' }),
  ]);
  return { consents: consents.map((c) => c.id).sort(), answers: answers.map((a) => a.id).sort() };
}

/** Signs her in with her demo password, as a patient app does: the Patient her login names. */
async function signIn(medplum: LaunchedMedplum): Promise<string | undefined> {
  const client = new MedplumClient({ baseUrl: medplum.baseUrl, fetch: medplum.fetch, cacheTime: 0 });
  const login = await client.startLogin({
    email: demoEmail('alice', 'northwind'),
    password: DEMO_PASSWORD,
    projectId: medplum.project.id,
    clientId: DEMO_TENANTS[0].appId,
  });
  await client.processCode(login.code as string);
  return client.getProfile()?.id;
}

describe('provisioning across restarts', () => {
  it('a patient’s writes (a PUT without meta among them) are neither lost nor duplicated by the next start', async () => {
    const dbPath = join(dir, 'store.sqlite');
    const first = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    const [alice] = await alices(first);
    const membership = (await first.admin.searchOne('ProjectMembership', {
      profile: `Patient/${alice.id}`,
    })) as ProjectMembership;
    const own = await first.clientFor(membership);
    const token = own.getAccessToken() as string;

    // She accepts what she must (Consents, written by the bot), answers a form, and edits her details.
    const gateway = createApp({
      medplum: { baseUrl: first.baseUrl, fetch: first.fetch },
      issuer: first.baseUrl,
      projectId: first.project.id,
      limits: DEFAULT_LIMITS,
      edgeSigner: createEdgeSigner(first.edgeStatementKey),
    });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const { unmet } = (await (await gateway.request('/v1/agreements/requirements', { headers })).json()) as {
      unmet: unknown[];
    };
    expect(unmet.length).toBeGreaterThan(0);
    const accepted = await gateway.request('/v1/agreements/acceptances', {
      method: 'POST',
      headers,
      body: JSON.stringify({ agreements: unmet }),
    });
    expect(accepted.status).toBe(200);
    await own.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      subject: { reference: `Patient/${alice.id}` },
      author: { reference: `Patient/${alice.id}` },
      source: { reference: `Patient/${alice.id}` },
      item: [{ linkId: 'mood', answer: [{ valueString: 'fine' }] }],
    });
    const { meta: _dropped, ...withoutMeta } = await own.readResource('Patient', alice.id as string);
    const edited: Patient = {
      ...withoutMeta,
      telecom: [{ system: 'phone', value: '+14155550199', use: 'mobile' }],
      address: [{ line: ['9 New Road'], city: 'Oakland', state: 'CA', postalCode: '94607', country: 'US' }],
    } as Patient;
    const written = await own.updateResource(edited);
    expect(written.meta?.tag?.some((t) => t.system === SYSTEMS.provisioning) ?? false).toBe(false);
    const before = await herRecord(own);
    expect(before.consents).toHaveLength(unmet.length);
    expect(before.answers).toHaveLength(1);
    first.close();

    const second = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    try {
      const after = await alices(second);
      expect(after.map((p) => p.id)).toEqual([alice.id]);
      expect(after[0].meta?.tag?.some((t) => t.system === SYSTEMS.provisioning)).toBe(true);
      // Her edits stand: a start seeds demographics once, never resets them.
      expect(after[0].address).toEqual(edited.address);
      expect(after[0].telecom).toEqual(edited.telecom);
      const memberships = await second.admin.searchResources(
        'ProjectMembership',
        { profile: `Patient/${alice.id}` },
        { cache: 'no-cache' },
      );
      expect(memberships.map((m) => m.id)).toEqual([membership.id]);
      expect(await second.admin.searchResources('Patient', { name: alice.name?.[0]?.family ?? '' })).toHaveLength(1);
      // Her login still names her, by token and by password, and she sees all she had.
      const again = new MedplumClient({ baseUrl: second.baseUrl, fetch: second.fetch, cacheTime: 0 });
      again.setAccessToken(token);
      expect(await herRecord(again)).toEqual(before);
      expect(await signIn(second)).toBe(alice.id);
    } finally {
      second.close();
    }
  });

  it('a second Medplum on the same store file refuses to start, in this process and from another', {
    timeout: scaled(90_000),
  }, async () => {
    const dbPath = join(dir, 'shared.sqlite');
    // A store file left readable by everyone (as before stores were the owner's alone) is put right.
    writeFileSync(dbPath, '');
    chmodSync(dbPath, 0o644);
    const running = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    try {
      // Patients' records: the store, its lock and SQLite's journal files are the owner's alone.
      for (const file of [dbPath, `${dbPath}.lock`, `${dbPath}-wal`, `${dbPath}-shm`].filter(existsSync)) {
        expect(statSync(file).mode & 0o777, file).toBe(0o600);
      }
      expect(existsSync(`${dbPath}-wal`)).toBe(true);
      await expect(launchEmbeddedMedplum({ dbPath, definition: demoDefinition() })).rejects.toThrow(StoreInUseError);
      // npm start beside it, on the same file: it stops with a message that says what to do.
      await expect(startNpmStart({ EMBEDDED_MEDPLUM_DB: dbPath })).rejects.toThrow(
        /npm start exited with 1: .*in use by another embedded Medplum.*EMBEDDED_MEDPLUM_DB/s,
      );
      expect(await alices(running)).toHaveLength(1);
    } finally {
      running.close();
    }
    // Once it has stopped, the file is free again.
    const next = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    expect(await alices(next)).toHaveLength(1);
    next.close();
  });
});
