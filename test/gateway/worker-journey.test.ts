import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { CarePlan } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHarness, type TestHarness } from 'wrangler';
import { embeddedBackend, journey } from '../../scripts/demo';
import { demoPatientTokens } from '../../src/embedded/demo-tokens';
import { type LaunchedMedplum, launchEmbeddedMedplum } from '../../src/embedded/launch';
import { demoDefinition } from '../../src/provision/demo';
import { gatewayClientOf } from '../../src/provision/edge-key';
import { createPatientCareClient } from '../../src/sdk';
import { scaled } from '../support/slowness';

/**
 * Issue 17 item 5: the Worker entry (`src/worker.ts`) serves every route, run in workerd (wrangler's
 * test harness, bundling it as `wrangler deploy` does, offline, on 127.0.0.1) against the embedded
 * Medplum over HTTP: the patient's side of the journey through the SDK, the clinician's through Medplum.
 */
let medplum: LaunchedMedplum;
let medplumServer: ReturnType<typeof serve>;
let medplumUrl: string;
let worker: TestHarness;
let _tokens: Record<string, string>;

beforeAll(async () => {
  // The base URL is the issuer: known before Medplum starts, so the port is taken first.
  let handler: (r: Request) => Response | Promise<Response> = () => new Response(null, { status: 503 });
  medplumServer = serve({ fetch: (r) => handler(r), port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => medplumServer.once('listening', resolve));
  medplumUrl = `http://127.0.0.1:${(medplumServer.address() as AddressInfo).port}/`;
  medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', baseUrl: medplumUrl, definition: demoDefinition() });
  handler = (r) => medplum.app.fetch(r);
  _tokens = await demoPatientTokens(medplum);
  const gateway = await gatewayClientOf(medplum.admin);
  worker = createTestHarness({
    root: process.cwd(),
    workers: [
      {
        configPath: './wrangler.toml',
        vars: {
          MEDPLUM_BASE_URL: medplumUrl,
          PROJECT_ID: medplum.project.id,
          PUBLIC_URL: 'https://gateway.test',
          GATEWAY_CLIENT_ID: gateway?.clientId ?? '',
        },
        secrets: { EDGE_STATEMENT_KEY: medplum.edgeStatementKey, GATEWAY_CLIENT_SECRET: gateway?.clientSecret ?? '' },
      },
    ],
  });
  await worker.listen();
}, scaled(60_000));

afterAll(async () => {
  await worker?.close();
  medplumServer?.close();
  medplum?.close();
});

/** The SDK, as a patient app uses it, pointed at the Worker. */
const sdkFor = (token: string) =>
  createPatientCareClient({
    baseUrl: 'https://gateway.test',
    accessToken: token,
    fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
      return worker.fetch(`${url.pathname}${url.search}`, init as Parameters<TestHarness['fetch']>[1]);
    }) as unknown as typeof fetch,
  });

describe('src/worker.ts in workerd', () => {
  it('serves the reference page and the document, and refuses a call without a token', async () => {
    expect((await worker.fetch('/v1/openapi.json')).status).toBe(200);
    const page = await worker.fetch('/');
    expect(page.status).toBe(200);
    await page.arrayBuffer();
    const anonymous = await worker.fetch('/v1/patient/profile');
    expect(anonymous.status).toBe(401);
    await anonymous.arrayBuffer();
  });

  it(
    'carries the whole journey (npm run demo’s, scripts/demo.ts) with every patient call through the Worker',
    async () => {
      // Her calls go to the Worker; the clinician's go to Medplum; the bots answer as they do in process.
      const throughWorker = ((input: RequestInfo | URL, init?: RequestInit) => {
        const url = new URL(input instanceof Request ? input.url : input);
        return worker.fetch(`${url.pathname}${url.search}`, init as Parameters<TestHarness['fetch']>[1]);
      }) as unknown as typeof fetch;
      const done = await journey(embeddedBackend(medplum), throughWorker, { silent: true });
      const api = sdkFor(done.token);
      const plan = await api.fhir.read<CarePlan>('CarePlan', done.carePlan.split('/')[1]);
      expect(plan.status).toBe('active');
      // The visit's practitioner finished it in Medplum's app: fulfilled, and the plan's next visit issued.
      const visit = await api.appointments.get(done.appointment);
      expect(visit).toMatchObject({ status: 'fulfilled', segments: [{ position: 1, status: 'finished' }] });
      const { tasks } = await api.tasks.list();
      expect(tasks.find((t) => t.task === done.nextVisitTask)).toMatchObject({
        kind: 'schedule-visit',
        status: 'ready',
      });
      expect((await api.appointments.cancel(done.originalAppointment)).status).toBe('cancelled');
    },
    scaled(60_000),
  );
});
