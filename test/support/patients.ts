import { randomUUID } from 'node:crypto';
import type { WithId } from '@medplum/core';
import type { Patient, ProjectMembership, User } from '@medplum/fhirtypes';
import { SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import type { DemoActor, TestBackend } from './backend';

/**
 * A patient of their own for one test, homed in a demo tenant and state like the demo patients (same
 * policy, same tenant parameter), so a test that accepts, withdraws or moves them changes nobody
 * another test reads, and passes alone or in any order.
 */
export async function freshPatient(
  backend: TestBackend,
  options: { tenant: 'northwind' | 'southridge'; state: string },
): Promise<DemoActor> {
  const key = `fresh-${randomUUID()}`;
  const project = backend.project.id;
  const organization = await backend.admin.searchOne('Organization', {
    identifier: `${SYSTEMS.tenant}|${options.tenant}`,
  });
  const policy = await backend.admin.searchOne('AccessPolicy', { _tag: `${SYSTEMS.provisioning}|policy-patient` });
  if (!organization || !policy) {
    throw new Error(`the demo tenant ${options.tenant} or the patient policy is not provisioned`);
  }
  const org = { reference: `Organization/${organization.id}` };
  const user = await backend.systemRepo.createResource<User>({
    resourceType: 'User',
    meta: { project },
    firstName: 'Fresh',
    lastName: key,
    project: { reference: `Project/${project}` },
  });
  const patient = (await backend.systemRepo.createResource<Patient>({
    resourceType: 'Patient',
    meta: { project, accounts: [org] },
    name: [{ given: ['Fresh'], family: key }],
    address: [{ line: ['1 Test Street'], city: 'Test City', state: options.state, postalCode: '90001', country: 'US' }],
    managingOrganization: org,
  })) as WithId<Patient>;
  const membership = (await backend.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project },
    project: { reference: `Project/${project}` },
    user: { reference: `User/${user.id}` },
    profile: { reference: `Patient/${patient.id}` },
    access: [
      {
        policy: { reference: `AccessPolicy/${policy.id}` },
        parameter: [{ name: TENANT_PARAMETER, valueReference: org }],
      },
    ],
  })) as WithId<ProjectMembership>;
  return { key, tenant: options.tenant, patient, membership, ...(await backend.login(membership)) };
}
