import { serve } from '@hono/node-server';
import { stdoutAccessLog } from '../../src/access-log-node';
import { createApp, DEFAULT_LIMITS, MEDPLUM_IN_FLIGHT } from '../../src/app';
import { pooledFetch } from '../../src/medplum/node-fetch';

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
    // One patient's token drives the whole load: admission sized for it (the bench measures speed), except
    // where the bench measures admission itself (BENCH_ADMISSION=default: the Node entry's, or as told).
    limits:
      process.env.BENCH_ADMISSION === 'default'
        ? {
            ...DEFAULT_LIMITS,
            ...(process.env.IN_FLIGHT_TOTAL ? { inFlightTotal: Number(process.env.IN_FLIGHT_TOTAL) } : {}),
            ...(process.env.IN_FLIGHT_WAITING ? { inFlightWaiting: Number(process.env.IN_FLIGHT_WAITING) } : {}),
            medplumInFlight: Number(process.env.MEDPLUM_IN_FLIGHT ?? MEDPLUM_IN_FLIGHT.remote) || undefined,
          }
        : { ...DEFAULT_LIMITS, inFlightPerCaller: 4096, inFlightTotal: 4096 },
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
