import type { BotEvent, WithId } from '@medplum/core';
import {
  allOk,
  badRequest,
  createReference,
  generateId,
  getReferenceString,
  normalizeErrorString,
  normalizeOperationOutcome,
  notFound,
  OperationOutcomeError,
  tooManyRequests,
} from '@medplum/core';
import type { FhirRequest, FhirRouter } from '@medplum/fhir-router';
import type {
  AuditEvent,
  Binary,
  Bot,
  OperationOutcome,
  Project,
  ProjectMembership,
  ProjectSetting,
  Resource,
} from '@medplum/fhirtypes';
import { AuditWriter } from '../store/audit';
import type { ResourceChange, SqliteRepository } from '../store/repo';
import { runBotBundle } from './vm';

// Where it lived first (test/embedded/bot-runtime.test.ts imports it from here).
export { AuditWriter };

export interface BotRunnerOptions {
  systemRepo: SqliteRepository;
  /** Where the runs' AuditEvents are written (default: a writer of the runner's own). */
  audits?: AuditWriter;
  /** A fresh access token for the bot's own membership. */
  tokenFor: (membership: WithId<ProjectMembership>) => Promise<string>;
  baseUrl: string;
  fetch: typeof fetch;
  timeoutMs: number;
  /** Told of each run's requests when it ends (the bench counts round trips with it). */
  onRun?: (run: BotRunTrace) => void;
}

/** One bot run's requests to Medplum: what each asked and when it started and ended (ms, performance clock). */
export interface BotRunTrace {
  bot: string;
  requests: { method: string; url: string; start: number; end: number }[];
}

export interface BotRunInput {
  input: unknown;
  contentType: string;
  /** Reference string of who asked: the `$execute` caller's profile, or a subscription resource's author. */
  requester: string | undefined;
  headers?: Record<string, string>;
}

/**
 * The bot's own code failed (threw, rejected or ran out of time), as opposed to the platform failing
 * to run it (no bundle, no membership, the store). Medplum retries only the latter for subscriptions.
 */
export class BotExecutionError extends Error {
  constructor(readonly thrown: unknown) {
    super('Bot execution failed');
  }
}

/** Runs deployed bot bundles the way Medplum's vmcontext runtime does, as the bot's own membership. */
export class BotRunner {
  private readonly tokens = new Map<string, { token: string; expires: number }>();
  /** Decoded bundles by their Binary (`Binary/<id>`): read and decoded once, dropped when it changes. */
  private readonly code = new Map<string, string>();

  private readonly audits: AuditWriter;

  constructor(private readonly options: BotRunnerOptions) {
    this.audits = options.audits ?? new AuditWriter(options.systemRepo);
  }

  async run(callerBot: WithId<Bot>, request: BotRunInput): Promise<unknown> {
    const { systemRepo } = this.options;
    // The caller's view of the Bot may hide its code and secrets (the patient policy does): what runs
    // is the stored Bot, read by the system.
    const bot = await systemRepo.readResource<Bot>('Bot', callerBot.id);
    const code = await this.loadCode(bot);
    const accessToken = await this.tokenForBot(bot);
    const event: BotEvent = {
      bot: createReference(bot),
      input: request.input,
      contentType: request.contentType,
      secrets: await this.secretsFor(bot),
      traceId: generateId(),
      requester: request.requester ? ({ reference: request.requester } as BotEvent['requester']) : undefined,
      headers: request.headers,
    };
    const started = new Date();
    const traced = this.options.onRun ? tracedFetch(this.options.fetch) : undefined;
    let outcome: AuditEvent['outcome'] = '0';
    let outcomeDesc = 'Success';
    try {
      return await runBotBundle({
        code,
        baseUrl: this.options.baseUrl,
        accessToken,
        fetch: traced ? traced.fetch : this.options.fetch,
        event,
        timeoutMs: this.options.timeoutMs,
      });
    } catch (err) {
      outcome = '4';
      outcomeDesc = normalizeErrorString(err);
      throw new BotExecutionError(err);
    } finally {
      if (traced) {
        const key = bot.identifier?.[0]?.value ?? bot.name ?? bot.id;
        this.options.onRun?.({ bot: key, requests: traced.requests });
      }
      const audit: AuditEvent = {
        resourceType: 'AuditEvent',
        meta: { project: bot.meta?.project, accounts: bot.meta?.accounts },
        // As Medplum's createBotAuditEvent (packages/server/src/util/auditevent.ts, 5.1.29): the requester
        // first (none for a cron run), then the bot it ran as.
        type: { system: 'https://medplum.com/CodeSystem/audit-event', code: 'execute' },
        recorded: new Date().toISOString(),
        period: { start: started.toISOString(), end: new Date().toISOString() },
        agent: [
          ...(request.requester ? [{ who: { reference: request.requester }, requestor: true }] : []),
          { who: createReference(bot), requestor: false },
        ],
        source: { observer: createReference(bot) },
        entity: auditEntities(bot, request),
        outcome,
        // Bot output can hold PHI: record only whether it succeeded, never the input or the result.
        outcomeDesc: outcome === '0' ? outcomeDesc : 'Bot threw an error',
      };
      await this.audits.write(audit);
    }
  }

