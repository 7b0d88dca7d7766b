import { parseArgs } from 'node:util';
import { MedplumClient } from '@medplum/core';
import { loadFhirSchema } from '../embedded/schema';
import { applyDefinition } from './apply';
import { readBotBundles } from './bundles';
import { platformDefinition } from './definition';
import { demoDefinition } from './demo';

/**
 * `npm run provision -- --base-url URL --client-id ID --client-secret SECRET [--demo]`
 * Applies the platform definition to any Medplum (hosted, self-hosted or embedded) as a project admin.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      demo: { type: 'boolean', default: false },
    },
  });
  const baseUrl = values['base-url'];
  const clientId = values['client-id'];
  const clientSecret = values['client-secret'];
  if (!baseUrl || !clientId || !clientSecret) {
    console.error('usage: npm run provision -- --base-url URL --client-id ID --client-secret SECRET [--demo]');
    process.exitCode = 2;
    return;
  }
  loadFhirSchema();
  const definition = values.demo ? demoDefinition() : platformDefinition;
  // A 429 of the FHIR quota is waited out: MedplumClient retries after the window the `RateLimit`
  // header names (up to a minute) instead of stopping half way.
  const medplum = new MedplumClient({ baseUrl, cacheTime: 0, maxRetries: 4, maxRetryTime: 65_000 });
  await medplum.startClientLogin(clientId, clientSecret);
  // The key the gateway signs edge statements with (its EDGE_STATEMENT_KEY), stored as the Project
  // secret the bots check; from the environment, never a flag (flags end up in shell histories).
  const report = await applyDefinition(medplum, definition, {
    bundles: readBotBundles(definition),
    edgeStatementKey: process.env.EDGE_STATEMENT_KEY || undefined,
    // Medplum's `storageBaseUrl`, where it is not `<base>storage/` (a hosted Medplum): the bots read
    // presigned attachment URLs with it.
    storageBaseUrl: process.env.STORAGE_BASE_URL || undefined,
  });
  console.log(
    JSON.stringify({
      created: report.created.length,
      updated: report.updated.length,
      unchanged: report.unchanged.length,
      deployed: report.deployed,
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
