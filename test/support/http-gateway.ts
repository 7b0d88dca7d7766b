import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { pooledFetch } from '../../src/medplum/node-fetch';
import { openApiDocument } from '../../src/routes/docs';
import { startTestBackend, type TestBackend } from './backend';
import { createCaller, type TestGateway } from './gateway';

export interface HttpGateway {
  backend: TestBackend;
  /** Calls the gateway (in process) as alice by default; answers are checked against the document. */
  call: TestGateway['call'];
  close(): void;
}

/**
 * The embedded Medplum served over HTTP on a port (Node's server, as a real Medplum's limits apply), and
 * the gateway reaching it with the pooled undici fetch of the Node entry.
 */
export async function startHttpGateway(): Promise<HttpGateway> {
  // The port is known only once listening, and the backend needs its base URL: bind the handler late.
  let handler: (request: Request) => Response | Promise<Response> = () => new Response(null, { status: 503 });
  const server = serve({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const backend = await startTestBackend({ baseUrl });
  handler = (request) => backend.app.fetch(request);
  const app = createApp({
    medplum: { baseUrl, fetch: pooledFetch() },
    issuer: baseUrl,
    projectId: backend.project.id,
    limits: DEFAULT_LIMITS,
  });
  return {
    backend,
    call: createCaller(app, openApiDocument(app), () => backend.patients.alice.token),
    close() {
      server.close();
      backend.close();
    },
  };
}
