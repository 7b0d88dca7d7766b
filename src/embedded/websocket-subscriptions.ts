import { randomUUID } from 'node:crypto';
import type { WithId } from '@medplum/core';
import {
  allOk,
  badRequest,
  createReference,
  getReferenceString,
  isResourceType,
  normalizeErrorString,
  notFound,
  Operator,
  resolveId,
  tooManyRequests,
} from '@medplum/core';
import type { FhirRouter } from '@medplum/fhir-router';
import type { Bundle, OperationOutcome, Parameters, Resource, Subscription } from '@medplum/fhirtypes';
import type { Context } from 'hono';
import type { AttachmentUrls } from './attachments';
import type { SigningKey } from './auth/keys';
import { ACCESS_TOKEN_SECONDS, type AccessTokenClaims, issueAccessToken, verifyToken } from './auth/tokens';
import type { CallerContext } from './context';
import { outcomeResponse } from './fhir-http';
import type { ResourceChange, SqliteRepository } from './store/repo';
import { matchesSubscription } from './subscriptions';

/**
 * Medplum's WebSocket subscriptions (5.1.29), which @medplum/core's SubscriptionManager (Medplum's apps:
 * the Provider app's chat and counters) uses: it creates a `websocket` Subscription, asks
 * `GET Subscription/:id/$get-ws-binding-token` for a token, opens `ws/subscriptions-r4` and sends
 * `bind-with-token`; the server answers a handshake Bundle, then an event-notification Bundle for each
 * matching write the subscriber may read, a heartbeat Bundle every 10 s, and `pong` to each `ping`.
 * Medplum: packages/server/src/fhir/operations/getwsbindingtoken.ts, packages/server/src/ws/subscriptions.ts,
 * packages/server/src/ws/routes.ts, packages/server/src/workers/subscription.ts.
 *
 * This module holds the protocol and no socket library: the HTTP server's `upgrade` hook
 * (websocket-server.ts, Node only) hands each socket to `WebSocketSubscriptions.open`.
 */

/** The Project feature that turns WebSocket subscriptions on, on Medplum (packages/server/src/config/types.ts). */
const FEATURE = 'websocket-subscriptions';

/** What Medplum answers `$get-ws-binding-token` in a project without the feature (getwsbindingtoken.ts). */
const NOT_ENABLED = badRequest('WebSocket subscriptions not enabled for current project');

/** The socket's path, as Medplum routes it (packages/server/src/ws/routes.ts). */
export const WEBSOCKET_SUBSCRIPTIONS_PATH = '/ws/subscriptions-r4';

/** The claims a binding token adds to an access token (getwsbindingtoken.ts, AdditionalWsBindingClaims). */
interface BindingClaims extends AccessTokenClaims {
  subscription_id: string;
  membership_id: string;
}

/** Checked in this order on every bind and unbind, as Medplum (ws/subscriptions.ts REQUIRED_TOKEN_FIELDS). */
const REQUIRED_CLAIMS = ['subscription_id', 'login_id', 'membership_id'] as const;

/** Medplum's answer to a token that does not verify (bad signature, another issuer, expired). */
const TOKEN_INVALID = badRequest('Token failed to validate. Check token expiry.');

export interface BindingTokenDeps {
  key: SigningKey;
  issuer: string;
  /** The public base URL, ending in `/`: the socket's URL is built from it, as every absolute URL here. */
  baseUrl: string;
  now: () => Date;
}

/**
 * `GET Subscription/:id/$get-ws-binding-token`, the one route Medplum registers for it
 * (packages/server/src/fhir/routes.ts); other methods and the type level stay 404, as on Medplum. In a
 * project without the feature: 400 before the Subscription is even read. Otherwise the caller must be able
 * to read the Subscription, a `websocket` one with criteria on a resource type, and gets a token for one
 * hour: an access token of her login (as Medplum's, it also works as one) signed with this server's key,
 * with the Subscription and her membership as claims.
 */
