import type { WithId } from '@medplum/core';
import type {
  AccessPolicy,
  Bundle,
  Observation,
  OperationOutcome,
  Patient,
  Practitioner,
  ProjectMembership,
  ProjectMembershipAccess,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUES_PARAMETER, SYSTEMS } from '../../contracts/systems';
import { type DirectResponse, direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * A writeConstraint naming a `%variable` no parameter substituted (`%queues` for a membership without a
 * `queues` parameter). Medplum substitutes parameters as text (packages/server/src/fhir/accesspolicy.ts),
 * so the name stays a FHIRPath variable; evaluating it throws "Undefined variable" (@medplum/core
 * fhirpath/atoms.ts SymbolAtom, wrapped as `FhirPathError on "<expression>"` by FhirPathAtom), out of
 * isResourceWriteable (packages/server/src/fhir/repo.ts), and the FHIR router answers the thrown error as
 * 400 `invalid` (normalizeOperationOutcome). Boolean operators evaluate both sides, so the write fails
 * even when an earlier `or` operand is already true. Seen on a real Medplum 5.0.10 (../shared/real-medplum/):
 * create, update, patch and transaction 400 with that text, a batch entry 400, nothing written.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const EXPRESSION = '%before.exists().not() or %after.code.text in (%queues)';
const UNDEFINED = `FhirPathError on "${EXPRESSION}": Error: Undefined variable %queues`;

async function memberWith(access: ProjectMembershipAccess[]): Promise<string> {
  const practitioner = await backend.systemRepo.createResource<Practitioner>({
    resourceType: 'Practitioner',
    meta: { project: backend.project.id },
    name: [{ family: 'Unparameterised' }],
  });
  const membership = await backend.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: backend.project.id },
    project: { reference: `Project/${backend.project.id}` },
    user: { reference: `User/unparameterised-${practitioner.id}` },
    profile: { reference: `Practitioner/${practitioner.id}` },
    access,
  });
  return (await backend.login(membership)).token;
}

function expectUndefinedVariable(answer: Pick<DirectResponse, 'status' | 'body'>, text = UNDEFINED): void {
  expect(answer.status).toBe(400);
  expect((answer.body as OperationOutcome).issue?.[0]).toMatchObject({
    severity: 'error',
    code: 'invalid',
    details: { text },
  });
}

const MARK = 'urn:test:write-constraint-variables';
const observation = (text: string): Observation => ({
  resourceType: 'Observation',
  identifier: [{ system: MARK, value: text }],
  status: 'final',
  code: { text },
});

async function observationsNamed(text: string): Promise<number> {
  return (
    await backend.systemRepo.searchResources<Observation>({
      resourceType: 'Observation',
      filters: [{ code: 'identifier', operator: 'eq', value: `${MARK}|${text}` }],
    })
  ).length;
}

