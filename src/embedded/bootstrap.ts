import { randomBytes } from 'node:crypto';
import type { WithId } from '@medplum/core';
import { createReference } from '@medplum/core';
import type { ClientApplication, Project, ProjectMembership, Resource } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { KeyedResource } from '../provision/definition';
import type { SqliteRepository } from './store/repo';

export interface BootstrapResult {
  project: WithId<Project>;
  /** Project-admin client: what `npm run provision` uses against any Medplum. */
  adminClient: WithId<ClientApplication>;
}

/**
 * What a Medplum operator does once by hand on a real server (create the project with its features,
 * which only a super admin may set, and an admin client application); everything after it goes
 * through provisioning over the Medplum API.
 * Idempotent: found again by name on a reused store.
 */
export async function bootstrapProject(
  systemRepo: SqliteRepository,
  name: string,
  features: NonNullable<Project['features']>,
  presets: readonly KeyedResource[] = [],
): Promise<BootstrapResult> {
  let project = await systemRepo.searchOne<Project>({
    resourceType: 'Project',
    filters: [{ code: 'name', operator: 'exact', value: name }],
  });
  if (!project) {
    const id = systemRepo.generateId();
    project = await systemRepo.createResource<Project>(
      { resourceType: 'Project', id, name, features, meta: { project: id } },
      { assignedId: true },
    );
  }
  const clientName = `${name} admin`;
  let adminClient = await systemRepo.searchOne<ClientApplication>({
    resourceType: 'ClientApplication',
    filters: [{ code: 'name', operator: 'exact', value: clientName }],
  });
  if (!adminClient) {
    adminClient = await systemRepo.createResource<ClientApplication>({
      resourceType: 'ClientApplication',
      name: clientName,
      secret: randomBytes(32).toString('hex'),
      meta: { project: project.id },
    });
    await systemRepo.createResource<ProjectMembership>({
      resourceType: 'ProjectMembership',
      meta: { project: project.id },
      project: createReference(project),
      user: createReference(adminClient),
      profile: createReference(adminClient),
      admin: true,
    });
  }
  await presetIds(systemRepo, project, presets);
  return { project, adminClient };
}

/**
 * Resources the definition wants under an id known in advance (`presetId`): made here, as only a super
 * admin may choose an id, with just their provisioning tag, which provisioning then finds them by and
 * completes. A resource already provisioned under its key (a store from before) keeps the id it has.
 */
async function presetIds(
  systemRepo: SqliteRepository,
  project: WithId<Project>,
  presets: readonly KeyedResource[],
): Promise<void> {
  for (const { key, resource, presetId } of presets) {
    if (!presetId) {
      continue;
    }
    const tag = { system: SYSTEMS.provisioning, code: key };
    const provisioned = await systemRepo.searchOne({
      resourceType: resource.resourceType,
      filters: [{ code: '_tag', operator: 'eq', value: `${tag.system}|${tag.code}` }],
    });
    if (!provisioned) {
      await systemRepo.createResource<Resource>(
        { resourceType: resource.resourceType, id: presetId, meta: { project: project.id, tag: [tag] } } as Resource,
        { assignedId: true },
      );
    }
  }
}
