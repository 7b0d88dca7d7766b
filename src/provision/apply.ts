import { createHash } from 'node:crypto';
import type { MedplumClient, WithId } from '@medplum/core';
import { getReferenceString, OperationOutcomeError } from '@medplum/core';
import type {
  AccessPolicy,
  Bot,
  ClientApplication,
  Patient,
  Practitioner,
  Project,
  ProjectMembership,
  Reference,
  Resource,
  Subscription,
} from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { binaryIdOf } from '../../contracts/attachments';
import {
  BOT_AUDIENCE,
  EDGE_STATEMENT,
  EXTENSIONS,
  QUEUE_STAFF_PARAMETER,
  QUEUES_PARAMETER,
  queueStaffValue,
  queuesValue,
  SIGNING_KEYS,
  STORAGE_BASE_SECRET,
  SYSTEMS,
} from '../../contracts/systems';
import { allowedWebhookEndpoint, webhookSecretName, webhookSecrets } from '../../contracts/webhook-rules';
import { retryAfterSeconds } from '../shared/rate-limit';
import { webhookSecretEnv, webhookSubscriptions, webhookTenants } from './bots/webhooks';
import type { KeyedResource, ProvisionDefinition, ResourceFields } from './definition';
import { migrateQueueWork, migrateReadings, migrateVisitNotes } from './migrations';
import { isPlanned } from './plan';
import { PROVISIONING_CLIENT_TAG } from './policies/common';

export interface ProvisionReport {
  created: string[];
  updated: string[];
  unchanged: string[];
  deployed: string[];
  /** What each provisioning key is in this Medplum (`Type/id`): the ids Medplum picked. */
  references: Record<string, string>;
}

export interface ProvisionOptions {
  /** Bot bundles by bot key (the CommonJS text `dist/bots/<key>.js`). */
  bundles: Record<string, string>;
  /** The HMAC key of the gateway's edge statements, stored as the Project secret bots read. */
  edgeStatementKey?: string;
  /**
   * Medplum's `storageBaseUrl` when it is not the default `<baseUrl>storage/` (a hosted Medplum): stored as
   * the Project secret the bots read presigned attachment URLs with.
   */
  storageBaseUrl?: string;
  /** Run the bots marked `runAfterProvisioning` once at the end (default true; tests that need none skip it). */
  runBots?: boolean;
  /**
   * Signing secrets of the tenants that take webhooks (`whsec_…`), by tenant key: stored as the Project
   * secrets the webhooks bot signs with. A tenant with an endpoint needs one, given here or stored before.
   */
  webhookSecrets?: Record<string, string>;
}

const SUPPORTED_INTERACTION = 'https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction';

/**
 * `meta.accounts` is honoured only in Medplum's extended mode, by an admin (packages/server/src/fhir/repo.ts
 * reads it from this header): without it a tenant stamp is silently dropped.
 */
const EXTENDED = { headers: { 'X-Medplum': 'extended' } };

/**
 * A person who signs in (demo patient, demo clinician): a profile resource (Patient or Practitioner,
 * with its `name`) plus how they join the project. Medplum lets a project admin create the User and
 * the membership only through `POST /admin/projects/:projectId/invite`; the profile's own fields are
 * then written through FHIR like any resource.
 */
export interface MemberResource extends KeyedResource {
  resource: Patient | Practitioner;
  member: {
    externalId: string;
    /** Signs in with this email and password through Medplum's login (demo people: printed, never secret). */
    email?: string;
    password?: string;
    membership: Pick<ProjectMembership, 'access' | 'accessPolicy' | 'admin'>;
    /**
     * A clinician's queues, by provisioning key: carried by every access entry as the `queues` parameter
     * (contracts/systems.ts QUEUES_PARAMETER), set once every key is known (a queue names its members).
     */
    queues?: string[];
  };
}

function isMember(entry: KeyedResource): entry is MemberResource {
  return 'member' in entry;
}

/**
 * Applies a definition through MedplumClient as a project admin. Every resource carries the tag
 * `SYSTEMS.provisioning|<key>` and is found again by it, so a second run compares and writes nothing.
 */
