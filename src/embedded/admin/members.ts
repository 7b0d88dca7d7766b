import type { WithId } from '@medplum/core';
import { forbidden, getReferenceString, OperationOutcomeError } from '@medplum/core';
import type { ProjectMembership } from '@medplum/fhirtypes';
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
