import { randomBytes } from 'node:crypto';
import { createReference } from '@medplum/core';
import type { ClientApplication, ProjectMembership } from '@medplum/fhirtypes';
import { accessPolicyOf } from './bot';
import type { AdminDeps, ProjectAdmin } from './context';
import { optionalString, requiredString } from './context';

/**
 * `POST /admin/projects/:projectId/client` (packages/server/src/admin/client.ts `createClient`): takes
 * `{name, description?, redirectUri?, accessPolicy?}`, creates the ClientApplication with a generated
 * secret as the admin and its ProjectMembership (user = profile = the client) as the system; 201 with
 * the ClientApplication (secret included, as Medplum answers it).
 */
export async function createClient(
  admin: ProjectAdmin,
  deps: AdminDeps,
  body: Record<string, unknown>,
): Promise<ClientApplication> {
  const name = requiredString(body, 'name', 'Client name is required');
  const accessPolicy = await accessPolicyOf(admin, body.accessPolicy);
  const client = await admin.repo.createResource<ClientApplication>({
    resourceType: 'ClientApplication',
    meta: { project: admin.project.id },
    name,
    secret: randomBytes(32).toString('hex'),
    description: optionalString(body, 'description'),
    redirectUri: optionalString(body, 'redirectUri'),
  });
  await deps.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: admin.project.id },
    project: createReference(admin.project),
    user: createReference(client),
    profile: createReference(client),
    accessPolicy,
  });
  return client;
}
