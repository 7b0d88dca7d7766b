import type { WithId } from '@medplum/core';
import {
  badRequest,
  getReferenceString,
  OperationOutcomeError,
  projectAdminResourceTypes,
  resolveId,
} from '@medplum/core';
import type {
  AccessPolicy,
  AccessPolicyResource,
  Project,
  ProjectMembership,
  ProjectMembershipAccess,
  Reference,
} from '@medplum/fhirtypes';
import type { SqliteRepository } from '../store/repo';

/**
 * The effective AccessPolicy of a membership, built the way Medplum's server builds it
 * (packages/server/src/fhir/accesspolicy.ts): `accessPolicy` plus every `access[]` entry, each with
 * its parameters substituted (`%patient` and `%profile` default to the profile; `%name.id` gives the
 * bare id), entries OR'ed, the last `compartment` kept, readonly entries narrowed to reads, no policy
 * at all meaning everything (Medplum's legacy default), and project-admin types only for admins.
 */
export async function buildAccessPolicy(
  systemRepo: Pick<SqliteRepository, 'readReference'>,
  project: WithId<Project>,
  membership: ProjectMembership,
): Promise<AccessPolicy> {
  const access: ProjectMembershipAccess[] = [];
  if (membership.accessPolicy) {
    access.push({ policy: membership.accessPolicy });
  }
  access.push(...(membership.access ?? []));

  let compartment: Reference | undefined;
  const resource: AccessPolicyResource[] = [];
  for (const entry of access) {
    const substituted = await substitute(systemRepo, entry, membership.profile);
    if (substituted.compartment) {
      compartment = substituted.compartment;
    }
    for (const rule of substituted.resource ?? []) {
      if (!rule.interaction && rule.readonly) {
        rule.interaction = ['search', 'read', 'history', 'vread'];
      }
      resource.push(rule);
    }
  }
  if (access.length === 0) {
    resource.push({ resourceType: '*' });
  }
  for (const resourceType of ['SearchParameter', 'StructureDefinition']) {
    if (!resource.some((r) => r.resourceType === resourceType)) {
      resource.push({ resourceType, readonly: true, interaction: ['search', 'read', 'history', 'vread'] });
    }
  }
  const withoutAdminTypes = resource.filter((r) => !projectAdminResourceTypes.includes(r.resourceType));
  const policy: AccessPolicy = { resourceType: 'AccessPolicy', compartment, resource: withoutAdminTypes };
  if (membership.admin) {
    policy.resource?.push(...projectAdminRules(project));
  }
  return policy;
}

async function substitute(
  systemRepo: Pick<SqliteRepository, 'readReference'>,
  access: ProjectMembershipAccess,
  profile: Reference,
): Promise<AccessPolicy> {
  let original: AccessPolicy;
  try {
    original = await systemRepo.readReference<AccessPolicy>(access.policy);
  } catch {
    // Same generic message as Medplum: never describe the policy configuration to the caller.
    throw new OperationOutcomeError(badRequest('Cannot authenticate: Invalid access policy configuration.'));
  }
  const params = [...(access.parameter ?? []), { name: 'profile', valueReference: profile }];
  if (!params.some((p) => p.name === 'patient')) {
    params.push({ name: 'patient', valueReference: profile });
  }
  let json = JSON.stringify(original);
  for (const param of params) {
    if (param.valueString) {
      json = json.replaceAll(`%${param.name}`, param.valueString);
    } else if (param.valueReference) {
      json = json.replaceAll(`%${param.name}.id`, resolveId(param.valueReference) ?? '');
      json = json.replaceAll(`%${param.name}`, getReferenceString(param.valueReference) ?? '');
    }
  }
  return JSON.parse(json) as AccessPolicy;
}

/** What Medplum grants a project admin on top of their policy (its applyProjectAdminAccessPolicy). */
function projectAdminRules(project: WithId<Project>): AccessPolicyResource[] {
  const hidden = ['superAdmin', 'systemSecret', 'strictMode'];
  const readonlyFields = ['features', 'link', 'systemSetting'];
  return [
    {
      resourceType: 'Project',
      readonlyFields,
      hiddenFields: hidden,
      interaction: ['read', 'vread', 'history', 'search'],
    },
    {
      resourceType: 'Project',
      criteria: `Project?_id=${project.id}`,
      readonlyFields,
      hiddenFields: hidden,
      interaction: ['read', 'vread', 'update', 'history', 'create', 'search'],
    },
    // Who a membership belongs to is not the admin's to write over FHIR: memberships are made through
    // the admin API (src/embedded/admin/, Medplum's packages/server/src/admin/), as on Medplum.
    {
      resourceType: 'ProjectMembership',
      criteria: `ProjectMembership?_project=${project.id}`,
      readonlyFields: ['project', 'user'],
    },
    {
      resourceType: 'User',
      criteria: `User?_project=${project.id}`,
      hiddenFields: ['passwordHash', 'mfaSecret'],
      readonlyFields: ['email', 'emailVerified', 'mfaEnrolled', 'project'],
    },
    { resourceType: 'AccessPolicy', criteria: `AccessPolicy?_project=${project.id}` },
  ];
}
