import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { stdoutAccessLog } from '../../src/access-log-node';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { demoPatientTokens } from '../../src/embedded/demo-tokens';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { DEMO_PATIENTS, demoDefinition } from '../../src/provision/demo';

/**
 * Bench helper process: the embedded Medplum on its own port; reports where it is and a demo token
 * over IPC. With GATEWAY_PORT it also serves the gateway on this same thread, calling Medplum in
 * memory (the `same-thread` layout; `npm start` gives Medplum a thread of its own).
 */
const port = Number(process.env.PORT ?? 0);
const probe = serve({ fetch: () => new Response(), port, hostname: '127.0.0.1' });
await new Promise((resolve) => probe.once('listening', resolve));
const actualPort = (probe.address() as AddressInfo).port;
probe.close();
const baseUrl = `http://127.0.0.1:${actualPort}/`;
const medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', baseUrl, definition: demoDefinition() });
serve({ fetch: medplum.app.fetch, port: actualPort, hostname: '127.0.0.1' });
if (process.env.GATEWAY_PORT) {
  const gateway = createApp({
    medplum: { baseUrl, fetch: medplum.fetch },
    issuer: baseUrl,
    projectId: medplum.project.id,
    // One patient's token drives the whole load: admission sized for it (the bench measures speed).
    limits: { ...DEFAULT_LIMITS, inFlightPerCaller: 4096, inFlightTotal: 4096 },
    log: stdoutAccessLog(),
  });
  serve({ fetch: gateway.fetch, port: Number(process.env.GATEWAY_PORT), hostname: '127.0.0.1' });
}
const token = (await demoPatientTokens(medplum))[DEMO_PATIENTS[0].key];

process.on('SIGINT', () => process.exit(0));
// The bench asks for this process's CPU time over IPC.
process.on('message', () => {
  const usage = process.cpuUsage();
  process.send?.({ medplum: usage.user + usage.system });
});
process.send?.({ baseUrl, projectId: medplum.project.id, token });
