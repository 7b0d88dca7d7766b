import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { demoDefinition } from '../provision/demo';
import { LOOPBACK_ORIGINS, parseOrigins } from '../shared/cors';
import { launchEmbeddedMedplum } from './launch';
import { serveWebSocketSubscriptions } from './websocket-server';

/** `npm run embedded`: the embedded Medplum alone, listening like a real one (default port 8103, as Medplum). */
async function main(): Promise<void> {
  const port = Number(process.env.EMBEDDED_MEDPLUM_PORT ?? 8103);
  const baseUrl = process.env.EMBEDDED_MEDPLUM_BASE_URL ?? `http://localhost:${port}/`;
  const started = performance.now();
  const medplum = await launchEmbeddedMedplum({
    dbPath: process.env.EMBEDDED_MEDPLUM_DB ?? '.data/embedded-medplum.sqlite',
    baseUrl,
    definition: demoDefinition(),
    corsOrigins: parseOrigins(process.env.CORS_ORIGINS ?? LOOPBACK_ORIGINS),
    // Off, as Medplum's own default and as a Medplum 5.0.10 must run (docs/medplum-auditevents.md); on with
    // EMBEDDED_SAVE_AUDIT_EVENTS=1 to see her access log fill (docs/configuration.md).
    saveAuditEvents: process.env.EMBEDDED_SAVE_AUDIT_EVENTS === '1',
  });
  const server = serve({ fetch: medplum.app.fetch, port });
  serveWebSocketSubscriptions(server as Server, medplum.webSocketSubscriptions);
  console.log(
    JSON.stringify({
      baseUrl,
      projectId: medplum.project.id,
      adminClientId: medplum.adminClient.id,
      adminClientSecret: medplum.adminClient.secret,
      startupMs: Math.round(performance.now() - started),
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