export async function applyDefinition(
  medplum: MedplumClient,
  definition: ProvisionDefinition,
  options: ProvisionOptions,
): Promise<ProvisionReport> {
  const report: ProvisionReport = { created: [], updated: [], unchanged: [], deployed: [], references: {} };
  await requireTestedMedplum(medplum);
  const keys = new Map<string, Reference>();
  const project = await currentProject(medplum);
  keys.set('project', plainReference(project));
  // Features are a super-admin setting on Medplum (read-only to project admins): check, never write.
  const missing = definition.project.features.filter((f) => !project.features?.includes(f));
  if (missing.length > 0) {
    throw new Error(
      `Project ${project.id} lacks the features ${missing.join(', ')}: a Medplum super admin must enable them ` +
        `(\`npm run bootstrap\` as its super admin, or ask for them: docs/deploy.md, step 1). ` +
        'Without cron the scheduled bots (reconcile, materialize-slots) would never run.',
    );
  }

  await markProvisioningClient(medplum, report);

  // Medplum's project-admin API (packages/server/src/admin/project.ts), beside the FHIR base.
  const adminApi = (path: string) => `admin/projects/${project.id}/${path}`;

  /**
   * Finds the resource by its provisioning tag and makes it as desired. `create` is how a missing one
   * comes to exist: FHIR create by default, or one of Medplum's admin endpoints (bot, client, invite),
   * after which the created resource is brought to the definition through FHIR (still a "created").
   */
  const upsert = async <T extends Resource>(
    key: string,
    desired: T,
    options: {
      writeOnce?: boolean;
      seed?: ResourceFields;
      absent?: string[];
      create?: (resource: T) => Promise<WithId<T>>;
    } = {},
  ): Promise<WithId<T>> => {
    const resource = resolveKeys(tagged(key, desired), keys);
    const seed: ResourceFields = options.seed ? resolveKeys(options.seed, keys) : {};
    const write = resource.meta?.accounts ? EXTENDED : undefined;
    let existing: Resource | undefined =
      (await medplum.searchOne(
        resource.resourceType,
        { _tag: `${SYSTEMS.provisioning}|${key}` },
        { cache: 'no-cache' },
      )) ?? (await byStableIdentifier(medplum, resource));
    let result: WithId<T>;
    let created = false;
    if (!existing && !options.create) {
      result = await medplum.createResource({ ...seed, ...resource } as T, write);
      report.created.push(key);
      keys.set(key, plainReference(result));
      return result;
    }
    if (!existing && options.create) {
      existing = await options.create(resource);
      created = true;
    }
    if (!existing) {
      throw new Error(`${key} was not created`);
    }
    const present = (options.absent ?? []).filter((field) => field in existing);
    if (!containsAll(existing, created ? { ...seed, ...resource } : resource) || present.length > 0) {
      if (options.writeOnce && !created) {
        throw new Error(`${key} is published and write-once: publish a new version under a new key instead`);
      }
      result = (await medplum.updateResource(
        {
          ...(Object.fromEntries(Object.entries(existing).filter(([field]) => !present.includes(field))) as T),
          // The seed only into what was created just now: afterwards those fields are their owner's.
          ...(created ? seed : {}),
          ...resource,
          id: existing.id,
          // Server-owned meta stays; the tags (e.g. which bots patients may run) and the tenant
          // accounts are the definition's.
          meta: {
            ...existing.meta,
            tag: resource.meta?.tag,
            ...(resource.meta?.accounts ? { accounts: resource.meta.accounts } : {}),
          },
        },
        write,
      )) as WithId<T>;
      report[created ? 'created' : 'updated'].push(key);
    } else {
      result = existing as WithId<T>;
      report.unchanged.push(key);
    }
    keys.set(key, plainReference(result));
    return result;
  };

  /** A superseded published version, where it exists: its status `retired`, nothing else changed. */
  const retire = async (key: string, resourceType: Resource['resourceType']): Promise<void> => {
    const existing = (await medplum.searchOne(
      resourceType,
      { _tag: `${SYSTEMS.provisioning}|${key}` },
      { cache: 'no-cache' },
    )) as (Resource & { status?: string }) | undefined;
    if (!existing) {
      return;
    }
    if (existing.status === 'retired') {
      report.unchanged.push(key);
      return;
    }
    const write = existing.meta?.accounts ? EXTENDED : undefined;
    await medplum.updateResource({ ...existing, status: 'retired' } as Resource, write);
    report.updated.push(key);
  };

  /**
   * The membership of a profile (bot, client, person), found by profile and changed only through
   * `POST /admin/projects/:projectId/members/:membershipId` (packages/server/src/admin/project.ts).
   */
  const membership = async (
    key: string,
    profile: Reference,
    desired: Pick<ProjectMembership, 'access' | 'accessPolicy' | 'admin'>,
    justCreated: boolean,
  ): Promise<void> => {
    const wanted = resolveKeys(desired, keys);
    const existing = await medplum.searchOne(
      'ProjectMembership',
      { profile: profile.reference as string },
      { cache: 'no-cache' },
    );
    if (!existing) {
      throw new Error(`${getReferenceString(profile)} has no membership: create it through the admin API`);
    }
    if (containsAll(existing, wanted)) {
      report[justCreated ? 'created' : 'unchanged'].push(key);
      return;
    }
    await medplum.post(adminApi(`members/${existing.id}`), { ...existing, ...wanted });
    report[justCreated ? 'created' : 'updated'].push(key);
  };

  /** A person: invited (User + profile + membership in one call), then the profile written through FHIR. */
  const member = async (entry: MemberResource): Promise<void> => {
    const name = ((entry.seed as Pick<Patient, 'name'> | undefined)?.name ?? entry.resource.name)?.[0];
    let invited = false;
    const profile = await upsert(entry.key, entry.resource, {
      seed: entry.seed,
      create: async () => {
        const created = (await medplum.post(adminApi('invite'), {
          resourceType: entry.resource.resourceType,
          firstName: name?.given?.join(' ') ?? entry.member.externalId,
          lastName: name?.family ?? entry.member.externalId,
          externalId: entry.member.externalId,
          ...(entry.member.email
            ? { email: entry.member.email, password: entry.member.password, scope: 'project' }
            : {}),
          sendEmail: false,
          // A clinician starts with no queue; her queues are set once they exist (below).
          membership: resolveKeys(withQueues(entry.member.membership, entry.member.queues && []), keys),
        })) as ProjectMembership;
        invited = true;
        return medplum.readReference(created.profile as Reference<Patient | Practitioner>, { cache: 'no-cache' });
      },
    });
    if (entry.member.queues) {
      withQueuesLater.push({ entry, profile: plainReference(profile), invited });
      return;
    }
    await membership(`membership-${entry.key}`, plainReference(profile), entry.member.membership, invited);
  };
  const withQueuesLater: { entry: MemberResource; profile: Reference; invited: boolean }[] = [];

  for (const { key, policy } of definition.accessPolicies) {
    await upsert<AccessPolicy>(`policy-${key}`, { resourceType: 'AccessPolicy', ...policy });
  }
  const integrationKeys = new Set(definition.integrations.map((i) => i.key));
  for (const entry of definition.resources) {
    if (integrationKeys.has(entry.key)) {
      continue;
    }
    if (isMember(entry)) {
      await member(entry);
    } else if (entry.retire) {
      await retire(entry.key, entry.resource.resourceType);
    } else {
      await upsert(entry.key, entry.resource, { writeOnce: entry.writeOnce, seed: entry.seed, absent: entry.absent });
    }
  }

  // Clinicians' queues, now that every queue exists: one membership write each, or none when unchanged.
  // Each also carries who works each of her queues (her colleagues there), from the same list.
  const queuesOf = (entry: MemberResource) =>
    (entry.member.queues ?? []).map((key) => {
      const queue = keys.get(key)?.reference;
      if (!queue) {
        throw new Error(`Provisioning reference to unknown queue key ${key}`);
      }
      return queue;
    });
  const staff = withQueuesLater.flatMap(({ entry, profile }) =>
    queuesOf(entry).map((queue) => ({ queue, member: profile.reference as string })),
  );
  for (const { entry, profile, invited } of withQueuesLater) {
    const queues = queuesOf(entry);
    const colleagues = staff.filter((s) => queues.includes(s.queue));
    await membership(
      `membership-${entry.key}`,
      profile,
      withQueues(entry.member.membership, queues, colleagues),
      invited,
    );
    // Work she took from a queue she no longer works goes back to it (her policy no longer lets her act on it).
    const returned = await returnWork(medplum, profile.reference as string, (queue) => !queues.includes(queue));
    if (returned > 0) {
      report.updated.push(`work-returned-${entry.key}-${returned}`);
    }
  }

  // People of the clinic file who are no longer in it: retired (src/provision/shape.ts `staff`).
  if (definition.staff) {
    await retireStaff(medplum, definition.staff, adminApi, report);
  }

  // Machine clients: ClientApplication + membership (packages/server/src/admin/client.ts): 201 with it.
  for (const integration of definition.integrations) {
    const desired = definition.resources.find((r) => r.key === integration.key)?.resource as ClientApplication;
    // Created with its one policy; a client with parameters, with its first policy before they are set (a
    // membership made without any policy would have the project's default access meanwhile).
    const accessPolicy = (
      integration.accessPolicy
        ? keys.get(`policy-${integration.accessPolicy}`)
        : resolveKeys(integration.access?.[0]?.policy, keys)
    ) as Reference<AccessPolicy> | undefined;
    const client = await upsert<ClientApplication>(integration.key, desired, {
      create: async () =>
        (await medplum.post(adminApi('client'), {
          name: desired.name,
          description: desired.description,
          accessPolicy,
        })) as WithId<ClientApplication>,
    });
    await membership(
      `membership-${integration.key}`,
      plainReference(client),
      integration.access ? { access: integration.access } : { accessPolicy },
      report.created.includes(integration.key),
    );
  }

  // Tenant backends removed from the clinic file: their credentials no longer sign in.
  if (definition.backends) {
    await retireBackends(medplum, definition.backends, adminApi, report);
  }

  const defaultPolicy = keys.get(`policy-${definition.project.defaultPatientAccessPolicy}`);
  const tenants = webhookTenants(definition);
  const webhookSecrets = tenantWebhookSecrets(tenants, project, options.webhookSecrets ?? {});
  // Secrets the bots read (event.secrets): the edge key and storage base each set only when given; a copy of
  // Medplum's public signing keys always (what bots verify their callers' tokens with, without a fetch).
  const signingKeys = (await medplum.get('.well-known/jwks.json', { cache: 'no-cache' })) as { keys?: unknown[] };
  const secrets = [
    ...(options.edgeStatementKey ? [{ name: EDGE_STATEMENT.secretName, valueString: options.edgeStatementKey }] : []),
    ...(options.storageBaseUrl ? [{ name: STORAGE_BASE_SECRET, valueString: options.storageBaseUrl }] : []),
    { name: SIGNING_KEYS.secretName, valueString: JSON.stringify({ keys: signingKeys.keys ?? [] }) },
    ...webhookSecrets,
  ];
  const desiredProject: Project = {
    ...project,
    defaultPatientAccessPolicy: defaultPolicy as Reference<AccessPolicy> | undefined,
    // Each given secret in its stored place (new ones last): a run that omits one, then one that gives it
    // again, writes nothing when its value is the same.
    secret: [
      ...(project.secret ?? []).map((s) => secrets.find((given) => given.name === s.name) ?? s),
      ...secrets.filter((given) => !project.secret?.some((s) => s.name === given.name)),
    ],
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
    const accessPolicy = keys.get(`policy-${bot.accessPolicy}`) as Reference<AccessPolicy> | undefined;
    const saved = await upsert<Bot>(
      `bot-${bot.key}`,
      {
        resourceType: 'Bot',
        name: bot.key,
        description: bot.description,
        identifier: [{ system: SYSTEMS.bots, value: bot.key }],
        meta: bot.patient ? { tag: [{ system: BOT_AUDIENCE.system, code: BOT_AUDIENCE.patient }] } : undefined,
        runtimeVersion: 'vmcontext',
        ...(bot.cronString ? { cronString: bot.cronString } : {}),
        extension: [
          { url: EXTENSIONS.botBundleSha256, valueString: sha256 },
          ...(bot.cronString ? [{ url: EXTENSIONS.cronScheduled, valueString: bot.cronString }] : []),
        ],
      },
      {
        // Bot + its membership with the policy (packages/server/src/admin/bot.ts): 201 with the Bot.
        create: async () =>
          (await medplum.post(adminApi('bot'), {
            name: bot.key,
            description: bot.description,
            accessPolicy,
            runtimeVersion: 'vmcontext',
          })) as WithId<Bot>,
      },
    );
    if (bot.cronString && (report.created.includes(`bot-${bot.key}`) || report.updated.includes(`bot-${bot.key}`))) {
      await scheduleCron(medplum, saved);
    }
    if (
      !saved.executableCode ||
      report.created.includes(`bot-${bot.key}`) ||
      report.updated.includes(`bot-${bot.key}`)
    ) {
      await medplum.post(medplum.fhirUrl('Bot', saved.id, '$deploy'), { code, filename: `${bot.key}.js` });
      report.deployed.push(bot.key);
    }
    if (!isPlanned(saved.id)) {
      await sealBotCode(medplum, saved.id, getReferenceString(project), options.storageBaseUrl);
    }
    await membership(
      `membership-bot-${bot.key}`,
      plainReference(saved),
      { accessPolicy, ...(bot.admin ? { admin: true } : {}) },
      report.created.includes(`bot-${bot.key}`),
    );
  }

  const webhookWaking = tenants.flatMap((t) => (t.endpoint ? webhookSubscriptions(t.tenant, t.organization) : []));
  for (const subscription of [...definition.subscriptions, ...webhookWaking]) {
    const bot = keys.get(`bot-${subscription.bot}`);
    await upsert<Subscription>(`subscription-${subscription.key}`, {
      resourceType: 'Subscription',
      status: 'active',
      reason: subscription.reason,
      criteria: resolveKeysIn(subscription.criteria, keys),
      channel: { type: 'rest-hook', endpoint: getReferenceString(bot as Reference) },
      extension: [{ url: SUPPORTED_INTERACTION, valueCode: subscription.interaction }],
    });
  }
  // A tenant that no longer takes webhooks: what woke the bot for it is turned off (kept, as history).
  for (const { tenant, organization } of tenants.filter((t) => !t.endpoint)) {
    const tags = webhookSubscriptions(tenant, organization).map((w) => `${SYSTEMS.provisioning}|subscription-${w.key}`);
    const left = await medplum.searchResources(
      'Subscription',
      { _tag: tags.join(','), status: 'active' },
      { cache: 'no-cache' },
    );
    for (const subscription of left) {
      await medplum.updateResource({ ...subscription, status: 'off' });
      report.updated.push(`subscription-${subscription.id}-off`);
    }
  }
  // Work that must exist before the first cron run (the next weeks' free Slots): each such bot once.
  // A one-off run follows a run that made something (a first one, a new schedule...) or deployed the
  // bot's new code: a run that changed nothing writes nothing, and the bots' own schedules carry on.
  if (options.runBots !== false) {
    const due = definition.bots.filter(
      (b) => b.runAfterProvisioning && (report.created.length > 0 || report.deployed.includes(b.key)),
    );
    for (const bot of due) {
      await whenQuotaAllows(() => medplum.executeBot({ system: SYSTEMS.bots, value: bot.key }, {}, 'application/json'));
    }
  }
  // Records stored before the platform wrote them as it does now (src/provision/migrations.ts).
  const { panels } = await migrateReadings(medplum);
  if (panels > 0) {
    report.updated.push(`migration-blood-pressure-panels-${panels}`);
  }
  const { tasks } = await migrateQueueWork(medplum);
  if (tasks > 0) {
    report.updated.push(`migration-queue-work-${tasks}`);
  }
  const { notes } = await migrateVisitNotes(medplum);
  if (notes > 0) {
    report.updated.push(`migration-visit-notes-${notes}`);
  }
  report.references = Object.fromEntries([...keys].map(([key, reference]) => [key, reference.reference as string]));
  return report;
}