export function registerWebSocketSubscriptions(router: FhirRouter, deps: BindingTokenDeps): void {
  router.add('GET', 'Subscription/:id/$get-ws-binding-token', async (req, repo) => {
    const callerRepo = repo as unknown as SqliteRepository;
    const { project, login, membership, profile } = callerRepo.caller;
    if (!project.features?.includes(FEATURE)) {
      return [NOT_ENABLED];
    }
    const userId = login?.user ? resolveId(login.user) : undefined;
    if (!login?.id || !userId || !membership.id) {
      return [badRequest('Login missing user')];
    }
    let subscription: Subscription;
    try {
      subscription = await callerRepo.readResource<Subscription>('Subscription', req.params.id);
    } catch (err) {
      return [badRequest(`Error reading subscription: ${normalizeErrorString(err)}`)];
    }
    if (subscription.channel?.type !== 'websocket') {
      return [badRequest(`Invalid channel type for this operation: ${subscription.channel?.type}`)];
    }
    if (!subscription.criteria) {
      return [badRequest('Invalid empty Subscription criteria')];
    }
    const criteriaType = subscription.criteria.split('?')[0];
    if (!isResourceType(criteriaType)) {
      return [
        badRequest(
          `Invalid Subscription criteria: '${subscription.criteria}'. '${criteriaType}' is not a valid resource type.`,
        ),
      ];
    }
    const now = deps.now();
    const token = await issueAccessToken(
      deps.key,
      deps.issuer,
      {
        userId,
        loginId: login.id,
        profile: getReferenceString(profile) ?? '',
        scope: login.scope ?? 'openid',
        clientId: login.client ? resolveId(login.client) : undefined,
      },
      now,
      { subscription_id: req.params.id, membership_id: membership.id },
    );
    const expiration = new Date((Math.floor(now.getTime() / 1000) + ACCESS_TOKEN_SECONDS) * 1000);
    const output: Parameters = {
      resourceType: 'Parameters',
      parameter: [
        { name: 'token', valueString: token },
        { name: 'expiration', valueDateTime: expiration.toISOString() },
        { name: 'subscription', valueString: req.params.id },
        { name: 'websocket-url', valueUrl: webSocketUrl(deps.baseUrl) },
      ],
    };
    return [allOk, output];
  });
}

/** `ws://` or `wss://` for the public base URL, then the socket's path (getwsbindingtoken.ts). */
export function webSocketUrl(baseUrl: string): string {
  return `${baseUrl.replace(/^http:\/\//, 'ws://').replace(/^https:\/\//, 'wss://')}${WEBSOCKET_SUBSCRIPTIONS_PATH.slice(1)}`;
}

/**
 * `ws/subscriptions-r4` reached as a plain HTTP request: the socket is served on the Node server's
 * `upgrade` event (websocket-server.ts), before any HTTP route. A plain GET is 404, as Medplum's HTTP
 * routes answer that path; a handshake that gets here came through a listener without that hook (an
 * in-process fetch, a server started without `serveWebSocketSubscriptions`): 400, saying so (RFC 6455
 * section 4.2.2: an HTTP error instead of 101).
 */
export function webSocketSubscriptionsEndpoint(c: Context): Response {
  return c.req.header('upgrade')?.toLowerCase() === 'websocket'
    ? outcomeResponse(badRequest('WebSocket subscriptions are not served on this listener'))
    : outcomeResponse(notFound);
}

/** What the protocol needs of a socket (ws's WebSocket has these). */
export interface SubscriberSocket {
  send(text: string): void;
  /** Bytes sent and not yet taken by the client. */
  readonly bufferedAmount: number;
  close(code: number, reason: string): void;
  terminate(): void;
}

/** What the socket layer tells the protocol of one connection. */
export interface SubscriberConnection {
  receive(text: string): void;
  closed(): void;
}

/**
 * Bounds, so that a crowd cannot exhaust the server's memory. Medplum bounds bindings per user
 * (`defaultMaxUserWebSocketSubscriptions`, 20, or the Project's `maxUserWebSocketSubscriptions` system
 * setting, counted across her sockets); the others are this server's.
 */
export interface WebSocketLimits {
  /** Open sockets in all; past it the handshake is 503. */
  sockets: number;
  /** Open sockets of one client address; past it the handshake is 503. */
  socketsPerAddress: number;
  /** Sockets one user (a profile) has bound on; another socket's first bind is refused and it is closed. */
  socketsPerUser: number;
  /** Medplum's default bindings per user (a profile), across her sockets. */
  bindingsPerUser: number;
  /** Bindings in all. */
  bindings: number;
  /** A socket with nothing bound is closed after this long without a message (SubscriptionManager pings every 5 s). */
  idleUnboundMs: number;
  /** A client's own messages waiting for their turn; a socket past it is terminated. */
  queuedPerSocket: number;
  /** Bytes sent to a socket that its client has not taken; a socket past it is terminated. */
  unsentBytesPerSocket: number;
}

