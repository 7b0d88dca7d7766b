import { serve } from '@hono/node-server';
import { stdoutAccessLog } from '../../src/access-log-node';
import { createApp, MEDPLUM_IN_FLIGHT } from '../../src/app';
import { pooledFetch } from '../../src/medplum/node-fetch';
import { benchLimits } from './limits';

/**
 * Bench helper process: the gateway alone, set up as the Node entry sets it up for a remote Medplum
 * (pooled fetch, JSON access log on stdout), told over IPC where Medplum is.
 */
interface Target {
  medplumBaseUrl: string;
  projectId: string;
  port: number;
}

process.once('message', (message) => {
  const target = message as Target;
  const app = createApp({
    medplum: { baseUrl: target.medplumBaseUrl, fetch: pooledFetch() },
    issuer: target.medplumBaseUrl,
    projectId: target.projectId,
    limits: benchLimits(MEDPLUM_IN_FLIGHT.remote),
    log: stdoutAccessLog(),
  });
  const server = serve({ fetch: app.fetch, port: target.port, hostname: '127.0.0.1' });
  server.once('listening', () => {
    // From now on the bench asks for this process's CPU time over IPC.
    process.on('message', () => {
      const usage = process.cpuUsage();
      process.send?.({ gateway: usage.user + usage.system });
    });
    process.send?.('listening');
  });
});
process.on('SIGINT', () => process.exit(0));
process.send?.('ready');