/** Her open queue work (owned by her) that `leaving` says she may no longer work: unowned in its queue again. */
async function returnWork(
  medplum: MedplumClient,
  practitioner: string,
  leaving: (queue: string) => boolean,
): Promise<number> {
  const open = await medplum.searchResources(
    'Task',
    { owner: practitioner, status: 'ready,in-progress,on-hold', _count: '1000' },
    { cache: 'no-cache' },
  );
  let returned = 0;
  for (const task of open) {
    const queue = queueOfTask(task);
    if (!queue || !leaving(queue)) {
      continue;
    }
    const { owner: _owner, ...rest } = task;
    await medplum.updateResource({ ...rest, status: task.status === 'in-progress' ? 'ready' : task.status });
    returned++;
  }
  return returned;
}

/**
 * Each person the clinic file provisioned who is no longer in it: her membership deleted (she can no longer
 * sign in; Medplum deletes a User of this project alone with it), her open queue work returned unowned to
 * its queue, her PractitionerRoles and Schedules inactive (no new slot is made or offered). Her Practitioner
 * and everything she wrote stay; visits already booked with her stay booked for the clinic to move.
 */
async function retireStaff(
  medplum: MedplumClient,
  staff: NonNullable<ProvisionDefinition['staff']>,
  adminApi: (path: string) => string,
  report: ProvisionReport,
): Promise<void> {
  const people = await medplum.searchResources(
    'Practitioner',
    { identifier: `${staff.system}|`, _count: '1000' },
    { cache: 'no-cache' },
  );
  for (const person of people) {
    const value = person.identifier?.find((i) => i.system === staff.system)?.value;
    if (!value || staff.keep.includes(value)) {
      continue;
    }
    const reference = `Practitioner/${person.id}`;
    let changed = (await revokeMembership(medplum, reference, adminApi)) ? 1 : 0;
    changed += await returnWork(medplum, reference, () => true);
    const calendars = [
      ...(await medplum.searchResources(
        'PractitionerRole',
        { practitioner: reference, active: 'true' },
        { cache: 'no-cache' },
      )),
      ...(await medplum.searchResources('Schedule', { actor: reference, active: 'true' }, { cache: 'no-cache' })),
    ];
    for (const calendar of calendars) {
      await medplum.updateResource({ ...calendar, active: false }, calendar.meta?.accounts ? EXTENDED : undefined);
      changed++;
    }
    report[changed > 0 ? 'updated' : 'unchanged'].push(`retired-${value}`);
  }
}