export const DEFAULT_WEBSOCKET_LIMITS: WebSocketLimits = {
  sockets: 1024,
  socketsPerAddress: 64,
  socketsPerUser: 16,
  bindingsPerUser: 20,
  bindings: 10_000,
  idleUnboundMs: 60_000,
  queuedPerSocket: 64,
  unsentBytesPerSocket: 4 * 1024 * 1024,
};

/** Medplum's heartbeat period (packages/server/src/heartbeat.ts DEFAULT_HEARTBEAT_MS). */
export const HEARTBEAT_MS = 10_000;

/**
 * How long a websocket Subscription lives: Medplum keeps one in its Redis cache only, for 24 hours
 * (packages/server/src/fhir/repo.ts isCacheOnly, fhir/repository/resource-cache.ts). Here it is stored like
 * any resource, and removed once that old and not bound: SubscriptionManager makes a new one for each
 * criteria each time an app opens, which would otherwise pile up.
 */
export const WEBSOCKET_SUBSCRIPTION_LIFETIME_MS = 24 * 60 * 60_000;
/** At most one sweep for them an hour, started by a socket opening (no timer of its own). */
const SWEEP_EVERY_MS = 60 * 60_000;
const SWEEP_BATCH = 100;

export interface WebSocketSubscriptionsOptions extends BindingTokenDeps {
  /** The system's view of the store: reads the bound Subscriptions. */
  systemRepo: SqliteRepository;
  /** The server's own authentication of a bearer token (login not revoked, current membership and policy). */
  authenticate(token: string): Promise<CallerContext>;
  /** Attachment URLs presigned for the subscriber, as Medplum rewrites a notification for her. */
  attachments?: AttachmentUrls;
  limits?: Partial<WebSocketLimits>;
  heartbeatMs?: number;
}

interface Binding {
  subscription: WithId<Subscription>;
  /** The criteria's resource type: a cheap first filter. */
  resourceType: string;
  projectId: string;
  /** The binding token: each notification authenticates with it (Medplum: getLoginForAccessToken). */
  token: string;
  user: string;
  expiresAt: number;
}

interface Connection {
  socket: SubscriberSocket;
  address: string;
  /** The user of its first binding: whose socket it is for `socketsPerUser`. */
  user?: string;
  bindings: Map<string, Binding>;
  lastHeard: number;
  /** Its messages and notifications, one at a time and in order. */
  turn: Promise<void>;
  queued: number;
  open: boolean;
}

/**
 * The sockets of `ws/subscriptions-r4` and what is bound on them, told of every committed change. A
 * notification goes to a binding whose Subscription the change matches (the server's one matcher,
 * subscriptions.ts), once the subscriber's token still authenticates (her login, her membership), her
 * project still has the feature and her CURRENT policy lets her read the resource (Medplum's
 * satisfiesAccessPolicy for websocket channels); else nothing. A binding whose token no longer
 * authenticates is dropped, as Medplum drops a dead one.
 */
