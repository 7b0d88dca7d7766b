import { randomBytes } from 'node:crypto';
import type { Filter, WithId } from '@medplum/core';
import {
  badRequest,
  conflict,
  createReference,
  getReferenceString,
  OperationOutcomeError,
  Operator,
} from '@medplum/core';
import type {
  Patient,
  Practitioner,
  Project,
  ProjectMembership,
  ProjectMembershipAccess,
  Reference,
  User,
} from '@medplum/fhirtypes';
import { hashPassword } from '../auth/routes';
import { accessPolicyOf } from './bot';
import type { AdminDeps, ProjectAdmin } from './context';
import { optionalString, requiredString } from './context';

type Profile = Patient | Practitioner;
const PROFILE_TYPES = ['Patient', 'Practitioner'];
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * `POST /admin/projects/:projectId/invite` (packages/server/src/admin/invite.ts `inviteUser`): takes
 * `{resourceType, firstName, lastName, email | externalId, password?, sendEmail?, upsert?, membership?:
 * {profile?, access?, accessPolicy?, admin?}}` (plus the legacy top-level accessPolicy/access/admin) and
 * answers 200 with the ProjectMembership. It creates the User (project-scoped for a Patient, an externalId
 * or `scope: 'project'`), the profile (`name: [{given: [firstName], family: lastName}]`, email as telecom) unless
 * `membership.profile` names one of this project, and the membership; a user already a member is 409
 * unless `upsert`. A Patient invited without a policy gets the Project's default patient policy.
 * RelatedPerson (which needs a patient) and sending email are not implemented: 400.
 */
export async function inviteUser(
  admin: ProjectAdmin,
  deps: AdminDeps,
  body: Record<string, unknown>,
): Promise<WithId<ProjectMembership>> {
  const resourceType = body.resourceType;
  if (typeof resourceType !== 'string' || !PROFILE_TYPES.includes(resourceType)) {
    throw new OperationOutcomeError(badRequest('Resource type is required', 'resourceType'));
  }
  const firstName = requiredString(body, 'firstName', 'First name is required');
  const lastName = requiredString(body, 'lastName', 'Last name is required');
  const email = optionalString(body, 'email')?.toLowerCase();
  const externalId = optionalString(body, 'externalId');
  if ((email === undefined || !EMAIL.test(email)) && !externalId) {
    throw new OperationOutcomeError(badRequest('Either email or externalId is required'));
  }
  const password = optionalString(body, 'password');
  if (password !== undefined && password.length < 8) {
    throw new OperationOutcomeError(badRequest('Password must be at least 8 characters', 'password'));
  }
  if (email && body.sendEmail !== false) {
    throw new OperationOutcomeError(badRequest('The embedded Medplum sends no email: pass sendEmail: false'));
  }
  const template = { ...((body.membership ?? {}) as Partial<ProjectMembership>) };
  const accessPolicy = await accessPolicyOf(admin, body.accessPolicy ?? template.accessPolicy);
  const access = accessEntries(body.access ?? template.access);
  for (const entry of access ?? []) {
    await accessPolicyOf(admin, entry.policy);
  }
  const adminFlag = (body.admin ?? template.admin) as boolean | undefined;

  const { systemRepo } = deps;
  const project = admin.project;
  // As Medplum's makeUserResource: a Patient, a user with an externalId, or one invited with
  // `scope: 'project'` is a User of this project only, found at sign-in only with its project.
  const projectScoped = resourceType === 'Patient' || externalId !== undefined || body.scope === 'project';
  const inThisProject = { code: 'project', operator: Operator.EQUALS, value: getReferenceString(project) };
  const serverWide = { code: 'project', operator: Operator.MISSING, value: 'true' };
  if (email && body.forceNewMembership !== true) {
    await refuseOtherScopeMember(systemRepo, project, email, projectScoped ? serverWide : inThisProject);
  }
  // The existing User of this email at the same scope, as Medplum's conditional create finds it.
  let user = email
    ? await systemRepo.searchOne<User>({
        resourceType: 'User',
        filters: [
          { code: 'email', operator: Operator.EXACT, value: email },
          projectScoped ? inThisProject : serverWide,
        ],
      })
    : undefined;
  if (!user) {
    user = await systemRepo.createResource<User>({
      resourceType: 'User',
      meta: projectScoped ? { project: project.id } : undefined,
      firstName,
      lastName,
      email,
      passwordHash: hashPassword(password ?? randomBytes(16).toString('hex')),
      project: projectScoped ? createReference(project) : undefined,
    });
  }

  let profile: WithId<Profile>;
  if (template.profile) {
    profile = await systemRepo.readReference<Profile>(template.profile as Reference<Profile>);
    if (profile.meta?.project !== project.id) {
      throw new OperationOutcomeError(badRequest('Profile does not belong to project'));
    }
    if (profile.resourceType !== resourceType) {
      throw new OperationOutcomeError(badRequest('Profile resourceType does not match request'));
    }
  } else {
    profile = await systemRepo.createResource<Profile>({
      resourceType: resourceType as Profile['resourceType'],
      meta: { project: project.id },
      name: [{ given: [firstName], family: lastName }],
      telecom: email ? [{ system: 'email', use: 'work', value: email }] : undefined,
    } as Profile);
  }

  const fields: Partial<ProjectMembership> = {
    externalId,
    accessPolicy:
      accessPolicy ?? (resourceType === 'Patient' && !access?.length ? project.defaultPatientAccessPolicy : undefined),
    access,
    admin: adminFlag,
  };
  const existing = await systemRepo.searchOne<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [
      { code: 'user', operator: 'eq', value: getReferenceString(user) },
      { code: 'project', operator: 'eq', value: getReferenceString(project) },
    ],
  });
  if (existing) {
    if (body.upsert !== true) {
      throw new OperationOutcomeError(conflict('User is already a member of this project'));
    }
    if (existing.profile?.reference !== getReferenceString(profile)) {
      throw new OperationOutcomeError(conflict('User is already a member of this project with a different profile'));
    }
  }
  return systemRepo[existing ? 'updateResource' : 'createResource']<ProjectMembership>(
    withoutUndefined({
      ...existing,
      ...fields,
      resourceType: 'ProjectMembership',
      meta: existing?.meta ?? { project: project.id },
      project: createReference(project),
      user: createReference(user),
      profile: createReference(profile),
    }),
  );
}