/**
 * The membership of a profile deleted through Medplum's admin API (`DELETE /admin/projects/:projectId/members/
 * :membershipId`, packages/server/src/admin/project.ts): it no longer signs in. False when it had none.
 */
async function revokeMembership(
  medplum: MedplumClient,
  profile: string,
  adminApi: (path: string) => string,
): Promise<boolean> {
  const membership = await medplum.searchOne('ProjectMembership', { profile }, { cache: 'no-cache' });
  if (membership) {
    await medplum.delete(adminApi(`members/${membership.id}`));
  }
  return Boolean(membership);
}

/** Each tenant backend the clinic file no longer names: its membership deleted (the client is kept, unusable). */
async function retireBackends(
  medplum: MedplumClient,
  backends: NonNullable<ProvisionDefinition['backends']>,
  adminApi: (path: string) => string,
  report: ProvisionReport,
): Promise<void> {
  const clients = await medplum.searchResources(
    'ClientApplication',
    { _tag: `${backends.system}|`, _count: '1000' },
    { cache: 'no-cache' },
  );
  for (const client of clients) {
    const code = client.meta?.tag?.find((t) => t.system === backends.system)?.code;
    if (!code || backends.keep.includes(code)) {
      continue;
    }
    const revoked = await revokeMembership(medplum, `ClientApplication/${client.id}`, adminApi);
    report[revoked ? 'updated' : 'unchanged'].push(`retired-backend-${code}`);
  }
}

