import { constants } from 'node:os';
import { serve } from '@hono/node-server';
import { stdoutAccessLog } from './access-log-node';
import { createApp } from './app';
import { loadConfig } from './config';
import { nodeAssetLoader } from './docs-assets-node';
import { launchEmbeddedMedplum } from './embedded/launch';
import { pooledFetch } from './medplum/node-fetch';
import { DEMO_PATIENTS, demoDefinition } from './provision/demo';
import { SYSTEMS } from './shared/systems';

/**
 * `npm start`: the gateway on the embedded Medplum with the demo tenants, one process, no
 * infrastructure. Prints the base URL and a ready token for a demo patient.
 */
async function main(): Promise<void> {
  // Stop through 'exit', so that pending access-log lines are written.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => process.exit(128 + constants.signals[signal]));
  }
  const config = loadConfig(process.env);
  if (config.remote) {
    // A real Medplum: the gateway alone (provision it first with `npm run provision`).
    const app = createApp({
      medplum: { baseUrl: config.remote.baseUrl, fetch: pooledFetch() },
      issuer: config.remote.issuer,
      projectId: config.remote.projectId,
      limits: config.limits,
      assets: nodeAssetLoader(),
      log: stdoutAccessLog(),
    });
    serve({ fetch: app.fetch, port: config.port });
    console.log(`Patient Care API on ${config.remote.baseUrl}: http://localhost:${config.port}`);
    return;
  }
  const medplum = await launchEmbeddedMedplum({
    dbPath: config.embeddedDb,
    baseUrl: config.medplumBaseUrl,
    definition: demoDefinition(),
  });
  const app = createApp({
    medplum: { baseUrl: medplum.baseUrl, fetch: medplum.fetch },
    issuer: medplum.baseUrl,
    projectId: medplum.project.id,
    limits: config.limits,
    assets: nodeAssetLoader(),
    log: stdoutAccessLog(),
  });
  serve({ fetch: app.fetch, port: config.port });
  const baseUrl = config.publicUrl ?? `http://localhost:${config.port}`;
  const tokens: Record<string, string> = {};
  for (const demo of DEMO_PATIENTS) {
    const patient = await medplum.admin.searchOne('Patient', { identifier: `${SYSTEMS.demoPatient}|${demo.key}` });
    const membership = await medplum.admin.searchOne('ProjectMembership', { profile: `Patient/${patient?.id}` });
    if (membership) {
      tokens[demo.key] = (await medplum.clientFor(membership)).getAccessToken() as string;
    }
  }
  const [first] = DEMO_PATIENTS;
  console.log(`
Patient Care API on the embedded Medplum (demo data: ${DEMO_PATIENTS.map((p) => `${p.key}@${p.tenant}`).join(', ')})
  base URL:      ${baseUrl}
  reference:     ${baseUrl}/
  demo patient:  ${first.given} ${first.family} (${first.tenant})
  token:         ${tokens[first.key]}

  curl -H "Authorization: Bearer $TOKEN" ${baseUrl}/v1/patient/profile
  Tokens for the other demo patients (valid 1 h) are in .data/demo-tokens.json; restart to renew them.
`);
  const { writeFile, mkdir } = await import('node:fs/promises');
  await mkdir('.data', { recursive: true });
  await writeFile('.data/demo-tokens.json', `${JSON.stringify(tokens, null, 2)}\n`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