/**
 * Medplum's invite refuses a member of this project with this email at the other scope (a server-wide
 * user when a project-scoped one is invited, or the reverse) unless `forceNewMembership`: one person,
 * two Users, would be confusing (packages/server/src/admin/invite.ts inviteUser).
 */
async function refuseOtherScopeMember(
  systemRepo: AdminDeps['systemRepo'],
  project: WithId<Project>,
  email: string,
  otherScope: Filter,
): Promise<void> {
  const users = await systemRepo.searchResources<User>({
    resourceType: 'User',
    filters: [{ code: 'email', operator: Operator.EXACT, value: email }, otherScope],
  });
  for (const user of users) {
    const member = await systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [
        { code: 'user', operator: Operator.EQUALS, value: getReferenceString(user) },
        { code: 'project', operator: Operator.EQUALS, value: getReferenceString(project) },
      ],
    });
    if (member) {
      throw new OperationOutcomeError(conflict('User is already a member of this project'));
    }
  }
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * `access` as ProjectMembership.access: an array of `{policy, parameter?}`, each parameter a name with a
 * string or reference value. Anything else is a 400 naming the field (it used to fail as a 500).
 */
function accessEntries(value: unknown): ProjectMembershipAccess[] | undefined {
  if (value === undefined) {
    return undefined;
  }
  const invalid = () =>
    new OperationOutcomeError(badRequest('access must be an array of {policy, parameter}', 'access'));
  if (!Array.isArray(value)) {
    throw invalid();
  }
  for (const entry of value as unknown[]) {
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      throw invalid();
    }
    const parameter = (entry as { parameter?: unknown }).parameter;
    if (parameter === undefined) {
      continue;
    }
    const valid =
      Array.isArray(parameter) &&
      parameter.every((p: unknown) => {
        const { name, valueString, valueReference } = (p ?? {}) as Record<string, unknown>;
        const reference = (valueReference as { reference?: unknown } | undefined)?.reference;
        return (
          typeof name === 'string' &&
          /^[A-Za-z][A-Za-z0-9_-]{0,63}$/.test(name) &&
          (typeof valueString === 'string' || typeof reference === 'string') &&
          !(valueString !== undefined && valueReference !== undefined)
        );
      });
    if (!valid) {
      throw invalid();
    }
  }
  return value as ProjectMembershipAccess[];
}