/** How many times a call refused for a spent FHIR quota is tried again, each after its window ends. */
const QUOTA_ATTEMPTS = 3;

/**
 * A call made again once Medplum's FHIR quota window has passed, when it was refused for the quota:
 * a 429, or a bot that stopped on its own 429 (thrown, so answered 400 with a `throttled` issue). A
 * refused call did nothing (each bot's change is one transaction, each Slot a conditional create).
 */
export async function whenQuotaAllows<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const outcome = err instanceof OperationOutcomeError ? err.outcome : undefined;
      const throttled = outcome?.issue?.some((i) => i.code === 'throttled');
      if (!outcome || !throttled || attempt >= QUOTA_ATTEMPTS) {
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, retryAfterSeconds(outcome) * 1000 + 250));
    }
  }
}

/**
 * The oldest Medplum release this project runs on (docs/deploy.md, "Supported Medplum releases"; tested on
 * 5.1.29 by the real-Medplum lane, docs/real-medplum.md). Its safety rests on two things older releases lack:
 * a Binary is read only by whoever may read its `securityContext` (5.1.18: clinicians read her uploads
 * themselves, and nobody else does), and keeping AuditEvents, which her access log needs, does not leak a
 * database connection per `_include` or GraphQL read (5.1.24).
 */
export const OLDEST_SUPPORTED_MEDPLUM = '5.1.24';

