import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { OperationOutcome, Project, Subscription } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * WebSocket subscriptions, which Medplum's apps ask for through @medplum/core's SubscriptionManager: a
 * `websocket` Subscription, then `GET Subscription/:id/$get-ws-binding-token`, then `ws/subscriptions-r4`.
 * The project has no `websocket-subscriptions` feature (nor can have one here): the embedded Medplum
 * answers as Medplum 5.0.10 answers such a project (checked on one, ../shared/real-medplum/), never more.
 */
let backend: TestBackend;
let origin: string;
let close: () => void;
beforeAll(async () => {
  backend = await startTestBackend();
  const server = serve({ fetch: backend.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  close = () => server.close();
  origin = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  close?.();
  backend?.close();
});

const NOT_ENABLED = 'WebSocket subscriptions not enabled for current project';

function expectOutcome(answer: { status: number; body: unknown }, status: number, text: string): void {
  expect(answer.status).toBe(status);
  const outcome = answer.body as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue?.[0]).toMatchObject({ severity: 'error', details: { text } });
}

describe('$get-ws-binding-token (packages/server/src/fhir/operations/getwsbindingtoken.ts, fhir/routes.ts)', () => {
  it('answers 400 "not enabled for current project" in a project without the feature, for a Subscription or not, for admins and clinicians alike', async () => {
    const admin = backend.admin.getAccessToken() as string;
    const subscription = await backend.admin.createResource<Subscription>({
      resourceType: 'Subscription',
      status: 'active',
      reason: 'as SubscriptionManager makes it',
      criteria: 'Patient',
      channel: { type: 'websocket' },
    });
    const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
    await backend.systemRepo.updateResource<Project>({
      ...project,
      features: (project.features ?? []).filter((f) => f !== 'websocket-subscriptions'),
    });
    try {
      for (const [token, id] of [
        [admin, subscription.id],
        [admin, '0b5e1c8e-0000-4000-8000-000000000001'],
        [backend.clinicians.northwind.token, subscription.id],
      ]) {
        const answer = await direct(backend, token, 'GET', fhirPath(`Subscription/${id}/$get-ws-binding-token`));
        expectOutcome(answer, 400, NOT_ENABLED);
        expect((answer.body as OperationOutcome).issue?.[0]?.code).toBe('invalid');
      }
    } finally {
      const current = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
      await backend.systemRepo.updateResource<Project>({ ...current, features: project.features });
    }
  });

  it('is GET at the instance level only: POST or the type level are 404, as Medplum routes them; no token is 401', async () => {
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

  it('the platform’s project, which has the feature (the Provider app’s live updates), still gets no token: this server serves no WebSocket', async () => {
    const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
    expect(project.features).toContain('websocket-subscriptions');
    for (const token of [backend.admin.getAccessToken() as string, backend.clinicians.northwind.token]) {
      const answer = await direct(
        backend,
        token,
        'GET',
        fhirPath('Subscription/0b5e1c8e-0000-4000-8000-000000000001/$get-ws-binding-token'),
      );
      expectOutcome(answer, 400, 'WebSocket subscriptions are not served by the embedded Medplum');
    }
  });
});

/** The HTTP answer to a WebSocket handshake on `path`, or 101 if the server switched protocols. */
function handshake(path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const call = request(`http://${origin}${path}`, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from('sixteen byte key').toString('base64'),
      },
    });
    call.on('upgrade', (_response, socket) => {
      socket.destroy();
      resolve({ status: 101, body: undefined });
    });
    call.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }),
      );
    });
    call.on('error', reject);
    call.end();
  });
}

describe('ws/subscriptions-r4 (packages/server/src/websockets.ts, subscriptions/websockets.ts)', () => {
  it('refuses the handshake with a 400 OperationOutcome, where Medplum accepts it and refuses every binding; a plain GET is 404', async () => {
    // Medplum: 101, then a `bind-with-token` with any token one can have without the feature gets an
    // OperationOutcome ("Token claims missing subscription_id...") and the socket is terminated. Nothing
    // is delivered on either; refusing at the handshake is what a server without WebSockets can do.
    expectOutcome(await handshake('/ws/subscriptions-r4'), 400, 'WebSocket subscriptions not enabled');
    const plain = await fetch(`http://${origin}/ws/subscriptions-r4`);
    expect(plain.status).toBe(404);
    await plain.body?.cancel();
  });

  it('a WebSocket client (as SubscriptionManager opens it) never opens', async () => {
    const events = await new Promise<string[]>((resolve) => {
      const seen: string[] = [];
      const socket = new WebSocket(`ws://${origin}/ws/subscriptions-r4`);
      socket.onopen = () => seen.push('open');
      socket.onerror = () => seen.push('error');
      socket.onclose = () => resolve([...seen, 'close']);
    });
    expect(events).toEqual(['error', 'close']);
  });
});