describe('a writeConstraint with an undefined %variable (packages/server/src/fhir/repo.ts isResourceWriteable)', () => {
  it('fails every write 400 "Undefined variable", never lets it through as if the variable were empty', async () => {
    const policy = await backend.systemRepo.createResource<AccessPolicy>({
      resourceType: 'AccessPolicy',
      meta: { project: backend.project.id },
      name: 'Constrained by a parameter it was not given',
      resource: [
        { resourceType: 'Patient' },
        { resourceType: 'Observation', writeConstraint: [{ language: 'text/fhirpath', expression: EXPRESSION }] },
      ],
    });
    const token = await memberWith([{ policy: { reference: `AccessPolicy/${policy.id}` } }]);
    const stored = await backend.systemRepo.createResource<Observation>({
      ...observation('written by the system'),
      meta: { project: backend.project.id },
    });

    // Create: `%before.exists().not()` is true, and the write fails all the same.
    expectUndefinedVariable(
      await direct(backend, token, 'POST', fhirPath('Observation'), { body: observation('create') }),
    );
    expectUndefinedVariable(
      await direct(backend, token, 'PUT', fhirPath(`Observation/${stored.id}`), {
        body: { ...stored, status: 'amended' },
      }),
    );
    expectUndefinedVariable(
      await direct(backend, token, 'PATCH', fhirPath(`Observation/${stored.id}`), {
        body: [{ op: 'replace', path: '/status', value: 'amended' }],
        headers: { 'content-type': 'application/json-patch+json' },
      }),
    );
    // A transaction fails whole: its Patient is not written either.
    const transaction = await direct(backend, token, 'POST', fhirPath(''), {
      body: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            request: { method: 'POST', url: 'Patient' },
            resource: { resourceType: 'Patient', name: [{ family: 'InTransaction' }] },
          },
          { request: { method: 'POST', url: 'Observation' }, resource: observation('in a transaction') },
        ],
      } satisfies Bundle,
    });
    expectUndefinedVariable(transaction);
    const patients = await backend.systemRepo.searchResources<Patient>({
      resourceType: 'Patient',
      filters: [{ code: 'name', operator: 'eq', value: 'InTransaction' }],
    });
    expect(patients).toHaveLength(0);
    // A batch answers each entry: this one 400 with the same outcome.
    const batch = await direct(backend, token, 'POST', fhirPath(''), {
      body: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [{ request: { method: 'POST', url: 'Observation' }, resource: observation('in a batch') }],
      } satisfies Bundle,
    });
    expect(batch.status).toBe(200);
    const [entry] = (batch.body as Bundle).entry ?? [];
    expectUndefinedVariable({ status: Number(entry?.response?.status), body: entry?.response?.outcome });

    expect(await observationsNamed('written by the system')).toBe(1);
    for (const text of ['create', 'in a transaction', 'in a batch']) {
      expect(await observationsNamed(text), text).toBe(0);
    }
    expect((await backend.systemRepo.readResource<Observation>('Observation', stored.id)).status).toBe('final');
    // Stricter than Medplum, which answers an unchanged update with the stored version before it evaluates
    // any constraint (updateResourceImpl: isNotModified, then isResourceWriteable): here it fails too.
    expectUndefinedVariable(
      await direct(backend, token, 'PUT', fhirPath(`Observation/${stored.id}`), { body: stored }),
    );
  });

  it('the provisioned clinician policy, for a member without a `queues` parameter: her Task writes fail 400, with it they pass', async () => {
    const clinicianPolicy = (await backend.admin.searchOne('AccessPolicy', {
      _tag: `${SYSTEMS.provisioning}|policy-clinician`,
    })) as WithId<AccessPolicy>;
    const naming = (clinicianPolicy.resource ?? []).filter((entry) =>
      (entry.writeConstraint ?? []).some((c) => c.expression?.includes(`%${QUEUES_PARAMETER}`)),
    );
    expect(naming.map((entry) => entry.resourceType)).toContain('Task');
    // The demo clinician's own access, less the queues she works.
    const { membership } = backend.clinicians.northwind;
    const withoutQueues = (membership.access ?? []).map((entry) => ({
      ...entry,
      parameter: entry.parameter?.filter((p) => p.name !== QUEUES_PARAMETER),
    }));
    expect(withoutQueues.some((entry) => entry.policy?.reference === `AccessPolicy/${clinicianPolicy.id}`)).toBe(true);
    const alice = backend.patients.alice.patient;
    const task: Task = {
      resourceType: 'Task',
      status: 'ready',
      intent: 'order',
      description: 'Call her back',
      for: { reference: `Patient/${alice.id}` },
    };

    const without = await direct(backend, await memberWith(withoutQueues), 'POST', fhirPath('Task'), { body: task });
    expect(without.status, without.text).toBe(400);
    expect((without.body as OperationOutcome).issue?.[0]).toMatchObject({ code: 'invalid' });
    expect((without.body as OperationOutcome).issue?.[0]?.details?.text).toMatch(/Undefined variable %queues$/);

    const withQueues = withoutQueues.map((entry) =>
      entry.policy?.reference === `AccessPolicy/${clinicianPolicy.id}`
        ? { ...entry, parameter: [...(entry.parameter ?? []), { name: QUEUES_PARAMETER, valueString: '{}' }] }
        : entry,
    );
    const allowed = await direct(backend, await memberWith(withQueues), 'POST', fhirPath('Task'), { body: task });
    expect(allowed.status, allowed.text).toBe(201);
  });
});
