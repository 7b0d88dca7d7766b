import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { MedplumClient, type WithId } from '@medplum/core';
import type {
  Bundle,
  Communication,
  OperationOutcome,
  Parameters,
  Project,
  Subscription,
  SubscriptionStatus,
} from '@medplum/fhirtypes';
import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clinician } from '../../src/clinician';
import { issueAccessToken } from '../../src/embedded/auth/tokens';
import { serveWebSocketSubscriptions } from '../../src/embedded/websocket-server';
import { webSocketUrl } from '../../src/embedded/websocket-subscriptions';
import { direct, executeBot, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend, type TestBackendOptions } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { freshPatient } from '../support/patients';

/**
 * WebSocket subscriptions as Medplum 5.1.29 serves them and @medplum/core's SubscriptionManager (the
 * Provider app's chat and counters) uses them: a `websocket` Subscription, then
 * `GET Subscription/:id/$get-ws-binding-token`, then `ws/subscriptions-r4` with `bind-with-token`
 * (packages/server/src/fhir/operations/getwsbindingtoken.ts, packages/server/src/ws/subscriptions.ts,
 * packages/server/src/workers/subscription.ts).
 */

interface Served {
  backend: TestBackend;
  /** http://127.0.0.1:<port>/ */
  origin: string;
  close(): void;
}

