import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { serve } from '@hono/node-server';
import { stdoutAccessLog } from './access-log-node';
import { createApp } from './app';
import { loadConfig } from './config';
import { nodeAssetLoader } from './docs-assets-node';
import { edgeKeyChecker, refuses } from './edge/edge-key';
import { createEventTickets } from './edge/event-ticket';
import { nodePeerAddress } from './edge/node-peer';
import { createEdgeSigner } from './edge/statement';
import { superviseMedplumThread } from './embedded/supervisor';
import { pooledFetch } from './medplum/node-fetch';
import { DEMO_PASSWORD, DEMO_PATIENTS, DEMO_TENANTS, demoEmail } from './provision/demo';
import { VISIT_PRACTITIONERS } from './provision/schedules';
import { buildWebApp } from './web-app-node';

/**
 * `npm start`: the gateway on the embedded Medplum with the demo tenants, one process (Medplum on a
 * thread of its own), no infrastructure. Prints the base URL and a ready token for a demo patient.
 */
async function main(): Promise<void> {
  // Stop through 'exit', so that pending access-log lines are written.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => process.exit(128 + constants.signals[signal]));
  }
  const config = loadConfig(process.env);
  const edge = { publicUrl: config.publicUrl, trustedProxies: config.trustedProxies, peerAddress: nodePeerAddress };
  if (config.remote) {
    // A real Medplum: the gateway alone (provision it first with `npm run provision`). Its key checked
    // first: a key that is not the Project's (or a client Medplum refuses) is the operator's to mend, and it
    // does not start; a Medplum that does not answer yet is `/readyz`'s to report until it does.
    const upstreamFetch = pooledFetch();
    const edgeKeyCheck = edgeKeyChecker(
      { baseUrl: config.remote.baseUrl, fetch: upstreamFetch, ...config.remote.gatewayClient },
      config.remote.edgeStatementKey,
    );
    const verdict = await edgeKeyCheck();
    if (refuses(verdict)) {
      throw new Error(`Not starting: ${verdict.ok ? '' : verdict.message}.`);
    }
    if (!verdict.ok) {
      console.error(verdict.message);
    }
    const app = createApp({
      edgeKeyCheck,
      medplum: { baseUrl: config.remote.baseUrl, fetch: upstreamFetch },
      issuer: config.remote.issuer,
      projectId: config.remote.projectId,
      limits: config.limits,
      assets: nodeAssetLoader(),
      log: stdoutAccessLog(),
      edgeSigner: createEdgeSigner(config.remote.edgeStatementKey),
      eventTickets: createEventTickets(config.remote.edgeStatementKey),
      corsOrigins: config.corsOrigins,
      ...edge,
    });
    serve({ fetch: app.fetch, port: config.port, hostname: config.host });
    console.log(`Patient Care API at ${config.publicUrl}, over the Medplum at ${config.remote.baseUrl}`);
    return;
  }
  // Its API is served on a port of its own, as a real Medplum's: patient apps sign in and register there.
  // Restarted on its store if it dies (src/embedded/supervisor.ts); the lines name reasons by code only.
  const medplum = await superviseMedplumThread(
    {
      dbPath: config.embeddedDb,
      baseUrl: config.medplumBaseUrl,
      httpPort: config.embeddedPort,
      hostname: config.host,
      corsOrigins: config.corsOrigins,
    },
    {
      onEvent(event) {
        console.error(
          event.kind === 'stopped'
            ? `The embedded Medplum thread stopped (${event.reason}); calls get 503 while it restarts on its store.`
            : event.kind === 'restarted'
              ? `The embedded Medplum thread is serving again (restart ${event.restarts}, ${event.afterMs} ms): nothing acknowledged is lost.`
              : `The embedded Medplum thread is not restarted: ${event.reason}.`,
        );
      },
    },
  );
  // The reference patient web app (web/) at /app/, as the first demo tenant's patient app.
  const [appTenant] = DEMO_TENANTS;
  const webApp = await buildWebApp({ api: '', clientId: medplum.demoApps[appTenant.key], tenant: appTenant.name });
  const app = createApp({
    medplum: { baseUrl: medplum.baseUrl, fetch: medplum.fetch },
    issuer: medplum.baseUrl,
    projectId: medplum.projectId,
    webApp: { files: webApp, medplumOrigin: new URL(medplum.baseUrl).origin },
    limits: config.limits,
    assets: nodeAssetLoader(),
    log: stdoutAccessLog(),
    edgeSigner: createEdgeSigner(medplum.edgeStatementKey),
    eventTickets: createEventTickets(medplum.edgeStatementKey),
    corsOrigins: config.corsOrigins,
    ...edge,
  });
  // Listening before anything is printed: a port in use is one line, not a banner and a stack.
  const server = await listen(app.fetch, config.port, config.host).catch(async (err: unknown) => {
    await medplum.close();
    throw err;
  });
  medplum.stopped.then((err) => {
    if (!err) {
      return;
    }
    // Without its Medplum the gateway can answer nothing but 503s. Calls in flight get theirs, then the
    // process stops with exit code 1, for a supervisor to restart it on the same store (every
    // acknowledged write is on disk: WAL, synchronous=FULL).
    console.error(
      `Stopping the gateway: start it again (a supervisor's restart does) on the same store; nothing acknowledged is lost.`,
    );
    process.exitCode = 1;
    server.close();
    setTimeout(() => process.exit(1), 1_000).unref();
  });
  const baseUrl = config.publicUrl.replace(/\/+$/, '');
  const tokens = medplum.demoTokens;
  const tokensFile = demoTokensFile(config.embeddedDb, config.port);
  const [first] = DEMO_PATIENTS;
  const apps = Object.entries(medplum.demoApps).map(([tenant, id]) => `${tenant} ${id}`);
  const people = [
    ...DEMO_PATIENTS.map((p) => demoEmail(p.key, p.tenant)),
    ...DEMO_TENANTS.flatMap((t) => [
      `${demoEmail('clinician', t.key)} (clinician)`,
      `${demoEmail('colleague', t.key)} (clinician)`,
    ]),
    ...VISIT_PRACTITIONERS.map((p) => `${demoEmail(p.key, p.tenant)} (visit practitioner, licensed in ${p.state})`),
  ];
  console.log(`
Patient Care API on the embedded Medplum (demo data: ${DEMO_PATIENTS.map((p) => `${p.key}@${p.tenant}`).join(', ')})
  base URL:      ${baseUrl}
  reference:     ${baseUrl}/
  patient app:   ${baseUrl}/app/ (the reference web app, ${appTenant.name}'s; web/README.md)
  Medplum:       ${medplum.baseUrl} (sign-in and registration; GET /v1/config names it)
  project id:    ${medplum.projectId}
  GraphQL:       ${medplum.graphql.built ? `schema built at start (${(medplum.graphql.ms / 1000).toFixed(1)} s)` : 'not built: too little heap for its schema; $graphql answers 503 (use the FHIR REST API)'}
  patient apps:  ${apps.join(', ')} (client ids, by tenant)
  demo sign-in:  ${people.join(', ')}; password ${DEMO_PASSWORD}
  demo patient:  ${first.given} ${first.family} (${first.tenant})
  token:         ${tokens[first.key]}

  printf 'Authorization: Bearer %s\\n' "$TOKEN" | curl -H @- ${baseUrl}/v1/patient/profile
  Tokens for the other demo patients (valid 1 h) are in ${tokensFile}; restart to renew them,
  or sign in (README, "Sign up and sign in").
`);
  const { writeFile, mkdir, chmod } = await import('node:fs/promises');
  await mkdir(dirname(tokensFile), { recursive: true });
  // Bearer tokens: the owner's alone (mode 600), also where an earlier start left the file readable.
  await writeFile(tokensFile, `${JSON.stringify(tokens, null, 2)}\n`, { mode: 0o600 });
  await chmod(tokensFile, 0o600);
}

/**
 * Where the demo patients' tokens are written: beside the store they belong to, so that two instances on
 * two stores never overwrite each other's (`.data/embedded-medplum.sqlite` -> `.data/embedded-medplum.
 * demo-tokens.json`); an in-memory store's by the gateway's port.
 */
export function demoTokensFile(dbPath: string, port: number): string {
  return dbPath === ':memory:'
    ? join('.data', `demo-tokens.port-${port}.json`)
    : `${dbPath.replace(/\.sqlite$/, '')}.demo-tokens.json`;
}

/** Serves `fetch` once the port is ours; a port in use (or not ours to take) is a one-line error. */
function listen(fetch: (request: Request) => Response | Promise<Response>, port: number, hostname?: string) {
  return new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const server = serve({ fetch, port, hostname });
    server.once('listening', () => resolve(server));
    server.once('error', (err: NodeJS.ErrnoException) => {
      const where = `${hostname ?? 'every interface'}:${port}`;
      reject(
        new Error(
          err.code === 'EADDRINUSE'
            ? `Port ${port} is in use (${where}): stop what uses it, or start with another PORT.`
            : `Cannot listen on ${where}: ${err.code ?? 'error'}.`,
        ),
      );
    });
  });
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