/**
 * Refuses a Medplum older than the oldest supported, before anything is written: `/healthcheck` answers
 * `{ok, version}` (e.g. `5.1.29-f5d2946`; packages/server/src/healthcheck.ts).
 */
async function requireTestedMedplum(medplum: MedplumClient): Promise<void> {
  const health = (await medplum.get('healthcheck', { cache: 'no-cache' })) as { version?: unknown };
  const version = typeof health.version === 'string' ? health.version : undefined;
  if (!version || compareVersions(version, OLDEST_SUPPORTED_MEDPLUM) < 0) {
    throw new Error(
      `Medplum ${version ?? '(version unknown)'} is older than ${OLDEST_SUPPORTED_MEDPLUM}, the oldest release this project supports: ` +
        "before 5.1.18 Medplum reads any Binary by id whatever its securityContext (clinicians read patients' uploads as Binaries), " +
        'and before 5.1.24 keeping AuditEvents (her access log) leaks a database connection per _include or GraphQL read. ' +
        'Upgrade the server (tested on 5.1.29; docs/deploy.md). Nothing was written.',
    );
  }
}

/** Compares the `major.minor.patch` at the start of two versions. */
export function compareVersions(a: string, b: string): number {
  const parts = (v: string) => (/^(\d+)\.(\d+)\.(\d+)/.exec(v) ?? []).slice(1, 4).map(Number);
  const [x, y] = [parts(a), parts(b)];
  if (x.length < 3) {
    return -1;
  }
  for (let i = 0; i < 3; i++) {
    if (x[i] !== y[i]) {
      return x[i] - y[i];
    }
  }
  return 0;
}

/**
 * What provisioning writes names it as the author (`meta.author`), and Medplum's apps show an author
 * they may not read as "[Forbidden]": the client it runs as carries PROVISIONING_CLIENT_TAG, by which
 * clinicians read it (never its secrets). Tagged once; a person who provisions is named already.
 */
