import { MedplumClient, type WithId } from '@medplum/core';
import type { ClientApplication, Organization, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * A tenant's backend (issue 51 item 1): a machine client of the tenant's own server, provisioned with the
 * tenant (the demo's `app-server`; a clinic file's `backends`), signing in with client credentials. It
 * reads the records its webhooks name, of its own tenant's patients, and nothing else: not another
 * tenant's, not her messages or notes, no write, no bot, no secret. Attacked from both sides: the backend
 * reaching out, and clinicians and patients reaching for its credentials.
 */
let backend: TestBackend;
const clients: Record<string, MedplumClient> = {};
let northwindTask: WithId<Task>;
let southridgeTask: WithId<Task>;

async function backendOf(tenant: string): Promise<{ client: WithId<ClientApplication>; medplum: MedplumClient }> {
  const client = (await backend.admin.searchOne('ClientApplication', {
    _tag: `${SYSTEMS.tenantBackend}|${tenant}/app-server`,
  })) as WithId<ClientApplication>;
  const medplum = new MedplumClient({ baseUrl: backend.baseUrl, fetch: backend.fetch, cacheTime: 0 });
  await medplum.startClientLogin(client.id, client.secret as string);
  return { client, medplum };
}

async function taskFor(tenant: string, patient: string): Promise<WithId<Task>> {
  const org = (await backend.admin.searchOne('Organization', {
    identifier: `${SYSTEMS.tenant}|${tenant}`,
  })) as WithId<Organization>;
  return backend.admin.createResource<Task>(
    {
      resourceType: 'Task',
      meta: { accounts: [{ reference: `Organization/${org.id}` }] },
      status: 'ready',
      intent: 'order',
      for: { reference: `Patient/${patient}` },
      description: 'What a webhook names',
    },
    { headers: { 'X-Medplum': 'extended' } },
  );
}

/** The status a refused call answers (a read outside the policy is not found; a write, forbidden). */
async function refused(call: Promise<unknown>): Promise<number> {
  try {
    await call;
  } catch (err) {
    return (err as { outcome?: { id?: string } }).outcome?.id === 'not-found' ? 404 : 403;
  }
  return 200;
}

beforeAll(async () => {
  backend = await startTestBackend();
  for (const tenant of ['northwind', 'southridge']) {
    clients[tenant] = (await backendOf(tenant)).medplum;
  }
  northwindTask = await taskFor('northwind', backend.patients.alice.patient.id);
  southridgeTask = await taskFor('southridge', backend.patients.carol.patient.id);
});

afterAll(() => backend?.close());

describe("a tenant's backend", () => {
  it('reads what its webhooks name, of its own patients: her Task, her Patient, her chart', async () => {
    const northwind = clients.northwind as MedplumClient;
    expect((await northwind.readResource('Task', northwindTask.id)).description).toBe('What a webhook names');
    expect((await northwind.readResource('Patient', backend.patients.alice.patient.id)).id).toBe(
      backend.patients.alice.patient.id,
    );
    const weights = await northwind.searchResources('Observation', {
      subject: `Patient/${backend.patients.alice.patient.id}`,
    });
    expect(weights.length).toBeGreaterThan(0);
    // Its search of patients is its tenant's, whatever it asks.
    const patients = await northwind.searchResources('Patient', { _count: '1000' });
    const ids = patients.map((p) => p.id);
    expect(ids).toEqual(expect.arrayContaining([backend.patients.alice.patient.id, backend.patients.bob.patient.id]));
    expect(ids).not.toContain(backend.patients.carol.patient.id);
    expect(ids).not.toContain(backend.patients.dave.patient.id);
  });

  it("never another tenant's: the same read by the other tenant's backend is refused, and its searches find none of them", async () => {
    const southridge = clients.southridge as MedplumClient;
    expect(await refused(southridge.readResource('Task', northwindTask.id))).not.toBe(200);
    expect(await refused(southridge.readResource('Patient', backend.patients.alice.patient.id))).not.toBe(200);
    expect((await southridge.searchResources('Task', { _id: northwindTask.id })).length).toBe(0);
    expect(
      (await southridge.searchResources('Observation', { subject: `Patient/${backend.patients.alice.patient.id}` }))
        .length,
    ).toBe(0);
    // And its own, yes.
    expect((await southridge.readResource('Task', southridgeTask.id)).id).toBe(southridgeTask.id);
  });

  it('writes nothing, runs no bot, reads no message, note, upload, access log or secret', async () => {
    const northwind = clients.northwind as MedplumClient;
    const alice = backend.patients.alice.patient;
    expect(await refused(northwind.updateResource({ ...northwindTask, status: 'cancelled' }))).not.toBe(200);
    expect(
      await refused(
        northwind.createResource({
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'forged' },
          subject: { reference: `Patient/${alice.id}` },
        }),
      ),
    ).not.toBe(200);
    expect(await refused(northwind.deleteResource('Task', northwindTask.id))).not.toBe(200);
    expect(
      await refused(northwind.executeBot({ system: SYSTEMS.bots, value: 'patient-home' }, {}, 'application/json')),
    ).not.toBe(200);
    for (const type of [
      'Communication',
      'ClinicalImpression',
      'AuditEvent',
      'Binary',
      'ClientApplication',
      'Bot',
    ] as const) {
      expect(await refused(northwind.searchResources(type, {})), type).not.toBe(200);
    }
    expect((await backend.admin.readResource('Task', northwindTask.id, { cache: 'no-cache' })).status).toBe('ready');
  });

  it("its credentials are nobody else's to read: a clinician of its tenant and a patient see no secret", async () => {
    const { client } = await backendOf('northwind');
    const clinician = backend.clinicians.northwind?.medplum as MedplumClient;
    const seen = await clinician.readResource('ClientApplication', client.id).catch(() => undefined);
    expect(seen?.secret).toBeUndefined();
    const patient = backend.patients.alice.medplum;
    const hers = await patient.readResource('ClientApplication', client.id).catch(() => undefined);
    expect(hers?.secret).toBeUndefined();
  });
});