async function serveBackend(options: TestBackendOptions = {}): Promise<Served> {
  const backend = await startTestBackend(options);
  const server = serve({ fetch: backend.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  serveWebSocketSubscriptions(server as import('node:http').Server, backend.webSocketSubscriptions);
  return {
    backend,
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => {
      backend.close();
      server.close();
    },
  };
}

const NOT_ENABLED = 'WebSocket subscriptions not enabled for current project';
const TOKEN_INVALID = 'Token failed to validate. Check token expiry.';

function expectOutcome(answer: { status: number; body: unknown }, status: number, text: string): void {
  expect(answer.status).toBe(status);
  const outcome = answer.body as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue?.[0]).toMatchObject({ severity: 'error', details: { text } });
}

const liveSubscription = (criteria: string): Subscription => ({
  resourceType: 'Subscription',
  status: 'active',
  reason: 'as SubscriptionManager makes it',
  criteria,
  channel: { type: 'websocket' },
});

async function bindingToken(backend: TestBackend, token: string, subscriptionId: string): Promise<string> {
  const answer = await direct(backend, token, 'GET', fhirPath(`Subscription/${subscriptionId}/$get-ws-binding-token`));
  expect(answer.status).toBe(200);
  return (answer.body as Parameters).parameter?.find((p) => p.name === 'token')?.valueString as string;
}

/** A raw client of `ws/subscriptions-r4`: what it was sent, and whether it was closed. */
interface RawSocket {
  messages: unknown[];
  closed: Promise<void>;
  isClosed(): boolean;
  send(message: unknown): void;
  close(): void;
  /** Resolves with the first message (from now on, or already received) that `test` accepts. */
  next<T>(test: (message: unknown) => boolean, ms?: number): Promise<T>;
}

function openSocket(origin: string): Promise<RawSocket> {
  const socket = new WebSocket(`${origin.replace('http://', 'ws://')}ws/subscriptions-r4`);
  const messages: unknown[] = [];
  const waiters: (() => void)[] = [];
  let closed = false;
  const closedPromise = new Promise<void>((resolve) => {
    socket.addEventListener('close', () => {
      closed = true;
      resolve();
    });
  });
  socket.addEventListener('message', (event) => {
    messages.push(JSON.parse(String(event.data)));
    for (const wake of waiters.splice(0)) {
      wake();
    }
  });
  const raw: RawSocket = {
    messages,
    closed: closedPromise,
    isClosed: () => closed,
    send: (message) => socket.send(JSON.stringify(message)),
    close: () => socket.close(),
    next<T>(test: (message: unknown) => boolean, ms = 5_000): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no such message in ${ms} ms: ${JSON.stringify(messages)}`)),
          ms,
        );
        const look = () => {
          const found = messages.find(test);
          if (found !== undefined) {
            clearTimeout(timer);
            resolve(found as T);
          } else {
            waiters.push(look);
          }
        };
        look();
      });
    },
  };
  return new Promise((resolve, reject) => {
    socket.addEventListener('open', () => resolve(raw));
    socket.addEventListener('error', () => reject(new Error('the socket did not open')));
  });
}

const statusOf = (message: unknown): SubscriptionStatus | undefined => {
  const resource = (message as Bundle)?.entry?.[0]?.resource;
  return resource?.resourceType === 'SubscriptionStatus' ? resource : undefined;
};
const isStatus = (type: string, subscriptionId?: string) => (message: unknown) =>
  statusOf(message)?.type === type &&
  (!subscriptionId || statusOf(message)?.subscription?.reference === `Subscription/${subscriptionId}`);
const isOutcome = (text: string) => (message: unknown) =>
  (message as OperationOutcome)?.resourceType === 'OperationOutcome' &&
  (message as OperationOutcome).issue?.[0]?.details?.text === text;

/** A thread the clinician opens as the Provider app's Messages does: the header Communication. */
async function openThread(backend: TestBackend, tenant: 'northwind' | 'southridge') {
  const clinician = await demoClinician(backend, tenant);
  const patient = await freshPatient(backend, { tenant, state: 'CA' });
  const me = { reference: clinician.profile.reference as string };
  const header = await clinician.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    subject: { reference: `Patient/${patient.patient.id}` },
    sender: me,
    recipient: [{ reference: `Patient/${patient.patient.id}` }, me],
    topic: { text: 'Live updates' },
  });
  return { clinician, patient, header };
}

/** A MedplumClient of the clinician over HTTP, as the Provider app's (its profile loaded: SubscriptionManager needs it). */
async function httpClient(origin: string, who: Clinician, projectId: string): Promise<MedplumClient> {
  const client = new MedplumClient({ baseUrl: origin, cacheTime: 0 });
  await client.setActiveLogin({
    accessToken: who.medplum.getAccessToken() as string,
    refreshToken: '',
    project: { reference: `Project/${projectId}` },
    profile: who.profile,
  });
  return client;
}

describe('live updates on a project with the feature (the platform’s)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveBackend();
  });
  afterAll(() => served?.close());

  it('a clinician’s SubscriptionManager hears of a patient’s message in her thread; an identical subscription of the other tenant’s clinician hears nothing', async () => {
    const { backend, origin } = served;
    const { clinician, patient, header } = await openThread(backend, 'northwind');
    const outsider = await demoClinician(backend, 'southridge');
    const criteria = `Communication?part-of=Communication/${header.id}`;
    const heard: { tenant: string; bundle: Bundle }[] = [];
    const clients: MedplumClient[] = [];
    const connected: Promise<void>[] = [];
    for (const [tenant, who] of [
      ['northwind', clinician],
      ['southridge', outsider],
    ] as const) {
      const client = await httpClient(origin, who, backend.project.id as string);
      clients.push(client);
      const emitter = client.subscribeToCriteria(criteria);
      connected.push(new Promise((resolve) => emitter.addEventListener('connect', () => resolve())));
      emitter.addEventListener('message', (event) => heard.push({ tenant, bundle: event.payload }));
    }
    try {
      await Promise.all(connected);
      // The patient answers in her thread as the gateway has her do (bots/send-message.ts).
      const sent = await executeBot(backend, patient.token, 'send-message', {
        value: { thread: header.id, text: 'My readings are in' },
      });
      expect(sent.status).toBe(200);
      const message = await until(() => heard.find((h) => h.tenant === 'northwind')?.bundle);
      const status = message.entry?.[0]?.resource as SubscriptionStatus;
      expect(status).toMatchObject({
        resourceType: 'SubscriptionStatus',
        status: 'active',
        type: 'event-notification',
        notificationEvent: [{ eventNumber: '0' }],
      });
      expect(message).toMatchObject({ resourceType: 'Bundle', type: 'history' });
      const written = message.entry?.[1]?.resource as WithId<Communication>;
      expect(written).toMatchObject({
        resourceType: 'Communication',
        partOf: [{ reference: `Communication/${header.id}` }],
        payload: [{ contentString: 'My readings are in' }],
      });
      expect(status.notificationEvent?.[0]?.focus?.reference).toBe(`Communication/${written.id}`);
      expect(message.entry?.[1]?.fullUrl).toBe(`${backend.baseUrl}fhir/R4/Communication/${written.id}`);
      // The other tenant's clinician: bound (her handshake came), told nothing of it.
      await backend.subscriptions.idle();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(heard.filter((h) => h.tenant === 'southridge')).toEqual([]);
    } finally {
      for (const client of clients) {
        client.getSubscriptionManager().closeWebSocket();
      }
    }
  });

  it('answers $get-ws-binding-token as Medplum: token, expiration, subscription, websocket-url on the public base URL', async () => {
    const { backend } = served;
    const clinician = await demoClinician(backend, 'northwind');
    const subscription = await clinician.medplum.createResource(liveSubscription('Task?status=ready'));
    const answer = await direct(
      backend,
      clinician.medplum.getAccessToken() as string,
      'GET',
      fhirPath(`Subscription/${subscription.id}/$get-ws-binding-token`),
    );
    expect(answer.status).toBe(200);
    const parameters = answer.body as Parameters;
    expect(parameters.parameter?.map((p) => p.name)).toEqual(['token', 'expiration', 'subscription', 'websocket-url']);
    const value = (name: string) => parameters.parameter?.find((p) => p.name === name);
    expect(value('subscription')?.valueString).toBe(subscription.id);
    expect(value('websocket-url')?.valueUrl).toBe('ws://embedded.medplum.local/ws/subscriptions-r4');
    expect(webSocketUrl('https://medplum.example.org/')).toBe('wss://medplum.example.org/ws/subscriptions-r4');
    const expiration = Date.parse(value('expiration')?.valueDateTime as string);
    expect(expiration - Date.now()).toBeGreaterThan(3_500_000);
    expect(expiration - Date.now()).toBeLessThanOrEqual(3_600_000);
    const token = value('token')?.valueString ?? '';
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as Record<
      string,
      unknown
    >;
    expect(claims).toMatchObject({ subscription_id: subscription.id, membership_id: expect.any(String) });
    // Not a websocket channel, a Subscription she cannot read: refused as Medplum refuses them.
    const restHook = await backend.systemRepo.createResource<Subscription>({
      ...liveSubscription('Task'),
      meta: { project: backend.project.id },
      channel: { type: 'rest-hook', endpoint: 'Bot/0b5e1c8e-0000-4000-8000-000000000009' },
    });
    const asAdmin = await direct(
      backend,
      backend.admin.getAccessToken() as string,
      'GET',
      fhirPath(`Subscription/${restHook.id}/$get-ws-binding-token`),
    );
    expectOutcome(asAdmin, 400, 'Invalid channel type for this operation: rest-hook');
    await backend.systemRepo.deleteResource('Subscription', restHook.id as string);
  });

  it('refuses on the socket, as Medplum: a forged token, an expired one, a plain access token (and closes); another’s Subscription gets no token', async () => {
    const { backend, origin } = served;
    const clinician = await demoClinician(backend, 'northwind');
    const outsider = await demoClinician(backend, 'southridge');
    const token = clinician.medplum.getAccessToken() as string;
    const subscription = await clinician.medplum.createResource(liveSubscription('Communication?status=completed'));
    const good = await bindingToken(backend, token, subscription.id as string);
    const claims = JSON.parse(Buffer.from(good.split('.')[1], 'base64url').toString()) as Record<string, string>;

    // Forged: the same claims, signed with a key that is not the server's.
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .sign(privateKey);
    // Expired: the server's own key, issued two hours ago.
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    const expired = await issueAccessToken(
      backend.key,
      backend.baseUrl,
      { userId: claims.sub, loginId: claims.login_id, profile: claims.profile, scope: claims.scope },
      twoHoursAgo,
      { subscription_id: subscription.id as string, membership_id: claims.membership_id },
    );
    const socket = await openSocket(origin);
    for (const bad of [forged, expired, `${good.slice(0, -4)}AAAA`]) {
      socket.messages.length = 0;
      socket.send({ type: 'bind-with-token', payload: { token: bad } });
      await socket.next(isOutcome(TOKEN_INVALID));
    }
    socket.send({ type: 'ping' });
    await socket.next((m) => (m as { type?: string }).type === 'pong');
    expect(socket.messages.some(isStatus('handshake'))).toBe(false);
    expect(backend.webSocketSubscriptions.counts.bindings).toBe(0);

    // A plain access token (what one has without a binding): Medplum's outcome, then the socket is cut.
    socket.send({ type: 'bind-with-token', payload: { token } });
    await socket.next(isOutcome('Token claims missing subscription_id. Make sure you are sending the correct token.'));
    await socket.closed;

    // Another tenant's clinician cannot read her Subscription: no token for it.
    const foreign = await direct(
      backend,
      outsider.medplum.getAccessToken() as string,
      'GET',
      fhirPath(`Subscription/${subscription.id}/$get-ws-binding-token`),
    );
    expect(foreign.status).toBe(400);
    expect((foreign.body as OperationOutcome).issue?.[0]?.details?.text).toMatch(/^Error reading subscription: /);

    // The good token binds: a handshake; unbinding and closing leave nothing bound.
    const again = await openSocket(origin);
    again.send({ type: 'bind-with-token', payload: { token: good } });
    await again.next(isStatus('handshake', subscription.id));
    expect(backend.webSocketSubscriptions.counts.bindings).toBe(1);
    again.send({ type: 'unbind-from-token', payload: { token: good } });
    await until(() => backend.webSocketSubscriptions.counts.bindings === 0 || undefined);
    again.send({ type: 'bind-with-token', payload: { token: good } });
    await until(() => backend.webSocketSubscriptions.counts.bindings === 1 || undefined);
    again.close();
    await again.closed;
    await until(() => backend.webSocketSubscriptions.counts.sockets === 0 || undefined);
    expect(backend.webSocketSubscriptions.counts.bindings).toBe(0);
  });

  it('checks her read access before each notification, under her current policy: a binding whose login was revoked hears nothing more', async () => {
    const { backend, origin } = served;
    const { clinician, patient, header } = await openThread(backend, 'northwind');
    const token = clinician.medplum.getAccessToken() as string;
    const subscription = await clinician.medplum.createResource(
      liveSubscription(`Communication?part-of=Communication/${header.id}`),
    );
    const socket = await openSocket(origin);
    socket.send({
      type: 'bind-with-token',
      payload: { token: await bindingToken(backend, token, subscription.id as string) },
    });
    await socket.next(isStatus('handshake', subscription.id));
    const say = (text: string) =>
      executeBot(backend, patient.token, 'send-message', { value: { thread: header.id, text } });
    expect((await say('first')).status).toBe(200);
    await socket.next(isStatus('event-notification', subscription.id));
    await clinician.medplum.signOut();
    socket.messages.length = 0;
    expect((await say('second')).status).toBe(200);
    await backend.subscriptions.idle();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(socket.messages.filter(isStatus('event-notification'))).toEqual([]);
    await until(() => backend.webSocketSubscriptions.counts.bindings === 0 || undefined);
    socket.close();
  });
});

describe('a project without the feature', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveBackend();
  });
  afterAll(() => served?.close());

  it('answers $get-ws-binding-token 400 "not enabled for current project", for a Subscription or not, for admins and clinicians alike', async () => {
    const { backend, origin } = served;
    const admin = backend.admin.getAccessToken() as string;
    const clinician = await demoClinician(backend, 'northwind');
    const subscription = await clinician.medplum.createResource(liveSubscription('Communication?status=completed'));
    const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
    await backend.systemRepo.updateResource<Project>({
      ...project,
      features: (project.features ?? []).filter((f) => f !== 'websocket-subscriptions'),
    });
    try {
      for (const [token, id] of [
        [admin, subscription.id],
        [admin, '0b5e1c8e-0000-4000-8000-000000000001'],
        [clinician.medplum.getAccessToken() as string, subscription.id],
      ]) {
        const answer = await direct(
          backend,
          token as string,
          'GET',
          fhirPath(`Subscription/${id}/$get-ws-binding-token`),
        );
        expectOutcome(answer, 400, NOT_ENABLED);
        expect((answer.body as OperationOutcome).issue?.[0]?.code).toBe('invalid');
      }
      // The socket opens, as on Medplum, but what one can hold binds nothing: outcome, then cut off.
      const socket = await openSocket(origin);
      socket.send({ type: 'bind-with-token', payload: { token: clinician.medplum.getAccessToken() } });
      await socket.next(
        isOutcome('Token claims missing subscription_id. Make sure you are sending the correct token.'),
      );
      await socket.closed;
    } finally {
      const current = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
      await backend.systemRepo.updateResource<Project>({ ...current, features: project.features });
    }
  });

  it('is GET at the instance level only: POST or the type level are 404, as Medplum routes them; no token is 401', async () => {
    const { backend } = served;
    const admin = backend.admin.getAccessToken() as string;
    for (const [method, path] of [
      ['POST', 'Subscription/0b5e1c8e-0000-4000-8000-000000000001/$get-ws-binding-token'],
      ['POST', 'Subscription/$get-ws-binding-token'],
      ['GET', 'Subscription/$get-ws-binding-token'],
    ]) {
      const answer = await direct(backend, admin, method, fhirPath(path), {
        body: method === 'POST' ? { resourceType: 'Parameters' } : undefined,
      });
      expect(answer.status, `${method} ${path}`).toBe(404);
    }
    const anonymous = await backend.fetch(
      new URL(fhirPath('Subscription/0b5e1c8e-0000-4000-8000-000000000001/$get-ws-binding-token'), backend.baseUrl),
    );
    expect(anonymous.status).toBe(401);
  });

  it('ws/subscriptions-r4 as plain HTTP is 404; another upgrade path is 404; a handshake that reaches the HTTP routes is 400', async () => {
    const { backend, origin } = served;
    const plain = await fetch(`${origin}ws/subscriptions-r4`);
    expect(plain.status).toBe(404);
    await plain.body?.cancel();
    expect((await handshake(origin, '/ws/echo')).status).toBe(404);
    // A listener without the upgrade hook hands the handshake to the HTTP routes.
    const unhooked = await backend.app.fetch(
      new Request(`${origin}ws/subscriptions-r4`, { headers: { upgrade: 'websocket', connection: 'Upgrade' } }),
    );
    expect(unhooked.status).toBe(400);
  });
});

describe('bounds', () => {
  let served: Served;
  /** How far this backend's clock is ahead of the machine's. */
  let skew = 0;
  beforeAll(async () => {
    served = await serveBackend({
      webSocketLimits: { sockets: 3, socketsPerAddress: 3, socketsPerUser: 1, bindingsPerUser: 2 },
      webSocketHeartbeatMs: 200,
      clock: () => new Date(Date.now() + skew),
    });
  });
  afterAll(() => served?.close());

  it('bindings per user (Medplum’s message), sockets per user, sockets in all; a heartbeat names what is bound', async () => {
    const { backend, origin } = served;
    const clinician = await demoClinician(backend, 'northwind');
    const token = clinician.medplum.getAccessToken() as string;
    const tokens: string[] = [];
    for (const criteria of ['Communication?status=completed', 'Task?status=ready', 'Task?status=requested']) {
      const subscription = await clinician.medplum.createResource(liveSubscription(criteria));
      tokens.push(await bindingToken(backend, token, subscription.id as string));
    }
    const first = await openSocket(origin);
    first.send({ type: 'bind-with-token', payload: { token: tokens[0] } });
    first.send({ type: 'bind-with-token', payload: { token: tokens[1] } });
    first.send({ type: 'bind-with-token', payload: { token: tokens[2] } });
    await first.next(isOutcome('User has exceeded allotted maximum number of concurrent WebSocket subscriptions: 2'));
    expect(first.messages.filter(isStatus('handshake'))).toHaveLength(2);
    const heartbeat = await first.next<Bundle>(isStatus('heartbeat'));
    expect(heartbeat.entry).toHaveLength(2);
    expect(backend.webSocketSubscriptions.counts.bindings).toBe(2);

    // Her second socket: refused at its first bind, and closed.
    const second = await openSocket(origin);
    second.send({ type: 'bind-with-token', payload: { token: tokens[0] } });
    await second.closed;
    expect(second.messages.filter(isStatus('handshake'))).toEqual([]);

    // Three sockets in all: a fourth handshake is refused (503) before it opens.
    const others = [await openSocket(origin), await openSocket(origin)];
    await expect(openSocket(origin)).rejects.toThrow('did not open');
    expect((await handshake(origin, '/ws/subscriptions-r4')).status).toBe(503);
    for (const socket of [first, ...others]) {
      socket.close();
      await socket.closed;
    }
    await until(() => backend.webSocketSubscriptions.counts.sockets === 0 || undefined);
    expect(backend.webSocketSubscriptions.counts.bindings).toBe(0);
    // Room again.
    const again = await openSocket(origin);
    again.close();
    await again.closed;
  });

  it('removes a websocket Subscription nothing binds once 24 hours old, as Medplum’s cache entry expires', async () => {
    const { backend, origin } = served;
    const clinician = await demoClinician(backend, 'northwind');
    const old = await clinician.medplum.createResource(liveSubscription('Task?status=ready'));
    skew = 25 * 3_600_000;
    const fresh = await backend.systemRepo.createResource<Subscription>({
      ...liveSubscription('Task?status=ready'),
      meta: { project: backend.project.id },
    });
    const exists = (id: string) =>
      backend.systemRepo.readResource('Subscription', id).then(
        () => true,
        () => false,
      );
    expect(await exists(old.id as string)).toBe(true);
    const socket = await openSocket(origin);
    for (let tries = 0; tries < 100 && (await exists(old.id as string)); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await exists(old.id as string)).toBe(false);
    expect(await exists(fresh.id as string)).toBe(true);
    socket.close();
  });
});

/** The HTTP answer to a WebSocket handshake on `path`, or 101 if the server switched protocols. */
function handshake(origin: string, path: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const call = request(new URL(path, origin), {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from('sixteen byte key').toString('base64'),
      },
    });
    call.on('upgrade', (_response, socket) => {
      socket.destroy();
      resolve({ status: 101 });
    });
    call.on('response', (response) => {
      response.resume();
      resolve({ status: response.statusCode ?? 0 });
    });
    call.on('error', reject);
    call.end();
  });
}

/** Polls `find` until it returns something (notifications arrive after the write's answer). */
async function until<T>(find: () => T | undefined, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const found = find();
    if (found !== undefined) {
      return found;
    }
    if (Date.now() > end) {
      throw new Error(`nothing came in ${ms} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
