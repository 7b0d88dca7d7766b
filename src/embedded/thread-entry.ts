import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { serve } from '@hono/node-server';
import { demoDefinition } from '../provision/demo';
import { bodyBytes } from '../shared/buffered-body';
import { demoApps, demoPatientTokens } from './demo-tokens';
import { startGcPacer } from './gc-pacer';
import { type LaunchedMedplum, launchEmbeddedMedplum } from './launch';
import type { MedplumThreadOptions, ThreadReply, ThreadRequest } from './thread';
import { serveWebSocketSubscriptions } from './websocket-server';

/** The embedded Medplum's thread (see `thread.ts`): starts it with the demo data, then answers calls. */
async function main(): Promise<void> {
  const port = parentPort;
  if (!port) {
    throw new Error('thread-entry runs as a worker thread (startMedplumThread)');
  }
  const options = workerData as MedplumThreadOptions;
  startGcPacer();
  const medplum = await launchEmbeddedMedplum({
    dbPath: options.dbPath,
    baseUrl: options.baseUrl,
    definition: demoDefinition(),
    corsOrigins: options.corsOrigins,
    // Off, as Medplum's own default and as a Medplum 5.0.10 must run (docs/medplum-auditevents.md); on with
    // EMBEDDED_SAVE_AUDIT_EVENTS=1 to see her access log fill (docs/configuration.md).
    saveAuditEvents: process.env.EMBEDDED_SAVE_AUDIT_EVENTS === '1',
  });
  const graphql = await buildGraphqlSchema(medplum);
  let httpPort: number | undefined;
  if (options.httpPort !== undefined) {
    const server = serve({ fetch: medplum.app.fetch, port: options.httpPort, hostname: options.hostname });
    // Medplum's apps' live updates (SubscriptionManager) open their socket on this port.
    serveWebSocketSubscriptions(server as Server, medplum.webSocketSubscriptions);
    await new Promise((resolve, reject) => server.once('listening', resolve).once('error', reject));
    httpPort = (server.address() as AddressInfo).port;
  }
  const reply = (message: ThreadReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

  port.on('message', (request: ThreadRequest) => {
    if (request.kind === 'cpu') {
      const usage = process.threadCpuUsage();
      reply({ kind: 'cpu', id: request.id, micros: usage.user + usage.system });
      return;
    }
    answer(medplum, request)
      .then(([message, transfer]) => reply(message, transfer))
      .catch(() => reply({ kind: 'failed', id: request.id }));
  });
  reply({
    kind: 'ready',
    projectId: medplum.project.id,
    demoTokens: await demoPatientTokens(medplum),
    demoApps: await demoApps(medplum),
    edgeStatementKey: medplum.edgeStatementKey,
    httpPort,
    graphql,
  });
}

/**
 * Medplum's GraphQL schema, built before the port opens: fhir-router builds it at the first `$graphql`
 * (every resource type, one synchronous pass of about 4-5 s and 500 MB here), which stalls every call and
 * WebSocket of this thread meanwhile; Medplum's Provider app asks one as a clinician first opens Patients,
 * and the whole instance stood still 5 to 16 s for it (issue 48's day on `npm start`). Asked through the
 * GraphQL gate like any query: where the heap cannot take it, it stays unbuilt and `$graphql` answers 503.
 */
async function buildGraphqlSchema(medplum: LaunchedMedplum): Promise<{ built: boolean; ms: number }> {
  const started = performance.now();
  const built = await medplum.admin.graphql('{ PatientList(_count: 1) { id } }').then(
    () => true,
    () => false,
  );
  return { built, ms: Math.round(performance.now() - started) };
}

async function answer(
  medplum: LaunchedMedplum,
  request: Extract<ThreadRequest, { kind: 'fetch' }>,
): Promise<[ThreadReply, ArrayBuffer[]]> {
  const response = await medplum.fetch(request.url, {
    method: request.method,
    headers: request.headers,
    body: request.body,
  });
  const bytes = await bodyBytes(response);
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => {
    headers.push([name, value]);
  });
  // Handed over, not copied. A view on a larger buffer is cut out first: posted as it is, its whole
  // backing buffer would be copied across.
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  const body = whole ? bytes : bytes.slice();
  return [
    { kind: 'response', id: request.id, status: response.status, statusText: response.statusText, headers, body },
    [body.buffer],
  ];
}

main().catch((err: unknown) => {
  // Start-up only (no patient's call has run yet): the reason, without a stack, then stop.
  parentPort?.postMessage({
    kind: 'startFailed',
    message: err instanceof Error ? err.message : String(err),
  } satisfies ThreadReply);
  process.exit(1);
});
