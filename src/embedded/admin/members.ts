import type { WithId } from '@medplum/core';
import { badRequest, forbidden, getReferenceString, OperationOutcomeError, Operator } from '@medplum/core';
import type { ProjectMembership, Reference, User } from '@medplum/fhirtypes';
import type { SqliteRepository } from '../store/repo';
import type { ProjectAdmin } from './context';

/**
 * `GET /admin/projects/:projectId/members/:membershipId` (packages/server/src/admin/project.ts): the
 * membership, read as the admin; one of another project is 403.
 */
export async function readMember(admin: ProjectAdmin, membershipId: string): Promise<WithId<ProjectMembership>> {
  const membership = await admin.repo.readResource<ProjectMembership>('ProjectMembership', membershipId);
  if (membership.project?.reference !== getReferenceString(admin.project)) {
    throw new OperationOutcomeError(forbidden);
  }
  return membership;
}

/**
 * `POST /admin/projects/:projectId/members/:membershipId` (packages/server/src/admin/project.ts): the
 * body is the whole ProjectMembership, whose `resourceType` and `id` must match the path (403
 * otherwise); it is written as the admin, so the admin's policy keeps `user` and `project` as they were
 * (accesspolicy.ts applyProjectAdminAccessPolicy). Answers 200 with the stored membership.
 */
export async function updateMember(
  admin: ProjectAdmin,
  membershipId: string,
  body: Record<string, unknown>,
): Promise<WithId<ProjectMembership>> {
  await readMember(admin, membershipId);
  if (body.resourceType !== 'ProjectMembership' || body.id !== membershipId) {
    throw new OperationOutcomeError(forbidden);
  }
  return admin.repo.updateResource<ProjectMembership>(body as unknown as ProjectMembership);
}

/**
 * `DELETE /admin/projects/:projectId/members/:membershipId` (packages/server/src/admin/project.ts
 * deleteMember): the membership deleted (the owner's refused, 400); a User of this project alone (as an
 * invited clinician is) deleted with its only membership, so she can no longer sign in. Her profile and
 * everything she wrote stay.
 */
export async function deleteMember(
  admin: ProjectAdmin,
  systemRepo: SqliteRepository,
  membershipId: string,
): Promise<void> {
  const membership = await readMember(admin, membershipId);
  if (admin.project.owner?.reference && admin.project.owner.reference === membership.user?.reference) {
    throw new OperationOutcomeError(badRequest('Cannot delete the owner of the project'));
  }
  const user = membership.user?.reference
    ? await systemRepo.readReference<User>(membership.user as Reference<User>).catch(() => undefined)
    : undefined;
  const others = user
    ? await systemRepo.searchResources<ProjectMembership>({
        resourceType: 'ProjectMembership',
        filters: [{ code: 'user', operator: Operator.EQUALS, value: getReferenceString(user) }],
        count: 2,
      })
    : [];
  await systemRepo.deleteResource('ProjectMembership', membershipId);
  if (
    user &&
    user.project?.reference === getReferenceString(admin.project) &&
    others.every((m) => m.id === membershipId)
  ) {
    await systemRepo.deleteResource('User', user.id as string);
  }
}
