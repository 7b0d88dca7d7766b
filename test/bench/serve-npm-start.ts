import { serve } from '@hono/node-server';
import { stdoutAccessLog } from '../../src/access-log-node';
import { createApp, MEDPLUM_IN_FLIGHT } from '../../src/app';
import { nodePeerAddress } from '../../src/edge/node-peer';
import { createEdgeSigner } from '../../src/edge/statement';
import { startMedplumThread } from '../../src/embedded/thread';
import { DEMO_PATIENTS } from '../../src/provision/demo';
import { benchLimits } from './limits';

/**
 * Bench helper process, set up as `npm start` sets itself up: the gateway on this thread, the
 * embedded Medplum on a thread of its own, which here also serves its HTTP API for the direct rounds.
 * BENCH_DB: a store file prepared beforehand (intake-store.ts), instead of a fresh in-memory one.
 */
const medplumPort = Number(process.env.PORT);
const baseUrl = `http://127.0.0.1:${medplumPort}/`;
const medplum = await startMedplumThread({
  dbPath: process.env.BENCH_DB ?? ':memory:',
  baseUrl,
  httpPort: medplumPort,
});
const gateway = createApp({
  medplum: { baseUrl, fetch: medplum.fetch },
  issuer: baseUrl,
  projectId: medplum.projectId,
  limits: benchLimits(MEDPLUM_IN_FLIGHT.embedded),
  log: stdoutAccessLog(),
  // As src/node.ts: acceptances carry the gateway's signed edge statement.
  edgeSigner: createEdgeSigner(medplum.edgeStatementKey),
  peerAddress: nodePeerAddress,
});
const server = serve({ fetch: gateway.fetch, port: Number(process.env.GATEWAY_PORT), hostname: '127.0.0.1' });
await new Promise((resolve) => server.once('listening', resolve));
const token = medplum.demoTokens[DEMO_PATIENTS[0].key];

process.on('SIGINT', () => process.exit(0));
// The bench asks for each thread's CPU time over IPC, and the whole process's (GC and compiler
// threads, libuv's, included), and its resident memory (both threads share it).
process.on('message', async () => {
  const own = process.threadCpuUsage();
  const all = process.cpuUsage();
  process.send?.({
    gateway: own.user + own.system,
    medplum: await medplum.cpuUsage(),
    all: all.user + all.system,
    rss: process.memoryUsage().rss,
  });
});
process.send?.({ baseUrl, projectId: medplum.projectId, token });
