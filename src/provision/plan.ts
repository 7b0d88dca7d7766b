import type { MedplumClient } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';

/**
 * Provisioning's plan (`--dry-run`, and the rehearsal every run makes before it writes): the same
 * `applyDefinition`, over a client that reads the real Medplum and writes nothing. Each write is recorded
 * and answered as Medplum would (a created resource gets a placeholder id `planned-<n>`, which later reads
 * and searches find), so what follows a write decides as it would after it: the report's created, updated
 * and unchanged are the plan.
 */
export interface PlannedWrite {
  method: string;
  /** `Type/id`, `Type` (a create), or the admin API path. */
  target: string;
}

const PLACEHOLDER = 'planned-';

/** MedplumClient's other ways to write: provisioning uses none of them; a plan refuses them all. */
const UNPLANNED_WRITES = new Set([
  'upsertResource',
  'createBinary',
  'createAttachment',
  'createPdf',
  'createComment',
  'createMedia',
  'patch',
  'pushToAgent',
  'sendEmail',
  'uploadMedia',
  'invite',
  'graphql',
]);

export function planningClient(medplum: MedplumClient): { client: MedplumClient; writes: PlannedWrite[] } {
  const writes: PlannedWrite[] = [];
  const made = new Map<string, Resource>();
  let next = 0;
  const make = <T extends Resource>(resource: T): T & { id: string } => {
    const id = `${PLACEHOLDER}${++next}`;
    const created = { ...resource, id, meta: { ...resource.meta, versionId: '1' } } as T & { id: string };
    made.set(`${resource.resourceType}/${id}`, created);
    return created;
  };
  const planned = (value: unknown): boolean => JSON.stringify(value ?? '').includes(PLACEHOLDER);
  /** A membership of a person or client made in this plan (the admin API makes one with it). */
  const membershipOf = (profile: string): Resource =>
    ({
      resourceType: 'ProjectMembership',
      id: `${PLACEHOLDER}membership-${profile}`,
      profile: { reference: profile },
    }) as Resource;

  const overrides: Partial<Record<keyof MedplumClient, unknown>> = {
    createResource: async (resource: Resource) => {
      writes.push({ method: 'create', target: resource.resourceType });
      return make(resource);
    },
    createResourceIfNoneExist: async (resource: Resource) => {
      writes.push({ method: 'create', target: resource.resourceType });
      return make(resource);
    },
    updateResource: async (resource: Resource) => {
      writes.push({ method: 'update', target: `${resource.resourceType}/${resource.id}` });
      if (resource.id?.startsWith(PLACEHOLDER)) {
        made.set(`${resource.resourceType}/${resource.id}`, resource);
      }
      return resource;
    },
    patchResource: async (type: string, id: string) => {
      writes.push({ method: 'patch', target: `${type}/${id}` });
      return made.get(`${type}/${id}`) ?? medplum.readResource(type as Resource['resourceType'], id);
    },
    deleteResource: async (type: string, id: string) => {
      writes.push({ method: 'delete', target: `${type}/${id}` });
      return undefined;
    },
    delete: async (url: string | URL) => {
      writes.push({ method: 'delete', target: String(url) });
      return undefined;
    },
    put: async (url: string | URL) => {
      writes.push({ method: 'put', target: String(url) });
      return undefined;
    },
    executeBot: async (id: unknown) => {
      writes.push({ method: 'execute', target: `Bot ${JSON.stringify(id)}` });
      return undefined;
    },
    executeBatch: async () => {
      writes.push({ method: 'batch', target: 'Bundle' });
      return { resourceType: 'Bundle', type: 'batch-response', entry: [] };
    },
    post: async (url: string | URL, body: Record<string, unknown>) => {
      const path = String(url);
      writes.push({ method: 'post', target: path });
      // Medplum's admin API: a person invited (profile and membership), a client or a bot created.
      if (path.endsWith('/invite')) {
        const profile = make({ resourceType: body.resourceType as 'Practitioner' } as Resource);
        return membershipOf(`${profile.resourceType}/${profile.id}`);
      }
      if (path.endsWith('/client')) {
        return make({ resourceType: 'ClientApplication', name: body.name } as Resource);
      }
      if (path.endsWith('/bot')) {
        return make({ resourceType: 'Bot', name: body.name } as Resource);
      }
      return {};
    },
    readResource: async (type: string, id: string, options?: unknown) =>
      made.get(`${type}/${id}`) ??
      medplum.readResource(type as Resource['resourceType'], id, options as Parameters<MedplumClient['get']>[1]),
    readReference: async (reference: { reference?: string }, options?: unknown) =>
      made.get(reference.reference ?? '') ??
      medplum.readReference(reference as never, options as Parameters<MedplumClient['get']>[1]),
    searchOne: async (type: string, query: Record<string, string>, options?: unknown) => {
      if (planned(query)) {
        return type === 'ProjectMembership' && query.profile ? membershipOf(query.profile) : undefined;
      }
      return medplum.searchOne(type as Resource['resourceType'], query, options as Parameters<MedplumClient['get']>[1]);
    },
    searchResources: async (type: string, query: Record<string, string>, options?: unknown) =>
      planned(query)
        ? []
        : medplum.searchResources(
            type as Resource['resourceType'],
            query,
            options as Parameters<MedplumClient['get']>[1],
          ),
  };
  const client = new Proxy(medplum, {
    get(target, property, receiver) {
      if (property in overrides) {
        return overrides[property as keyof MedplumClient];
      }
      if (typeof property === 'string' && UNPLANNED_WRITES.has(property)) {
        return () => {
          throw new Error(`The plan cannot rehearse ${property}: nothing was written`);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { client, writes };
}

/** Whether an id is one a plan made up (nothing of it exists in Medplum). */
export const isPlanned = (id: string | undefined): boolean => Boolean(id?.startsWith(PLACEHOLDER));
