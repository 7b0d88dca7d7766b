import type { WithId } from '@medplum/core';
import { badRequest, MEDPLUM_VERSION, MedplumClient, notFound, tooManyRequests } from '@medplum/core';
import { FhirRouter } from '@medplum/fhir-router';
import type { Bot, Project, ProjectMembership } from '@medplum/fhirtypes';
import { Hono } from 'hono';
import { type AdmissionLimits, admissionCounter } from '../shared/admission';
import type { OriginRule } from '../shared/cors';
import { headerRecord, plainCall, requestBytes } from '../shared/fetch-init';
import { createAdminRoutes } from './admin/routes';
import { AttachmentUrls } from './attachments';
import { authenticate, systemContext } from './auth/authenticate';
import { CallerCache, foreignCommitCounter } from './auth/cache';
import type { SigningKey } from './auth/keys';
import { loadOrCreateSigningKey } from './auth/keys';
import { createAuthRoutes, mintTokenForMembership } from './auth/routes';
import { AUTH_THROTTLE_LIMITS } from './auth/throttle';
import { BotRunner, type BotRunTrace, registerBotOperations } from './bots/operations';
import { medplumCors } from './cors';
import { CronScheduler } from './cron';
import { type FhirCall, handleFhirRequest, outcomeResponse, thrownResponse } from './fhir-http';
import { GraphqlGate, type HeapStatistics, isRefusal } from './graphql-gate';
import { capabilityStatement } from './metadata';
import { DEFAULT_FHIR_QUOTA, FhirQuota } from './quota';
import { DEFAULT_REQUEST_RATE_LIMIT, requestRateLimit } from './rate-limit';
import { loadFhirSchema } from './schema';
import { serveStorage } from './storage';
import { AuditWriter } from './store/audit';
import { Database } from './store/database';
import { type RepositoryEnvironment, type ResourceChange, SqliteRepository } from './store/repo';
import { SubscriptionQueue } from './subscriptions';
import { registerTerminology } from './terminology';
import {
  registerWebSocketSubscriptions,
  type WebSocketLimits,
  WebSocketSubscriptions,
  webSocketSubscriptionsEndpoint,
} from './websocket-subscriptions';

export interface EmbeddedMedplumOptions {
  /** SQLite file, or ':memory:' (tests). */
  dbPath: string;
  /** Public base URL, ending in `/` (the issuer and Bundle links use it). Defaults to http://embedded.medplum.local/. */
  baseUrl?: string;
  /** Request body limit in bytes (default 16 MiB, like a typical Medplum deployment's JSON limit). */
  maxBodyBytes?: number;
  botTimeoutMs?: number;
  subscriptionMaxAttempts?: number;
  subscriptionRetryDelayMs?: number;
  clock?: () => Date;
  /** Tests: answer a conditional create 409 as an overlapping transaction on Medplum can (see repo.ts). */
  overlapConflictMs?: number;
  /** Origins whose pages may call this API from a browser (Medplum's `allowedOrigins`); default none. */
  corsOrigins?: readonly OriginRule[];
  /** Tests: the heap figures GraphQL's admission reads (default: this isolate's, node:v8). */
  heapStatistics?: () => HeapStatistics;
  /**
   * FHIR quota points per membership and minute, as Medplum's `defaultFhirQuota` (default 50,000, or
   * `EMBEDDED_FHIR_QUOTA`); a Project's `userFhirQuota` / `totalFhirQuota` system settings override it.
   */
  fhirQuota?: number;
  /**
   * Requests per client address and minute on the HTTP API, as Medplum's `defaultRateLimit` (default
   * 60,000, or `EMBEDDED_REQUEST_RATE_LIMIT`; -1: off). In-process callers are not counted (rate-limit.ts).
   */
  requestRateLimit?: number;
  /**
   * Sign-ins and registrations (`auth/login`, `auth/newuser`, `auth/newproject`) per client address and
   * minute, as Medplum 5.1's `defaultLoginRateLimit` (default 5, or `EMBEDDED_LOGIN_RATE_LIMIT`).
   * In-process callers are not counted (auth/routes.ts).
   */
  loginRateLimit?: number;
  /**
   * Save an AuditEvent for each successful REST read, history, create, update, patch and delete of a
   * caller whose policy lets her create one, as Medplum's `saveAuditEvents` server setting does (default
   * false, as on Medplum; store/repo.ts `audit`). Bot runs' AuditEvents are saved either way.
   */
  saveAuditEvents?: boolean;
  /** The bench: told of each bot run's requests to this Medplum, when it ends (bots/operations.ts). */
  onBotRun?: (run: BotRunTrace) => void;
  /**
   * FHIR calls in flight on the HTTP port, per caller and in all, as the gateway admits them (default 32
   * and 256; src/shared/admission.ts): a caller past her share is 429, a full port 503, at once.
   * In-process callers (the gateway of `npm start`, the bots) are admitted by the gateway or not counted.
   */
  admission?: AdmissionLimits;
  /** Bounds of `ws/subscriptions-r4` (websocket-subscriptions.ts DEFAULT_WEBSOCKET_LIMITS). */
  webSocketLimits?: Partial<WebSocketLimits>;
  /** Tests: the WebSocket heartbeat period (default 10 s, as Medplum). */
  webSocketHeartbeatMs?: number;
}

