import { createHash } from 'node:crypto';
import type { MedplumClient, WithId } from '@medplum/core';
import { getReferenceString } from '@medplum/core';
import type {
  AccessPolicy,
  Bot,
  ClientApplication,
  Project,
  ProjectMembership,
  Reference,
  Resource,
  Subscription,
} from '@medplum/fhirtypes';
import { BOT_AUDIENCE, EDGE_STATEMENT, EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { ProvisionDefinition } from './definition';

export interface ProvisionReport {
  created: string[];
  updated: string[];
  unchanged: string[];
  deployed: string[];
}

export interface ProvisionOptions {
  /** Bot bundles by bot key (the CommonJS text `dist/bots/<key>.js`). */
  bundles: Record<string, string>;
  /** The HMAC key of the gateway's edge statements, stored as the Project secret bots read. */
  edgeStatementKey?: string;
}

const SUPPORTED_INTERACTION = 'https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction';

/**
 * Applies a definition through MedplumClient as a project admin. Every resource carries the tag
 * `SYSTEMS.provisioning|<key>` and is found again by it, so a second run compares and writes nothing.
 */
export async function applyDefinition(
  medplum: MedplumClient,
  definition: ProvisionDefinition,
  options: ProvisionOptions,
): Promise<ProvisionReport> {
  const report: ProvisionReport = { created: [], updated: [], unchanged: [], deployed: [] };
  const keys = new Map<string, Reference>();
  const project = await currentProject(medplum);
  keys.set('project', plainReference(project));
  // Features are a super-admin setting on Medplum (read-only to project admins): check, never write.
  const missing = definition.project.features.filter((f) => !project.features?.includes(f));
  if (missing.length > 0) {
    throw new Error(
      `Project ${project.id} lacks features ${missing.join(', ')}: a Medplum super admin must enable them`,
    );
  }

  const upsert = async <T extends Resource>(key: string, desired: T, writeOnce = false): Promise<WithId<T>> => {
    const resource = resolveKeys(tagged(key, desired), keys);
    const existing = await medplum.searchOne(
      resource.resourceType,
      { _tag: `${SYSTEMS.provisioning}|${key}` },
      { cache: 'no-cache' },
    );
    let result: WithId<T>;
    if (!existing) {
      result = await medplum.createResource(resource);
      report.created.push(key);
    } else if (!containsAll(existing, resource)) {
      if (writeOnce) {
        throw new Error(`${key} is published and write-once: publish a new version under a new key instead`);
      }
      result = (await medplum.updateResource({
        ...existing,
        ...resource,
        id: existing.id,
        // Server-owned meta stays; the tags are the definition's (e.g. which bots patients may run).
        meta: { ...existing.meta, tag: resource.meta?.tag },
      })) as WithId<T>;
      report.updated.push(key);
    } else {
      result = existing as WithId<T>;
      report.unchanged.push(key);
    }
    keys.set(key, plainReference(result));
    return result;
  };

  for (const { key, policy } of definition.accessPolicies) {
    await upsert<AccessPolicy>(`policy-${key}`, { resourceType: 'AccessPolicy', ...policy });
  }
  for (const { key, resource, writeOnce } of definition.resources) {
    await upsert(key, resource, writeOnce);
  }

  const defaultPolicy = keys.get(`policy-${definition.project.defaultPatientAccessPolicy}`);
  const desiredProject: Project = {
    ...project,
    defaultPatientAccessPolicy: defaultPolicy as Reference<AccessPolicy> | undefined,
    // The key bots check the gateway's edge statements with (event.secrets); set only when given.
    ...(options.edgeStatementKey
      ? {
          secret: [
            ...(project.secret ?? []).filter((s) => s.name !== EDGE_STATEMENT.secretName),
            { name: EDGE_STATEMENT.secretName, valueString: options.edgeStatementKey },
          ],
        }
      : {}),
  };
  if (!containsAll(project, desiredProject)) {
    await medplum.updateResource(desiredProject);
    report.updated.push('project');
  } else {
    report.unchanged.push('project');
  }

  for (const bot of definition.bots) {
    const code = options.bundles[bot.key];
    if (!code) {
      throw new Error(`No bundle for bot ${bot.key}: run npm run build:bots`);
    }
    const sha256 = createHash('sha256').update(code).digest('hex');
    const saved = await upsert<Bot>(`bot-${bot.key}`, {
      resourceType: 'Bot',
      name: bot.key,
      description: bot.description,
      identifier: [{ system: SYSTEMS.bots, value: bot.key }],
      meta: bot.patient ? { tag: [{ system: BOT_AUDIENCE.system, code: BOT_AUDIENCE.patient }] } : undefined,
      runtimeVersion: 'vmcontext',
      ...(bot.cronString ? { cronString: bot.cronString } : {}),
      extension: [{ url: EXTENSIONS.botBundleSha256, valueString: sha256 }],
    });
    if (
      !saved.executableCode ||
      report.created.includes(`bot-${bot.key}`) ||
      report.updated.includes(`bot-${bot.key}`)
    ) {
      await medplum.post(medplum.fhirUrl('Bot', saved.id, '$deploy'), { code, filename: `${bot.key}.js` });
      report.deployed.push(bot.key);
    }
    await upsert<ProjectMembership>(`membership-bot-${bot.key}`, {
      resourceType: 'ProjectMembership',
      project: plainReference(project),
      user: plainReference(saved),
      profile: plainReference(saved),
      accessPolicy: keys.get(`policy-${bot.accessPolicy}`) as Reference<AccessPolicy> | undefined,
      ...(bot.admin ? { admin: true } : {}),
    });
  }

  for (const integration of definition.integrations) {
    const client = keys.get(integration.key) as Reference<ClientApplication>;
    await upsert<ProjectMembership>(`membership-${integration.key}`, {
      resourceType: 'ProjectMembership',
      project: plainReference(project),
      user: client,
      profile: client,
      accessPolicy: keys.get(`policy-${integration.accessPolicy}`) as Reference<AccessPolicy> | undefined,
    });
  }

  for (const subscription of definition.subscriptions) {
    const bot = keys.get(`bot-${subscription.bot}`);
    await upsert<Subscription>(`subscription-${subscription.key}`, {
      resourceType: 'Subscription',
      status: 'active',
      reason: subscription.reason,
      criteria: subscription.criteria,
      channel: { type: 'rest-hook', endpoint: getReferenceString(bot as Reference) },
      extension: [{ url: SUPPORTED_INTERACTION, valueCode: subscription.interaction }],
    });
  }
  return report;
}

async function currentProject(medplum: MedplumClient): Promise<WithId<Project>> {
  const me = (await medplum.get('auth/me', { cache: 'no-cache' })) as { project?: Reference<Project> | Project };
  const projectRef = me.project as Reference<Project> & Project;
  const id = projectRef.id ?? projectRef.reference?.split('/')[1];
  if (!id) {
    throw new Error('The provisioning client is not a member of a project');
  }
  return medplum.readResource('Project', id, { cache: 'no-cache' });
}

function tagged<T extends Resource>(key: string, resource: T): T {
  const tag = { system: SYSTEMS.provisioning, code: key };
  const tags = (resource.meta?.tag ?? []).filter((t) => t.system !== SYSTEMS.provisioning || t.code === key);
  return { ...resource, meta: { ...resource.meta, tag: tags.some((t) => t.code === key) ? tags : [...tags, tag] } };
}

/** Replaces every `{ reference: 'key:<key>' }` with the reference to the resource applied under that key. */
function resolveKeys<T>(value: T, keys: Map<string, Reference>): T {
  return JSON.parse(JSON.stringify(value), (name, v) => {
    if (name === 'reference' && typeof v === 'string' && v.startsWith('key:')) {
      const resolved = keys.get(v.slice(4));
      if (!resolved?.reference) {
        throw new Error(`Provisioning reference to unknown key ${v}`);
      }
      return resolved.reference;
    }
    return v;
  }) as T;
}

/** True when every field the definition sets already has that value (server-added fields are ignored). */
export function containsAll(existing: unknown, desired: unknown): boolean {
  if (desired === null || typeof desired !== 'object') {
    return existing === desired;
  }
  if (Array.isArray(desired)) {
    return (
      Array.isArray(existing) &&
      existing.length === desired.length &&
      desired.every((d, i) => containsAll(existing[i], d))
    );
  }
  if (existing === null || typeof existing !== 'object' || Array.isArray(existing)) {
    return false;
  }
  return Object.entries(desired).every(([k, v]) =>
    k === 'meta'
      ? containsAll((existing as Record<string, unknown>)[k], pickTags(v))
      : containsAll((existing as Record<string, unknown>)[k], v),
  );
}

function pickTags(meta: unknown): unknown {
  const tag = (meta as { tag?: unknown } | undefined)?.tag;
  return tag === undefined ? {} : { tag };
}

/** `{ reference }` only: a display would make a stored copy differ from the definition on every run. */
function plainReference<T extends Resource>(resource: WithId<T>): Reference<T> {
  return { reference: getReferenceString(resource) } as Reference<T>;
}