async function markProvisioningClient(medplum: MedplumClient, report: ProvisionReport): Promise<void> {
  const me = (await medplum.get('auth/me', { cache: 'no-cache' })) as {
    profile?: Reference & { resourceType?: string; id?: string };
  };
  const [type, id] = me.profile?.resourceType
    ? [me.profile.resourceType, me.profile.id]
    : (me.profile?.reference?.split('/') ?? []);
  if (type !== 'ClientApplication' || !id) {
    return;
  }
  const client = await medplum.readResource('ClientApplication', id, { cache: 'no-cache' });
  const tags = client.meta?.tag ?? [];
  if (tags.some((t) => t.system === PROVISIONING_CLIENT_TAG.system && t.code === PROVISIONING_CLIENT_TAG.code)) {
    report.unchanged.push('provisioning-client');
    return;
  }
  await medplum.updateResource({ ...client, meta: { ...client.meta, tag: [...tags, PROVISIONING_CLIENT_TAG] } });
  report.updated.push('provisioning-client');
}

export async function currentProject(medplum: MedplumClient): Promise<WithId<Project>> {
  const me = (await medplum.get('auth/me', { cache: 'no-cache' })) as { project?: Reference<Project> | Project };
  const projectRef = me.project as Reference<Project> & Project;
  const id = projectRef.id ?? projectRef.reference?.split('/')[1];
  if (!id) {
    throw new Error('The provisioning client is not a member of a project');
  }
  return medplum.readResource('Project', id, { cache: 'no-cache' });
}

/**
 * Identifier systems only provisioning assigns, which patients cannot change (Patient.identifier is
 * read-only to them): a resource whose provisioning tag was dropped (a patient's own PUT without
 * `meta`, which Medplum stores as sent) is found again by one of these, so a start never makes a
 * second demo patient or moves a login to one.
 */
const STABLE_IDENTIFIERS: readonly string[] = [SYSTEMS.demoPatient, SYSTEMS.demoClinician, SYSTEMS.tenant];

async function byStableIdentifier(medplum: MedplumClient, resource: Resource): Promise<Resource | undefined> {
  const identifiers = (resource as { identifier?: { system?: string; value?: string }[] }).identifier ?? [];
  const stable = identifiers.find((i) => i.value && STABLE_IDENTIFIERS.includes(i.system ?? ''));
  if (!stable) {
    return undefined;
  }
  const found = await medplum.searchResources(
    resource.resourceType,
    { identifier: `${stable.system}|${stable.value}`, _count: '2' },
    { cache: 'no-cache' },
  );
  if (found.length > 1) {
    // Two claim the same identity: adopting either could hand a login to the wrong one.
    throw new Error(
      `${resource.resourceType} ${stable.system}|${stable.value} exists ${found.length} times: resolve it by hand`,
    );
  }
  const [candidate] = found;
  // Never one that another provisioning key already manages.
  return candidate?.meta?.tag?.some((t) => t.system === SYSTEMS.provisioning) ? undefined : candidate;
}

function tagged<T extends Resource>(key: string, resource: T): T {
  const tag = { system: SYSTEMS.provisioning, code: key };
  const tags = (resource.meta?.tag ?? []).filter((t) => t.system !== SYSTEMS.provisioning || t.code === key);
  return { ...resource, meta: { ...resource.meta, tag: tags.some((t) => t.code === key) ? tags : [...tags, tag] } };
}

/** Replaces every `key:<key>` in a search (a Subscription's criteria) with the reference applied under that key. */
function resolveKeysIn(text: string, keys: Map<string, Reference>): string {
  return text.replace(/key:([A-Za-z0-9-]+)/g, (_, key: string) => {
    const resolved = keys.get(key)?.reference;
    if (!resolved) {
      throw new Error(`Provisioning reference to unknown key key:${key}`);
    }
    return resolved;
  });
}

/**
 * The signing secrets of the tenants that take webhooks, as Project secrets: each endpoint must be one
 * the bot will post to (contracts/webhooks.ts) and have a secret, given now or stored by an earlier run.
 */