  /** The Project's secrets by name: what Medplum hands a bot as `event.secrets`. */
  private async secretsFor(bot: WithId<Bot>): Promise<Record<string, ProjectSetting>> {
    const projectId = bot.meta?.project;
    const project = projectId
      ? await this.options.systemRepo.readResource<Project>('Project', projectId).catch(() => undefined)
      : undefined;
    return Object.fromEntries((project?.secret ?? []).map((s) => [s.name, s]));
  }

  private async loadCode(bot: Bot): Promise<string> {
    const url = bot.executableCode?.url;
    if (!url?.startsWith('Binary/')) {
      throw new OperationOutcomeError(badRequest('Bot is not deployed'));
    }
    const cached = this.code.get(url);
    if (cached !== undefined) {
      return cached;
    }
    const binary = await this.options.systemRepo.readResource<Binary>('Binary', url.slice('Binary/'.length));
    const code = Buffer.from(binary.data ?? '', 'base64').toString('utf8');
    this.code.set(url, code);
    return code;
  }

  /**
   * Told of every committed change: a Binary written or deleted is read again on its next run (a
   * `$deploy` writes a new Binary and points the Bot at it, so it is new code anyway).
   */
  forget(changes: ResourceChange[]): void {
    for (const { resource } of changes) {
      if (resource.resourceType === 'Binary') {
        this.code.delete(`Binary/${resource.id}`);
      }
    }
  }

  /** One token per bot, reused until shortly before it expires (one Login per hour, not per run). */
  private async tokenForBot(bot: WithId<Bot>): Promise<string> {
    const cached = this.tokens.get(bot.id);
    if (cached && cached.expires > Date.now()) {
      return cached.token;
    }
    const membership = await this.options.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: getReferenceString(bot) }],
    });
    if (!membership) {
      throw new OperationOutcomeError(badRequest('Bot has no project membership'));
    }
    const token = await this.options.tokenFor(membership);
    this.tokens.set(bot.id, { token, expires: Date.now() + 50 * 60 * 1000 });
    return token;
  }
}

/** `Bot/{id}/$execute`, `Bot/$execute?identifier=`, `Bot/{id}/$deploy` on Medplum's FHIR router. */
/**
 * Bot runs `$execute` may have going at once. Each holds a vm context and its calls: 1,000 at once from
 * one token, straight at this server, once ran the Medplum thread out of memory for everyone (500 did
 * not). Beyond it the answer is 429 at once, as an over-quota call is on Medplum; the gateway passes it
 * on as 503 (the platform at capacity). Stricter than Medplum, which does not bound them.
 */
export const MAX_CONCURRENT_EXECUTIONS = 128;