export class WebSocketSubscriptions {
  private readonly connections = new Set<Connection>();
  private readonly limits: WebSocketLimits;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastSweep = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: WebSocketSubscriptionsOptions) {
    this.limits = { ...DEFAULT_WEBSOCKET_LIMITS, ...options.limits };
  }

  /** Open sockets and bindings now (tests, operators). */
  get counts(): { sockets: number; bindings: number } {
    let bindings = 0;
    for (const connection of this.connections) {
      bindings += connection.bindings.size;
    }
    return { sockets: this.connections.size, bindings };
  }

  /** Whether one more socket from `address` may open (asked before the handshake). */
  admits(address: string): boolean {
    if (this.connections.size >= this.limits.sockets) {
      return false;
    }
    let fromAddress = 0;
    for (const connection of this.connections) {
      fromAddress += connection.address === address ? 1 : 0;
    }
    return fromAddress < this.limits.socketsPerAddress;
  }

  open(socket: SubscriberSocket, address: string): SubscriberConnection {
    const connection: Connection = {
      socket,
      address,
      bindings: new Map(),
      lastHeard: this.now(),
      turn: Promise.resolve(),
      queued: 0,
      open: true,
    };
    this.connections.add(connection);
    this.timer ??= setInterval(() => this.beat(), this.options.heartbeatMs ?? HEARTBEAT_MS);
    this.timer.unref?.();
    this.sweep();
    return {
      receive: (text) => this.receive(connection, text),
      closed: () => this.forget(connection),
    };
  }

  /** Called after COMMIT with the transaction's changes. */
  onCommit(changes: ResourceChange[]): void {
    if (this.connections.size === 0) {
      return;
    }
    const now = this.now();
    for (const change of changes) {
      const resource = change.resource;
      if (resource.resourceType === 'AuditEvent') {
        continue;
      }
      if (resource.resourceType === 'Subscription') {
        this.subscriptionChanged(change);
        // Medplum never notifies of websocket Subscriptions themselves (workers/subscription.ts).
        if (resource.channel?.type === 'websocket') {
          continue;
        }
      }
      for (const connection of this.connections) {
        for (const binding of connection.bindings.values()) {
          if (binding.resourceType !== resource.resourceType || binding.projectId !== resource.meta?.project) {
            continue;
          }
          if (binding.expiresAt <= now) {
            connection.bindings.delete(binding.subscription.id);
            continue;
          }
          if (this.matches(binding.subscription, change)) {
            this.enqueue(connection, () => this.notify(connection, binding, change));
          }
        }
      }
    }
  }

  /** Closes every socket (1001, going away) and stops the heartbeat. */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const connection of this.connections) {
      connection.open = false;
      safely(() => connection.socket.close(1001, 'Server shutting down'));
    }
    this.connections.clear();
  }

  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) {
      return;
    }
    this.lastSweep = now;
    this.removeExpired(now).catch(() => undefined);
  }

  private async removeExpired(now: number): Promise<void> {
    const { systemRepo } = this.options;
    const expired = await systemRepo.searchResources<Subscription>({
      resourceType: 'Subscription',
      filters: [
        { code: 'type', operator: Operator.EQUALS, value: 'websocket' },
        {
          code: '_lastUpdated',
          operator: Operator.LESS_THAN,
          value: new Date(now - WEBSOCKET_SUBSCRIPTION_LIFETIME_MS).toISOString(),
        },
      ],
      count: SWEEP_BATCH,
    });
    const bound = new Set<string>();
    for (const connection of this.connections) {
      for (const id of connection.bindings.keys()) {
        bound.add(id);
      }
    }
    for (const subscription of expired) {
      if (!bound.has(subscription.id)) {
        await systemRepo.deleteResource('Subscription', subscription.id);
      }
    }
  }

  private now(): number {
    return this.options.now().getTime();
  }

  private matches(subscription: Subscription, change: ResourceChange): boolean {
    try {
      return matchesSubscription(subscription, change);
    } catch {
      // Criteria that cannot be evaluated match nothing (Medplum logs and goes on).
      return false;
    }
  }

  private receive(connection: Connection, text: string): void {
    connection.lastHeard = this.now();
    let message: { type?: unknown; payload?: { token?: unknown } };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    if (message?.type === 'ping') {
      this.send(connection, { type: 'pong' });
      return;
    }
    const token = message?.payload?.token;
    if (typeof token !== 'string' || token.length === 0) {
      return;
    }
    if (message.type !== 'bind-with-token' && message.type !== 'unbind-from-token') {
      return;
    }
    if (connection.queued >= this.limits.queuedPerSocket) {
      // A client that sends faster than it can be answered: cut off, not buffered without end.
      this.cutOff(connection);
      return;
    }
    connection.queued++;
    const work =
      message.type === 'bind-with-token' ? () => this.bind(connection, token) : () => this.unbind(connection, token);
    this.enqueue(connection, () => work().finally(() => connection.queued--));
  }

  /** Runs `work` after what the connection has waiting, in order. */
  private enqueue(connection: Connection, work: () => Promise<void>): void {
    if (connection.open) {
      connection.turn = connection.turn.then(() => (connection.open ? work() : undefined)).catch(() => undefined);
    }
  }

  private cutOff(connection: Connection): void {
    connection.open = false;
    safely(() => connection.socket.terminate());
    this.forget(connection);
  }

  /** The token's claims, or undefined once the socket was told why not (Medplum's verifyWsToken). */
  private async verify(connection: Connection, token: string): Promise<BindingClaims | undefined> {
    let claims: BindingClaims;
    try {
      claims = await verifyToken<BindingClaims>(this.options.key, this.options.issuer, token, this.options.now());
    } catch {
      this.send(connection, TOKEN_INVALID);
      return undefined;
    }
    for (const claim of REQUIRED_CLAIMS) {
      if (typeof claims[claim] !== 'string' || claims[claim].length === 0) {
        this.send(
          connection,
          badRequest(`Token claims missing ${claim}. Make sure you are sending the correct token.`),
        );
        this.cutOff(connection);
        return undefined;
      }
    }
    return claims;
  }

  private async bind(connection: Connection, token: string): Promise<void> {
    const claims = await this.verify(connection, token);
    if (!claims) {
      return;
    }
    // Stricter than Medplum, which checks the login only at each notification: a revoked login, or a
    // token whose membership is not its login's, binds nothing.
    const caller = await this.options.authenticate(token).catch(() => undefined);
    if (!caller || caller.login?.id !== claims.login_id || caller.membership.id !== claims.membership_id) {
      this.send(connection, TOKEN_INVALID);
      return;
    }
    const subscription = await this.options.systemRepo
      .readResource<Subscription>('Subscription', claims.subscription_id)
      .catch(() => undefined);
    const repo = this.options.systemRepo.withCaller(caller);
    if (
      subscription?.channel?.type !== 'websocket' ||
      subscription.meta?.project !== caller.project.id ||
      !subscription.criteria ||
      !repo.readableCopy(subscription)
    ) {
      // Medplum: a Subscription it cannot find is not bound, and the client is told nothing.
      return;
    }
    if (!connection.open) {
      return;
    }
    const user = getReferenceString(caller.profile) ?? claims.login_id;
    if (!connection.user && this.socketsOf(user) >= this.limits.socketsPerUser) {
      this.send(connection, capacity(`Too many WebSocket connections for this user: ${this.limits.socketsPerUser}`));
      connection.open = false;
      safely(() => connection.socket.close(1008, 'Too many connections'));
      this.forget(connection);
      return;
    }
    if (!connection.bindings.has(subscription.id)) {
      const refusal = this.bindingRefusal(user, caller);
      if (refusal) {
        this.send(connection, refusal);
        return;
      }
    }
    connection.user ??= user;
    connection.bindings.set(subscription.id, {
      subscription,
      resourceType: subscription.criteria.split('?')[0],
      projectId: caller.project.id as string,
      token,
      user,
      expiresAt: (claims.exp ?? 0) * 1000,
    });
    this.send(connection, statusBundle([subscription.id], 'handshake', this.options.now()));
  }

  private bindingRefusal(user: string, caller: CallerContext): OperationOutcome | undefined {
    const { bindings } = this.counts;
    if (bindings >= this.limits.bindings) {
      return capacity('Server at capacity for WebSocket subscriptions');
    }
    // Medplum counts a user's bindings across her sockets (ws/subscriptions.ts checkWebSocketSubscriptionLimit).
    const max =
      caller.project.systemSetting?.find((s) => s.name === 'maxUserWebSocketSubscriptions')?.valueInteger ??
      this.limits.bindingsPerUser;
    let held = 0;
    for (const other of this.connections) {
      for (const binding of other.bindings.values()) {
        held += binding.user === user ? 1 : 0;
      }
    }
    return held >= max
      ? badRequest(`User has exceeded allotted maximum number of concurrent WebSocket subscriptions: ${max}`)
      : undefined;
  }

  private socketsOf(user: string): number {
    let count = 0;
    for (const connection of this.connections) {
      count += connection.user === user ? 1 : 0;
    }
    return count;
  }

  private async unbind(connection: Connection, token: string): Promise<void> {
    const claims = await this.verify(connection, token);
    if (claims) {
      connection.bindings.delete(claims.subscription_id);
    }
  }

  private async notify(connection: Connection, binding: Binding, change: ResourceChange): Promise<void> {
    if (connection.bindings.get(binding.subscription.id) !== binding) {
      return;
    }
    const caller = await this.options.authenticate(binding.token).catch(() => undefined);
    if (!caller) {
      // Dead (login revoked, membership gone, token expired): dropped, as Medplum purges it.
      connection.bindings.delete(binding.subscription.id);
      return;
    }
    if (!caller.project.features?.includes(FEATURE)) {
      return;
    }
    const repo = this.options.systemRepo.withCaller(caller);
    const visible = repo.readableCopy(change.resource);
    if (!visible) {
      return;
    }
    const bundle = notificationBundle(this.options.baseUrl, binding.subscription.id, visible, this.options.now());
    this.send(connection, this.options.attachments ? await this.options.attachments.presign(bundle, repo) : bundle);
  }

  private subscriptionChanged(change: ResourceChange): void {
    const subscription = change.resource as WithId<Subscription>;
    for (const connection of this.connections) {
      const binding = connection.bindings.get(subscription.id);
      if (!binding) {
        continue;
      }
      const resourceType = subscription.criteria?.split('?')[0] ?? '';
      if (
        change.interaction === 'delete' ||
        subscription.channel?.type !== 'websocket' ||
        !isResourceType(resourceType)
      ) {
        connection.bindings.delete(subscription.id);
      } else {
        binding.subscription = subscription;
        binding.resourceType = resourceType;
      }
    }
  }

  /** Each heartbeat: a heartbeat Bundle to every socket with bindings (Medplum), idle unbound sockets closed. */
  private beat(): void {
    const now = this.options.now();
    for (const connection of this.connections) {
      if (connection.bindings.size > 0) {
        this.send(connection, statusBundle([...connection.bindings.keys()], 'heartbeat', now));
      } else if (now.getTime() - connection.lastHeard >= this.limits.idleUnboundMs) {
        connection.open = false;
        safely(() => connection.socket.close(1000, 'Idle'));
        this.forget(connection);
      }
    }
  }

  private send(connection: Connection, message: unknown): void {
    if (!connection.open) {
      return;
    }
    if (connection.socket.bufferedAmount > this.limits.unsentBytesPerSocket) {
      // A client that does not read what it is sent would have the server hold it all.
      this.cutOff(connection);
      return;
    }
    safely(() => connection.socket.send(JSON.stringify(message)));
  }

  private forget(connection: Connection): void {
    connection.open = false;
    connection.bindings.clear();
    this.connections.delete(connection);
    if (this.connections.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

function capacity(diagnostics: string): OperationOutcome {
  const outcome = structuredClone(tooManyRequests);
  outcome.issue[0].diagnostics = diagnostics;
  return outcome;
}

function safely(act: () => void): void {
  try {
    act();
  } catch {
    // a socket that is going away: its close event does the rest
  }
}

/** A handshake or heartbeat Bundle: one active SubscriptionStatus per Subscription (ws/subscriptions.ts). */
export function statusBundle(subscriptionIds: string[], type: 'handshake' | 'heartbeat', now: Date): Bundle {
  return {
    id: randomUUID(),
    resourceType: 'Bundle',
    type: 'history',
    timestamp: now.toISOString(),
    entry: subscriptionIds.map((id) => ({
      resource: {
        resourceType: 'SubscriptionStatus',
        id: randomUUID(),
        status: 'active',
        type,
        subscription: { reference: `Subscription/${id}` },
      },
    })),
  };
}

/**
 * An event-notification Bundle as Medplum sends it on a socket (ws/subscriptions.ts
 * createSubEventNotification, with the resource included): the status, whose event's focus is the
 * resource, then the resource itself as the subscriber reads it.
 */
export function notificationBundle(
  baseUrl: string,
  subscriptionId: string,
  resource: WithId<Resource>,
  now: Date,
): Bundle {
  const timestamp = now.toISOString();
  return {
    id: randomUUID(),
    resourceType: 'Bundle',
    type: 'history',
    timestamp,
    entry: [
      {
        resource: {
          id: randomUUID(),
          resourceType: 'SubscriptionStatus',
          status: 'active',
          type: 'event-notification',
          subscription: { reference: `Subscription/${subscriptionId}` },
          notificationEvent: [{ eventNumber: '0', timestamp, focus: createReference(resource) }],
        },
      },
      { resource, fullUrl: `${baseUrl}fhir/R4/${resource.resourceType}/${resource.id}` },
    ],
  };
}
