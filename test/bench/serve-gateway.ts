import { serve } from '@hono/node-server';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { keepAliveFetch } from '../../src/medplum/node-fetch';

/** Bench helper process: the gateway alone, talking to a Medplum over HTTP like production. */
const medplumBaseUrl = process.env.MEDPLUM_BASE_URL as string;
const app = createApp({
  medplum: { baseUrl: medplumBaseUrl, fetch: keepAliveFetch() },
  issuer: medplumBaseUrl,
  projectId: process.env.PROJECT_ID as string,
  limits: DEFAULT_LIMITS,
});
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' });
server.once('listening', () => process.stdout.write('ready\n'));
process.on('SIGINT', () => process.exit(0));

// The bench asks for this process's CPU time over IPC.
process.on('message', () => process.send?.(process.cpuUsage()));
