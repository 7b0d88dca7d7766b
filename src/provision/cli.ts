import { chmodSync, writeFileSync } from 'node:fs';
import { MedplumClient } from '@medplum/core';
import { SYSTEMS } from '../../contracts/systems';
import { CREDENTIAL_HELP, CREDENTIAL_OPTIONS, credentialsFrom, parseCommand } from '../cli/options';
import { loadFhirSchema } from '../embedded/schema';
import { applyDefinition, currentProject, type ProvisionReport } from './apply';
import { tenantEnvName, webhookSecretEnv, webhookTenants } from './bots/webhooks';
import { readBotBundles } from './bundles';
import { clinicDefinition, clinicOrigins, loadClinic, publishedVersionChanged } from './clinic';
import { type ProvisionDefinition, platformDefinition } from './definition';
import { demoDefinition } from './demo';
import { edgeKeyPlan, gatewayClientOf, storedEdgeKey } from './edge-key';
import { planningClient } from './plan';

const COMMAND = {
  name: 'provision',
  summary:
    "Applies the platform definition (access policies, bots, subscriptions, tenants and their patient apps; with --demo the demo people and data) to a Medplum project as its project-admin client. Idempotent: a second run writes nothing. Prints, and with --out writes, what the gateway and the patient apps need (the project id, each tenant's patient-app client id). EDGE_STATEMENT_KEY (the gateway's key, stored as the Project secret the bots check; unset on a Project without one, a key is made and written to --out, never printed), STORAGE_BASE_URL (a hosted Medplum's storageBaseUrl) and WEBHOOK_SECRET_<TENANT> (the signing secret of each tenant that takes webhooks) are read from the environment.",
  options: {
    ...CREDENTIAL_OPTIONS,
    demo: { type: 'boolean', default: false },
    clinic: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
  help: [
    ...CREDENTIAL_HELP,
    '  --clinic FILE               your clinic, as the file describes it (docs/clinic.md): checked first, nothing written when it has a problem',
    '  --dry-run                   show what would be created, changed and retired, and write nothing',
    '  --demo                      the demo tenants, patients, clinicians and data instead',
    "  --out FILE                  write the gateway's and patient apps' settings there, with its secrets (mode 600)",
    '  --help                      this text',
  ],
} as const;

/** `npm run provision -- [--demo] [--out FILE]`, credentials from the environment (see --help). */
async function main(): Promise<void> {
  const values = parseCommand(COMMAND);
  if (!values) {
    return;
  }
  const credentials = credentialsFrom(values);
  if ('missing' in credentials) {
    console.error(`${credentials.missing}\n(see npm run provision -- --help)`);
    process.exitCode = 2;
    return;
  }
  if (values.demo && values.clinic) {
    console.error('--demo and --clinic are two clinics: give one');
    process.exitCode = 2;
    return;
  }
  // The clinic file is checked whole before Medplum is asked anything: every problem, by its place.
  const clinic = values.clinic ? loadClinic(values.clinic, process.env) : undefined;
  if (clinic && !clinic.ok) {
    for (const problem of clinic.problems) {
      console.error(`${problem.place}: ${problem.message}`);
    }
    console.error(
      `${values.clinic}: ${clinic.problems.length} problem${clinic.problems.length === 1 ? '' : 's'}; nothing was written.`,
    );
    process.exitCode = 2;
    return;
  }
  loadFhirSchema();
  const definition = clinic?.ok ? clinicDefinition(clinic.loaded) : values.demo ? demoDefinition() : platformDefinition;
  // A 429 of the FHIR quota is waited out: MedplumClient retries after the window the `RateLimit`
  // header names (up to a minute) instead of stopping half way.
  const medplum = new MedplumClient({
    baseUrl: credentials.baseUrl,
    cacheTime: 0,
    maxRetries: 4,
    maxRetryTime: 65_000,
  });
  await medplum.startClientLogin(credentials.clientId, credentials.clientSecret);
  // The key the gateway signs edge statements with (its EDGE_STATEMENT_KEY), stored as the Project
  // secret the bots check; from the environment, never a flag (flags end up in shell histories), or made
  // here and written to --out. Decided before anything is written.
  const project = await currentProject(medplum);
  const projectId = project.id;
  const edgeKey = edgeKeyPlan(process.env.EDGE_STATEMENT_KEY, storedEdgeKey(project), values.out);
  // A plan writes no key: without one it is planned with a stand-in, and says what a real run needs.
  const keyForPlan =
    'refused' in edgeKey && values['dry-run']
      ? { key: 'planned-edge-key-'.padEnd(64, '0'), made: false, changed: false }
      : undefined;
  if ('refused' in edgeKey && !keyForPlan) {
    console.error(edgeKey.refused);
    process.exitCode = 2;
    return;
  }
  if ('refused' in edgeKey) {
    console.error(`(for the real run: ${edgeKey.refused.replace(/ ?Nothing was written\.?/, '')})`);
  }
  const key = keyForPlan ?? (edgeKey as Exclude<typeof edgeKey, { refused: string }>);
  const options = {
    bundles: readBotBundles(definition),
    edgeStatementKey: key.key,
    // Medplum's `storageBaseUrl`, where it is not `<base>storage/` (a hosted Medplum): the bots read
    // presigned attachment URLs with it.
    storageBaseUrl: process.env.STORAGE_BASE_URL || undefined,
    // Each webhook tenant's signing secret, from the environment as well (the clinic file names the
    // variable; otherwise WEBHOOK_SECRET_<TENANT>).
    webhookSecrets: clinic?.ok ? clinic.loaded.webhookSecrets : webhookSecretsFromEnv(definition),
  };
  // A clinic's run is rehearsed first, reading Medplum and writing nothing (what `--dry-run` shows): what
  // would fail (a published agreement version whose text changed, a secret missing) fails here, before
  // the first write.
  if (clinic || values['dry-run']) {
    const rehearsal = planningClient(medplum);
    let plan: ProvisionReport;
    try {
      plan = await applyDefinition(rehearsal.client, definition, { ...options, runBots: false });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      const published = clinic?.ok ? publishedVersionChanged(clinic.loaded, text) : undefined;
      console.error(`${published ?? text}\nNothing was written.`);
      process.exitCode = published ? 2 : 1;
      return;
    }
    if (values['dry-run']) {
      console.log(planText(plan));
      return;
    }
  }
  const report = await applyDefinition(medplum, definition, options);
  const settings = operatorSettings(
    credentials.baseUrl,
    projectId,
    report,
    clinic?.ok ? clinicOrigins(clinic.loaded.clinic) : [],
  );
  console.log(
    JSON.stringify({
      created: report.created.length,
      updated: report.updated.length,
      unchanged: report.unchanged.length,
      deployed: report.deployed,
    }),
  );
  console.log(settings);
  if (values.out) {
    // The same settings and the key, for the operator alone (mode 600); never printed.
    const gateway = await gatewayClientOf(medplum);
    if (!gateway) {
      throw new Error("The gateway's client was not found after provisioning (ClientApplication tagged gateway)");
    }
    const backends = await backendCredentials(medplum, report);
    const secrets = [
      EDGE_KEY_COMMENT,
      `EDGE_STATEMENT_KEY=${key.key}`,
      "# The gateway's own client: it checks at start that EDGE_STATEMENT_KEY is the Project's.",
      `GATEWAY_CLIENT_ID=${gateway.clientId}`,
      `GATEWAY_CLIENT_SECRET=${gateway.clientSecret}`,
      ...(backends.length > 0
        ? [
            "# Each tenant backend's client (client credentials): it reads its tenant's patients' records (docs/clinic.md).",
            ...backends.flatMap((b) => [
              `${b.name}_CLIENT_ID=${b.clientId}`,
              `${b.name}_CLIENT_SECRET=${b.clientSecret}`,
            ]),
          ]
        : []),
      '',
    ].join('\n');
    writeFileSync(values.out, `${settings}${secrets}`, { mode: 0o600 });
    chmodSync(values.out, 0o600);
    console.log(
      `(written to ${values.out}, readable by you alone: it also holds EDGE_STATEMENT_KEY and the gateway's client, GATEWAY_CLIENT_ID and GATEWAY_CLIENT_SECRET)`,
    );
  }
  if (key.made) {
    console.log(
      `A new edge-statement key was made, stored in the Project and written to ${values.out} as EDGE_STATEMENT_KEY; keep that file with your secrets (the gateway reads it).`,
    );
  } else if (key.changed) {
    console.log(
      'The edge-statement key changed: restart every gateway of this Project with the new EDGE_STATEMENT_KEY (a gateway with the old one is refused by the bots).',
    );
  }
}

const EDGE_KEY_COMMENT =
  '# The edge-statement key: a secret, the same value as the Project secret `edge-statement-key` (docs/deploy.md).';

/**
 * What the operator needs next, as the environment the gateway reads (docs/deploy.md) and the patient
 * apps' client ids: no secret (the edge key and client secrets stay where they were).
 */
export function operatorSettings(
  baseUrl: string,
  projectId: string,
  report: Pick<ProvisionReport, 'references'>,
  origins: readonly string[] = [],
): string {
  const apps = Object.entries(report.references)
    .filter(([key, reference]) => key.startsWith('app-') && reference.startsWith('ClientApplication/'))
    .map(
      ([key, reference]) =>
        `PATIENT_APP_CLIENT_ID_${tenantEnvName(key.slice('app-'.length))}=${reference.split('/')[1]}`,
    );
  return [
    '# The gateway (docs/deploy.md).',
    `MEDPLUM_REMOTE_BASE_URL=${baseUrl}`,
    `PROJECT_ID=${projectId}`,
    "# Each tenant's patient app signs in to Medplum with its client id (PKCE, no secret).",
    ...apps,
    ...(origins.length > 0
      ? ["# The origins of the patient apps (the clinic file's corsOrigins).", `CORS_ORIGINS=${origins.join(',')}`]
      : []),
    '',
  ].join('\n');
}

/** The plan of a dry run, for a person: each key that would be created, changed or retired, then a count. */
export function planText(plan: ProvisionReport): string {
  const retired = plan.updated.filter((k) => k.startsWith('retired-'));
  const updated = plan.updated.filter((k) => !k.startsWith('retired-'));
  return [
    JSON.stringify({
      dryRun: true,
      create: plan.created.length,
      update: updated.length,
      retire: retired.length,
      unchanged: plan.unchanged.length,
    }),
    ...plan.created.map((k) => `create   ${k}`),
    ...updated.map((k) => `update   ${k}`),
    ...retired.map((k) => `retire   ${k.slice('retired-'.length)}`),
    `(a dry run: nothing was written; ${plan.unchanged.length} unchanged)`,
  ].join('\n');
}

/** Each tenant backend's client, as `TENANT_BACKEND_<TENANT>_<KEY>` and its id and secret (for --out only). */
async function backendCredentials(
  medplum: MedplumClient,
  report: ProvisionReport,
): Promise<{ name: string; clientId: string; clientSecret: string }[]> {
  const credentials: { name: string; clientId: string; clientSecret: string }[] = [];
  for (const [key, reference] of Object.entries(report.references)) {
    if (!key.startsWith('backend-') || !reference.startsWith('ClientApplication/')) {
      continue;
    }
    const client = await medplum.readResource('ClientApplication', reference.split('/')[1] as string, {
      cache: 'no-cache',
    });
    const code = client.meta?.tag?.find((t) => t.system === SYSTEMS.tenantBackend)?.code;
    if (code && client.secret) {
      const [tenant, backend] = code.split('/');
      credentials.push({
        name: `TENANT_BACKEND_${tenantEnvName(tenant as string)}_${tenantEnvName(backend as string)}`,
        clientId: client.id as string,
        clientSecret: client.secret,
      });
    }
  }
  return credentials;
}

/** The signing secrets of the definition's webhook tenants that the environment gives. */
function webhookSecretsFromEnv(definition: ProvisionDefinition): Record<string, string> {
  return Object.fromEntries(
    webhookTenants(definition).flatMap(({ tenant, endpoint }) => {
      const secret = endpoint ? process.env[webhookSecretEnv(tenant)] : undefined;
      return secret ? [[tenant, secret]] : [];
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
