import { OperationOutcomeError } from '@medplum/core';
import type {
  AccessPolicy,
  Consent,
  Observation,
  Patient,
  ProjectMembership,
  QuestionnaireResponse,
} from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import type { CallerContext } from '../../src/embedded/context';
import { createTestStore, TEST_PROJECT } from '../support/store';

const membership: ProjectMembership = {
  resourceType: 'ProjectMembership',
  project: { reference: `Project/${TEST_PROJECT.id}` },
  user: { reference: 'User/u' },
  profile: { reference: 'Patient/x' },
};

function patientCaller(patientId: string, extra: AccessPolicy['resource'] = []): CallerContext {
  return {
    project: TEST_PROJECT,
    membership,
    profile: { reference: `Patient/${patientId}` },
    accessPolicy: {
      resourceType: 'AccessPolicy',
      resource: [
        {
          resourceType: 'Patient',
          criteria: `Patient?_compartment=Patient/${patientId}`,
          readonlyFields: ['managingOrganization'],
        },
        {
          resourceType: 'Observation',
          criteria: `Observation?_compartment=Patient/${patientId}`,
          readonly: true,
          hiddenFields: ['note'],
        },
        { resourceType: 'QuestionnaireResponse', criteria: `QuestionnaireResponse?_compartment=Patient/${patientId}` },
        ...extra,
      ],
    },
  };
}

async function status(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return 'ok';
  } catch (err) {
    return err instanceof OperationOutcomeError ? err.outcome.id : String(err);
  }
}

async function seed() {
  const store = createTestStore();
  const a = await store.repo.createResource<Patient>({
    resourceType: 'Patient',
    name: [{ family: 'A' }],
    managingOrganization: { reference: 'Organization/t1' },
  });
  const b = await store.repo.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'B' }] });
  const obsA = await store.repo.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'a' },
    subject: { reference: `Patient/${a.id}` },
    note: [{ text: 'internal' }],
  });
  const obsB = await store.repo.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'b' },
    subject: { reference: `Patient/${b.id}` },
  });
  return { ...store, a, b, obsA, obsB };
}

describe('AccessPolicy enforcement in the repository', () => {
  it('answers 404 for a resource outside the criteria and leaves it out of searches', async () => {
    const { repo, a, obsA, obsB } = await seed();
    const asA = repo.withCaller(patientCaller(a.id));
    expect(await status(asA.readResource('Observation', obsB.id))).toBe('not-found');
    expect(await status(asA.readResource('Observation', obsA.id))).toBe('ok');
    const found = await asA.searchResources({ resourceType: 'Observation' });
    expect(found.map((o) => o.id)).toEqual([obsA.id]);
  });

  it('answers 403 for a type the policy never grants, and for writes outside it', async () => {
    const { repo, a, obsA } = await seed();
    const asA = repo.withCaller(patientCaller(a.id));
    expect(await status(asA.searchResources({ resourceType: 'Consent' }))).toBe('forbidden');
    const consent: Consent = {
      resourceType: 'Consent',
      status: 'active',
      scope: { text: 'x' },
      category: [{ text: 'x' }],
      patient: { reference: `Patient/${a.id}` },
    };
    expect(await status(asA.createResource(consent))).toBe('forbidden');
    // readonly entry: visible, not writable
    expect(await status(asA.updateResource({ ...obsA, status: 'amended' }))).toBe('forbidden');
  });

  it('refuses a create whose result would fall outside the criteria', async () => {
    const { repo, a, b } = await seed();
    const asA = repo.withCaller(patientCaller(a.id));
    const own = await asA.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      subject: { reference: `Patient/${a.id}` },
    });
    expect(own.meta?.author?.reference).toBe(`Patient/${a.id}`);
    expect(
      await status(
        asA.createResource({
          resourceType: 'QuestionnaireResponse',
          status: 'completed',
          subject: { reference: `Patient/${b.id}` },
        }),
      ),
    ).toBe('forbidden');
  });

  it('hides hiddenFields and keeps readonlyFields on update', async () => {
    const { repo, a, obsA } = await seed();
    const asA = repo.withCaller(patientCaller(a.id));
    const read = await asA.readResource<Observation>('Observation', obsA.id);
    expect(read.note).toBeUndefined();
    const updated = await asA.updateResource<Patient>({
      ...a,
      gender: 'female',
      managingOrganization: { reference: 'Organization/evil' },
    });
    expect(updated.gender).toBe('female');
    expect(updated.managingOrganization?.reference).toBe('Organization/t1');
  });

  it('stamps meta the caller cannot forge: author, project, compartment', async () => {
    const { repo, a } = await seed();
    const asA = repo.withCaller(patientCaller(a.id));
    const created = await asA.createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      subject: { reference: `Patient/${a.id}` },
      meta: {
        author: { reference: 'Practitioner/forged' },
        project: 'other',
        accounts: [{ reference: 'Organization/forged' }],
      },
    });
    expect(created.meta?.author?.reference).toBe(`Patient/${a.id}`);
    expect(created.meta?.project).toBe(TEST_PROJECT.id);
    // Her record has no account to derive one from, so what was sent stands, as on Medplum (repo.ts: the
    // result's meta starts as the one sent; getAccounts overrides it only with something): policies refuse
    // it where it matters (ONLY_OWN_TENANT; test/security/tenant-choice.test.ts).
    expect(created.meta?.accounts).toEqual([{ reference: 'Organization/forged' }]);
    expect(created.meta?.compartment).toEqual(
      expect.arrayContaining([{ reference: `Project/${TEST_PROJECT.id}` }, { reference: `Patient/${a.id}` }]),
    );
  });

  it('stamps the policy compartment and inherits the patient accounts', async () => {
    const { repo, a } = await seed();
    const tenant = { reference: 'Organization/tenant-1' };
    await repo.updateResource<Patient>({ ...a, meta: { ...a.meta, accounts: [tenant] } });
    const obs = await repo.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'c' },
      subject: { reference: `Patient/${a.id}` },
    });
    expect(obs.meta?.accounts).toEqual([tenant]);
    const scoped = await repo.searchResources({
      resourceType: 'Observation',
      filters: [{ code: '_compartment', operator: 'eq', value: tenant.reference }],
    });
    expect(scoped.map((o) => o.id)).toEqual([obs.id]);
    const caller = patientCaller(a.id);
    (caller.accessPolicy as AccessPolicy).compartment = { reference: 'Organization/tenant-2' };
    const qr = await repo.withCaller(caller).createResource<QuestionnaireResponse>({
      resourceType: 'QuestionnaireResponse',
      status: 'completed',
      subject: { reference: `Patient/${a.id}` },
    });
    expect(qr.meta?.accounts?.map((r) => r.reference).sort()).toEqual([
      'Organization/tenant-1',
      'Organization/tenant-2',
    ]);
  });
});