export function registerBotOperations(router: FhirRouter, runner: BotRunner): void {
  let executing = 0;
  const execute = async (req: FhirRequest, repo: unknown) => {
    if (executing >= MAX_CONCURRENT_EXECUTIONS) {
      const outcome: OperationOutcome = structuredClone(tooManyRequests);
      outcome.issue[0].diagnostics = JSON.stringify({ _msBeforeNext: 1000, reason: 'bot-executions-in-flight' });
      return [outcome] as [OperationOutcome];
    }
    executing++;
    try {
      return await executeAdmitted(req, repo);
    } finally {
      executing--;
    }
  };
  const executeAdmitted = async (req: FhirRequest, repo: unknown) => {
    const callerRepo = repo as SqliteRepository;
    const bot = await findBot(req, callerRepo);
    const contentType = String(req.headers?.['content-type'] ?? 'application/json').split(';')[0];
    let result: unknown;
    try {
      result = await runner.run(bot, {
        input: req.body,
        contentType,
        requester: callerRepo.caller.profile.reference,
        // As Medplum does: the caller's request headers, its Authorization included, so that the bot
        // can verify the caller's token itself (DESIGN section 7).
        headers: req.headers as Record<string, string> | undefined,
      });
    } catch (err) {
      // As Medplum (packages/server/src/fhir/operations/execute.ts, bots/vmcontext.ts): a bot that
      // throws is HTTP 400 whatever it threw, and the body is the normalized OperationOutcome of it (a
      // thrown conflict or not-found keeps its code, so the body alone does not say 400).
      const thrown = normalizeOperationOutcome(err instanceof BotExecutionError ? err.thrown : err);
      return [badRequest(normalizeErrorString(thrown)), thrown, { contentType: 'application/json' }] as [
        ReturnType<typeof badRequest>,
        Resource,
        { contentType: string },
      ];
    }
    if (result === undefined) {
      return [allOk] as [typeof allOk];
    }
    return [allOk, result as Resource, { contentType: 'application/json' }] as [
      typeof allOk,
      Resource,
      { contentType: string },
    ];
  };
  router.add('POST', 'Bot/:id/$execute', execute);
  router.add('POST', 'Bot/$execute', execute);
  router.add('GET', 'Bot/:id/$execute', execute);

  router.add('POST', 'Bot/:id/$deploy', async (req, repo) => {
    const callerRepo = repo as SqliteRepository;
    const body = req.body as { code?: unknown; filename?: unknown } | undefined;
    if (typeof body?.code !== 'string' || body.code.length === 0) {
      return [badRequest('Missing code')];
    }
    const bot = await callerRepo.readResource<Bot>('Bot', req.params.id);
    const binary = await callerRepo.createResource<Binary>({
      resourceType: 'Binary',
      contentType: 'application/javascript',
      data: Buffer.from(body.code, 'utf8').toString('base64'),
      meta: bot.meta?.accounts ? { accounts: bot.meta.accounts } : undefined,
    });
    await callerRepo.updateResource<Bot>({
      ...bot,
      runtimeVersion: 'vmcontext',
      executableCode: {
        contentType: 'application/javascript',
        url: `Binary/${binary.id}`,
        title: typeof body.filename === 'string' ? body.filename : 'index.js',
      },
    });
    return [allOk];
  });
}

async function findBot(req: FhirRequest, repo: SqliteRepository): Promise<WithId<Bot>> {
  if (req.params.id) {
    return repo.readResource<Bot>('Bot', req.params.id);
  }
  const identifier = req.query.identifier;
  if (typeof identifier !== 'string' || !identifier.includes('|')) {
    throw new OperationOutcomeError(badRequest('Bot identifier must be system|value'));
  }
  const bot = await repo.searchOne<Bot>({
    resourceType: 'Bot',
    filters: [{ code: 'identifier', operator: 'eq', value: identifier }],
  });
  if (!bot) {
    throw new OperationOutcomeError(notFound);
  }
  return bot;
}

/** A fetch that notes each request's method, URL and timing. */
function tracedFetch(inner: typeof fetch): { fetch: typeof fetch; requests: BotRunTrace['requests'] } {
  const requests: BotRunTrace['requests'] = [];
  const traced = async (input: RequestInfo | URL, init?: RequestInit) => {
    const start = performance.now();
    try {
      return await inner(input, init);
    } finally {
      requests.push({
        method: init?.method ?? (input instanceof Request ? input.method : 'GET'),
        url: String(input instanceof Request ? input.url : input),
        start,
        end: performance.now(),
      });
    }
  };
  return { fetch: traced as typeof fetch, requests };
}

/**
 * What a bot run's AuditEvent names, as Medplum names it (packages/server/src/util/auditevent.ts
 * createAuditEventEntities(bot, input, subscription)): the Bot, the resource it was given when its input is
 * one (a subscription's delivery, or an `$execute` of a resource), and the Subscription that delivered it.
 */
function auditEntities(bot: WithId<Bot>, request: BotRunInput): AuditEvent['entity'] {
  const input = request.input as Partial<Resource> | undefined;
  const given =
    input && typeof input === 'object' && typeof input.resourceType === 'string' && typeof input.id === 'string'
      ? { reference: `${input.resourceType}/${input.id}` }
      : undefined;
  const subscription = request.headers?.['X-Medplum-Subscription'];
  return [
    { what: createReference(bot), role: DOMAIN },
    ...(given ? [{ what: given, role: given.reference.startsWith('Patient/') ? PATIENT : DOMAIN }] : []),
    ...(subscription ? [{ what: { reference: `Subscription/${subscription}` }, role: SUBSCRIBER }] : []),
  ];
}

const DOMAIN = { code: '4', display: 'Domain' };
const PATIENT = { code: '1', display: 'Patient' };
const SUBSCRIBER = { code: '9', display: 'Subscriber' };