export interface EmbeddedMedplum {
  /** In-process fetch: give it to MedplumClient (`fetch`) with `baseUrl`. */
  fetch: typeof fetch;
  baseUrl: string;
  app: Hono;
  db: Database;
  /** The system's view of the store (bypasses access policies): bootstrap and test assertions only. */
  systemRepo: SqliteRepository;
  key: SigningKey;
  subscriptions: SubscriptionQueue;
  /**
   * What is bound on `ws/subscriptions-r4`. A Node HTTP server serves the sockets once given to
   * `serveWebSocketSubscriptions` (websocket-server.ts).
   */
  webSocketSubscriptions: WebSocketSubscriptions;
  /** Runs cron bots each minute; `tick(at)` runs those due at a given minute. */
  cron: CronScheduler;
  /** Medplum's FHIR quota as this server counts it (what each membership spent: the bench). */
  quota: FhirQuota;
  /** A MedplumClient for the given membership, authenticated with a freshly minted token. */
  clientFor(membership: ProjectMembership, clientId?: string): Promise<MedplumClient>;
  close(): void;
}

const FHIR_PATH = '/fhir/R4/';
/** Methods the in-process fetch hands over itself; HEAD (no body in the answer) and the rest go through Hono. */
const PLAIN_METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

const SYSTEM_PROJECT: Project = { resourceType: 'Project', id: 'system', name: 'system' };

/**
 * A Medplum-API-compatible server with zero infrastructure: SQLite storage, Medplum's own FHIR
 * router, Medplum-style auth, access policies, bots and subscriptions.
 */