function tenantWebhookSecrets(
  tenants: ReturnType<typeof webhookTenants>,
  project: Project,
  given: Record<string, string>,
): { name: string; valueString: string }[] {
  const secrets: { name: string; valueString: string }[] = [];
  for (const { tenant, endpoint } of tenants) {
    if (!endpoint) {
      continue;
    }
    if (!allowedWebhookEndpoint(endpoint)) {
      throw new Error(
        `The webhook endpoint of tenant ${tenant} must be https (or http to this machine), with no credentials in it`,
      );
    }
    const name = webhookSecretName(tenant);
    const text = given[tenant];
    const signing = text === undefined ? undefined : webhookSecrets(text);
    if (text !== undefined && !signing) {
      throw new Error(
        `The webhook secret of tenant ${tenant} must be whsec_ and base64 of 24 to 64 random bytes (or two such, new and old, separated by a space)`,
      );
    }
    if (!signing && !project.secret?.some((s) => s.name === name && s.valueString)) {
      throw new Error(
        `Tenant ${tenant} has a webhook endpoint but no signing secret: set ${webhookSecretEnv(tenant)} (docs/deploy.md)`,
      );
    }
    if (signing) {
      secrets.push({ name, valueString: signing.join(' ') });
    }
  }
  return secrets;
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

/** Of meta, only what the definition owns: its tags and the tenant accounts it stamps. */
function pickTags(meta: unknown): unknown {
  const { tag, accounts } = (meta ?? {}) as { tag?: unknown; accounts?: unknown };
  return { ...(tag === undefined ? {} : { tag }), ...(accounts === undefined ? {} : { accounts }) };
}

/**
 * Medplum schedules a bot only when it is written with a cron string that differs from its previous
 * version's, and only if the Project has the `cron` feature at that moment (packages/server/src/workers/
 * cron.ts, addCronJobs). A bot written with its cron string before the feature was on is never
 * scheduled, and writing the same string again schedules nothing. So whenever provisioning writes a
 * scheduled bot (created, changed, or without the `cron-scheduled` mark of an earlier version), it writes
 * it once without the string and then as defined: the second write schedules it. A bot that carries the
 * mark was so written with the feature on (provisioning refuses a Project without it), and is left alone.
 */
async function scheduleCron(medplum: MedplumClient, bot: WithId<Bot>): Promise<void> {
  const { cronString: _unscheduled, ...withoutCron } = bot;
  await medplum.updateResource<Bot>(withoutCron);
  await medplum.updateResource<Bot>(bot);
}

/** `{ reference }` only: a display would make a stored copy differ from the definition on every run. */
function plainReference<T extends Resource>(resource: WithId<T>): Reference<T> {
  return { reference: getReferenceString(resource) } as Reference<T>;
}

/**
 * A bot's code is readable by project admins only: each Binary it names (its deployed `executableCode`, and
 * the `sourceCode` Medplum's bot creation makes from its template) gets the Project as its securityContext,
 * which no patient or clinician may read, and Medplum lets a Binary be read only by whoever can read its
 * context (packages/server/src/fhir/repo.ts authorizeBinarySecurityContext). `$deploy` and bot creation
 * write code without one, and clinicians may read Binaries by id (her uploads), so unsealed code would be
 * theirs to read. Sealing an already sealed Binary writes nothing.
 */
async function sealBotCode(
  medplum: MedplumClient,
  botId: string,
  context: string,
  storageBaseUrl: string | undefined,
): Promise<void> {
  const bot = await medplum.readResource('Bot', botId, { cache: 'no-cache' });
  // Medplum hands a project admin the presigned storage URL in place of `Binary/<id>` (fhir/rewrite.ts).
  const origins = { baseUrl: medplum.getBaseUrl(), storageBaseUrl };
  const id = binaryIdOf(bot.executableCode?.url, origins);
  if (!id) {
    throw new Error(`Bot ${botId}: its code names no Binary of this Medplum, so it cannot be sealed`);
  }
  const source = bot.sourceCode?.url ? binaryIdOf(bot.sourceCode.url, origins) : undefined;
  for (const binaryId of source ? [id, source] : [id]) {
    const binary = await medplum.readResource('Binary', binaryId, { cache: 'no-cache' });
    if (binary.securityContext?.reference !== context) {
      // A patch, not the whole Binary: its bytes stay where they are (a bundle may exceed the body limit).
      await medplum.patchResource('Binary', binary.id, [
        { op: 'add', path: '/securityContext', value: { reference: context } },
      ]);
    }
  }
}

/** A membership whose every access entry carries the `queues` parameter (unchanged when `queues` is undefined). */
function withQueues<T extends Pick<ProjectMembership, 'access'>>(
  membership: T,
  queues: string[] | undefined,
  staff: { queue: string; member: string }[] = [],
): T {
  if (!queues) {
    return membership;
  }
  return {
    ...membership,
    access: membership.access?.map((entry) => ({
      ...entry,
      parameter: [
        ...(entry.parameter ?? []).filter((p) => p.name !== QUEUES_PARAMETER && p.name !== QUEUE_STAFF_PARAMETER),
        { name: QUEUES_PARAMETER, valueString: queuesValue(queues) },
        { name: QUEUE_STAFF_PARAMETER, valueString: queueStaffValue(staff) },
      ],
    })),
  };
}
