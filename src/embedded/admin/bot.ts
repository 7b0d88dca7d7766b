import { badRequest, createReference, OperationOutcomeError } from '@medplum/core';
import type { AccessPolicy, Binary, Bot, ProjectMembership, Reference } from '@medplum/fhirtypes';
import type { AdminDeps, ProjectAdmin } from './context';
import { optionalString, requiredString } from './context';

/** The source a new Bot gets when none is given (botinit.ts `defaultBotCode`, in substance). */
const DEFAULT_BOT_SOURCE = `import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  // Your code here
}
`;

/**
 * `POST /admin/projects/:projectId/bot` (packages/server/src/admin/bot.ts, which calls `createBot` of
 * packages/server/src/fhir/operations/botinit.ts): takes `{name, description?, accessPolicy?,
 * runtimeVersion?}`, creates, as the admin, a Binary of Medplum's template source (TypeScript, no
 * securityContext, as 5.1's `createCodeBinary`) and the Bot naming it as its `sourceCode`, and as the system
 * its ProjectMembership (user = profile = the Bot, with `accessPolicy`), and answers 201 with the Bot. Code
 * arrives later with `$deploy`.
 */
export async function createBot(admin: ProjectAdmin, deps: AdminDeps, body: Record<string, unknown>): Promise<Bot> {
  const name = requiredString(body, 'name', 'Bot name is required');
  const runtimeVersion = optionalString(body, 'runtimeVersion');
  if (runtimeVersion !== undefined && runtimeVersion !== 'vmcontext') {
    // The embedded Medplum runs vmcontext bots only (Medplum's other runtime is AWS Lambda).
    throw new OperationOutcomeError(badRequest('Only the vmcontext runtime is supported', 'runtimeVersion'));
  }
  const source = await admin.repo.createResource<Binary>({
    resourceType: 'Binary',
    meta: { project: admin.project.id },
    contentType: 'text/typescript',
    data: Buffer.from(DEFAULT_BOT_SOURCE, 'utf8').toString('base64'),
  });
  const bot = await admin.repo.createResource<Bot>({
    resourceType: 'Bot',
    meta: { project: admin.project.id },
    name,
    description: optionalString(body, 'description'),
    runtimeVersion: 'vmcontext',
    sourceCode: { contentType: 'text/typescript', url: `Binary/${source.id}`, title: 'index.ts' },
  });
  await deps.systemRepo.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: admin.project.id },
    project: createReference(admin.project),
    user: createReference(bot),
    profile: createReference(bot),
    accessPolicy: await accessPolicyOf(admin, body.accessPolicy),
  });
  return bot;
}

/**
 * The policy a new membership gets, checked as Medplum's invite does (validateAccessPolicies in
 * packages/server/src/admin/invite.ts): it must exist and belong to the project (400 otherwise).
 */
export async function accessPolicyOf(
  admin: ProjectAdmin,
  value: unknown,
): Promise<Reference<AccessPolicy> | undefined> {
  if (value === undefined) {
    return undefined;
  }
  const reference = (value as Reference<AccessPolicy> | null)?.reference;
  if (typeof reference !== 'string' || !reference.startsWith('AccessPolicy/')) {
    throw new OperationOutcomeError(badRequest('accessPolicy must be a reference to an AccessPolicy', 'accessPolicy'));
  }
  const policy = await admin.repo.readReference<AccessPolicy>({ reference }).catch(() => undefined);
  if (!policy || policy.meta?.project !== admin.project.id) {
    throw new OperationOutcomeError(badRequest(`Access policy ${reference} does not exist`, 'accessPolicy'));
  }
  return { reference };
}