export async function createEmbeddedMedplum(options: EmbeddedMedplumOptions): Promise<EmbeddedMedplum> {
  loadFhirSchema();
  const baseUrl = options.baseUrl ?? 'http://embedded.medplum.local/';
  const issuer = baseUrl;
  const db = new Database(options.dbPath);
  const maxBodyBytes = options.maxBodyBytes ?? 16 * 1024 * 1024;
  // eslint-style forward declaration: the queue needs the bot runner, which needs the app's fetch.
  let queue: SubscriptionQueue | undefined;
  let bots: BotRunner | undefined;
  let cron: CronScheduler | undefined;
  let live: WebSocketSubscriptions | undefined;
  const callers = new CallerCache(foreignCommitCounter(db));
  const attachments = new AttachmentUrls(baseUrl, options.clock);
  const quotaFromEnv = Number(process.env.EMBEDDED_FHIR_QUOTA);
  const quota = new FhirQuota(
    options.fhirQuota ?? (quotaFromEnv > 0 ? quotaFromEnv : DEFAULT_FHIR_QUOTA),
    options.clock ? () => (options.clock as () => Date)().getTime() : undefined,
  );
  const graphql = new GraphqlGate(options.heapStatistics);
  const env: RepositoryEnvironment = {
    db,
    baseUrl,
    attachments,
    quota,
    clock: options.clock,
    overlapConflictMs: options.overlapConflictMs,
    onCommit: (changes: ResourceChange[]) => {
      // First: nothing after this commit may run as a caller it revoked or changed.
      callers.forget(changes);
      bots?.forget(changes);
      queue?.enqueueChanges(changes);
      cron?.onChanges(changes);
      live?.onCommit(changes);
    },
  };
  const systemRepo = new SqliteRepository(env, systemContext(SYSTEM_PROJECT));
  // One writer for every AuditEvent, bot runs' and REST interactions' alike: they commit in groups.
  const audits = new AuditWriter(systemRepo);
  if (options.saveAuditEvents) {
    env.audits = audits;
  }
  const key = await loadOrCreateSigningKey(systemRepo);
  const now = options.clock ?? (() => new Date());
  const loginFromEnv = Number(process.env.EMBEDDED_LOGIN_RATE_LIMIT);
  const loginRateLimit =
    options.loginRateLimit ?? (Number.isInteger(loginFromEnv) && loginFromEnv > 0 ? loginFromEnv : undefined);
  const authDeps = {
    systemRepo,
    key,
    issuer,
    now,
    callers,
    throttleLimits: loginRateLimit
      ? { ...AUTH_THROTTLE_LIMITS, signIns: { ...AUTH_THROTTLE_LIMITS.signIns, limit: loginRateLimit } }
      : AUTH_THROTTLE_LIMITS,
  };

  const app = new Hono();
  // The bots' operations are registered on it below: the bots need the in-process fetch, which needs it.
  const router = new FhirRouter();
  const admitted = admissionCounter(options.admission ?? { perCaller: 32, total: 256 }, () => now().getTime());
  const serveFhir = async (call: FhirCall, external = false): Promise<Response> => {
    let holding: string | undefined;
    try {
      // The one FHIR read Medplum serves without a token (packages/server/src/fhir/routes.ts).
      if (call.url.pathname === `${FHIR_PATH}metadata` && (call.method === 'GET' || call.method === 'HEAD')) {
        return Response.json(capabilityStatement(baseUrl), {
          headers: { 'content-type': 'application/fhir+json; charset=utf-8' },
        });
      }
      if (external) {
        // The port's own admission, as the gateway's, before any work (authentication reads the store): a
        // flood of one session (or of many) answered at once. Keyed by the token's login, unverified here:
        // a forged one fails authentication at once and frees its place.
        const who = sessionKey(call.headers.authorization);
        const answer = admitted.admit(who);
        if (answer !== 'ok') {
          return tooBusy(answer === 'total' ? 503 : 429);
        }
        holding = who;
      }
      const caller = await authenticate(authDeps, call.headers.authorization);
      const extendedMode = call.headers['x-medplum'] === 'extended'; // as Medplum: exactly this value
      const handle = () =>
        handleFhirRequest(call, router, systemRepo.withCaller({ ...caller, extendedMode }), maxBodyBytes, attachments);
      const answer = call.url.pathname.endsWith('/$graphql') ? await graphql.run(handle) : await handle();
      const response = isRefusal(answer)
        ? withHeader(outcomeResponse(answer.outcome, answer.status), 'retry-after', String(answer.retryAfterSeconds))
        : answer;
      const rateLimit = quota.header(caller);
      if (rateLimit) {
        response.headers.set('ratelimit', rateLimit);
      }
      return response;
    } catch (err) {
      return thrownResponse(err);
    } finally {
      if (holding) {
        admitted.release(holding);
      }
    }
  };
  /**
   * In-process fetch. FHIR calls (all but the auth endpoints) go straight to the FHIR handler as plain
   * values: building a WHATWG Request, routing it through Hono and reading the Response back through a
   * stream cost an in-process client some 30-40 µs per call (measured on a patient read).
   */
  const fetchImpl = ((input: RequestInfo | URL, init?: RequestInit) => {
    const call = plainCall(input, init);
    if (call?.url.pathname.startsWith(FHIR_PATH) && PLAIN_METHODS.has(call.method)) {
      return serveFhir({
        method: call.method,
        url: call.url,
        headers: call.headers,
        body: async () => (await requestBytes(call.body)) ?? new Uint8Array(),
      });
    }
    return app.fetch(input instanceof Request ? input : new Request(input, init));
  }) as typeof fetch;

  const clientFor = async (membership: ProjectMembership, clientId?: string): Promise<MedplumClient> => {
    const token = await mintTokenForMembership(authDeps, membership, clientId);
    const client = new MedplumClient({ baseUrl, fetch: fetchImpl, cacheTime: 0 });
    client.setAccessToken(token);
    return client;
  };

  bots = new BotRunner({
    systemRepo,
    audits,
    tokenFor: (membership) => mintTokenForMembership(authDeps, membership),
    baseUrl,
    fetch: fetchImpl,
    timeoutMs: options.botTimeoutMs ?? 10_000,
    onRun: options.onBotRun,
  });
  queue = new SubscriptionQueue({
    systemRepo,
    runBot: (bot, input, requester, headers) =>
      bots.run(bot as WithId<Bot>, { input, contentType: 'application/fhir+json', requester, headers }),
    maxAttempts: options.subscriptionMaxAttempts,
    retryDelayMs: options.subscriptionRetryDelayMs,
  });

  cron = new CronScheduler({
    systemRepo,
    db,
    runBot: (bot) => bots.run(bot, { input: bot, contentType: 'application/fhir+json', requester: undefined }),
  });
  cron.start();

  registerBotOperations(router, bots);
  registerTerminology(router);
  registerWebSocketSubscriptions(router, { key, issuer, baseUrl, now });
  live = new WebSocketSubscriptions({
    key,
    issuer,
    baseUrl,
    now,
    systemRepo,
    attachments,
    authenticate: (token) => authenticate(authDeps, `Bearer ${token}`),
    limits: options.webSocketLimits,
    heartbeatMs: options.webSocketHeartbeatMs,
  });

  app.use('*', medplumCors(options.corsOrigins ?? []));
  const rateFromEnv = Number(process.env.EMBEDDED_REQUEST_RATE_LIMIT);
  app.use(
    '*',
    requestRateLimit(
      options.requestRateLimit ??
        (Number.isInteger(rateFromEnv) && rateFromEnv !== 0 ? rateFromEnv : DEFAULT_REQUEST_RATE_LIMIT),
      () => (options.clock ?? (() => new Date()))().getTime(),
    ),
  );
  app.use('*', async (c, next) => {
    const length = Number(c.req.header('content-length') ?? '0');
    if (length > maxBodyBytes) {
      return outcomeResponse(badRequest(`Request body exceeds ${maxBodyBytes} bytes`), 413);
    }
    await next();
  });
  app.route('/', createAuthRoutes(authDeps));
  app.route('/', createAdminRoutes(authDeps));
  app.all(`${FHIR_PATH}*`, (c) =>
    serveFhir(
      {
        method: c.req.method,
        url: new URL(c.req.url),
        headers: headerRecord(c.req.raw.headers),
        body: async () => new Uint8Array(await c.req.arrayBuffer()),
      },
      true,
    ),
  );
  app.get('/storage/:id/:versionId', (c) => serveStorage(c.req.raw, attachments, systemRepo));
  app.get('/ws/subscriptions-r4', webSocketSubscriptionsEndpoint);
  app.get('/healthcheck', (c) => c.json({ ok: true, version: MEDPLUM_VERSION }));
  app.notFound(() => outcomeResponse(notFound));
  app.onError(thrownResponse);

  return {
    fetch: fetchImpl,
    baseUrl,
    app,
    db,
    systemRepo,
    key,
    subscriptions: queue,
    webSocketSubscriptions: live,
    cron: cron as CronScheduler,
    quota,
    clientFor,
    close() {
      cron?.stop();
      queue?.close();
      live?.close();
      db.close();
    },
  };
}

function withHeader(response: Response, name: string, value: string): Response {
  response.headers.set(name, value);
  return response;
}

/** Refused at the port before any work: Medplum's 429 outcome (or 503), with when to try again. */
function tooBusy(status: 429 | 503): Response {
  const outcome = structuredClone(tooManyRequests);
  outcome.issue[0].diagnostics = status === 429 ? 'Too many requests in flight from this caller' : 'Server at capacity';
  const response = outcomeResponse(outcome, status);
  response.headers.set('retry-after', '1');
  response.headers.set('ratelimit', `"inflight-${status === 429 ? 'caller' : 'total'}";r=0;t=1`);
  return response;
}

/** Whose call this is, before authentication: the token's login (its `login_id` claim), else the header. */
function sessionKey(authorization: string | undefined): string {
  const token = authorization?.replace(/^Bearer\s+/i, '') ?? '';
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      login_id?: unknown;
      sub?: unknown;
    };
    const key = payload.login_id ?? payload.sub;
    if (typeof key === 'string' && key.length <= 100) {
      return key;
    }
  } catch {
    // not a JWT: keyed by what was sent (bounded)
  }
  return token.slice(0, 200);
}
