import { writeFileSync } from 'node:fs';
import { MedplumClient, normalizeErrorString } from '@medplum/core';
import type { ClientApplication, Project, ProjectMembership } from '@medplum/fhirtypes';
import { CREDENTIAL_HELP, CREDENTIAL_OPTIONS, credentialsFrom, parseCommand } from '../cli/options';
import { platformDefinition } from './definition';

/** The name of the project-admin client this command makes (and finds again). */
export const PROVISIONING_CLIENT = 'Patient Care provisioning';

const COMMAND = {
  name: 'bootstrap',
  summary:
    "Step 1 on a Medplum where you are super admin: the project (found by name, else created with Medplum's Project/$init), the features the platform needs (" +
    `${platformDefinition.project.features.join(', ')}` +
    "), and a project-admin ClientApplication for `npm run provision`. Idempotent: a second run finds both and changes nothing. Signs in with a super-admin ClientApplication (Medplum's defaultSuperAdminClientId / defaultSuperAdminClientSecret, or a client of the super-admin project). Writes the provisioning client's credentials to --out (mode 600), never to the terminal.",
  options: {
    ...CREDENTIAL_OPTIONS,
    'project-name': { type: 'string' },
    out: { type: 'string' },
  },
  help: [
    ...CREDENTIAL_HELP.map((line) =>
      line.replace('the ClientApplication to sign in as', 'a super-admin ClientApplication'),
    ),
    '  --project-name NAME         the project to find or create (required)',
    '  --out FILE                  where to write MEDPLUM_BASE_URL, MEDPLUM_CLIENT_ID, MEDPLUM_CLIENT_SECRET and PROJECT_ID of the provisioning client (required)',
    '  --help                      this text',
  ],
} as const;

/** What a Medplum without a super admin for you (a hosted one) needs instead, said when we are refused. */
const HOSTED = [
  'This step needs a super admin of the Medplum server. On a Medplum you do not run (e.g. app.medplum.com):',
  '  1. create the project in the Medplum app (Register / New project);',
  `  2. ask Medplum's support to enable the project features: ${platformDefinition.project.features.join(', ')};`,
  '  3. in the admin app, Project -> Clients -> New client, then Project -> Members: that client, Admin checked;',
  '  4. run `npm run provision` with that client (docs/deploy.md).',
].join('\n');

async function main(): Promise<void> {
  const values = parseCommand(COMMAND);
  if (!values) {
    return;
  }
  const credentials = credentialsFrom(values);
  const name = values['project-name'];
  if ('missing' in credentials || !name || !values.out) {
    const missing = [
      'missing' in credentials ? credentials.missing : '',
      !name ? '--project-name' : '',
      !values.out ? '--out' : '',
    ].filter(Boolean);
    console.error(`missing: ${missing.join(', ').replace(/missing: /g, '')}\n(see npm run bootstrap -- --help)`);
    process.exitCode = 2;
    return;
  }
  const medplum = new MedplumClient({ baseUrl: credentials.baseUrl, cacheTime: 0 });
  try {
    await medplum.startClientLogin(credentials.clientId, credentials.clientSecret);
  } catch (err) {
    console.error(`Medplum refused the sign-in: ${normalizeErrorString(err)}`);
    process.exitCode = 1;
    return;
  }
  let result: Bootstrapped;
  const progress = { step: 'finding the project' };
  try {
    result = await bootstrap(medplum, name, platformDefinition.project.features, progress);
  } catch (err) {
    console.error(`Medplum refused ${progress.step}: ${normalizeErrorString(err)}\n\n${HOSTED}`);
    process.exitCode = 1;
    return;
  }
  writeFileSync(
    values.out,
    [
      `# npm run bootstrap, ${new Date().toISOString()}: the project-admin client npm run provision signs in as. A secret: keep it out of git.`,
      `MEDPLUM_BASE_URL=${credentials.baseUrl}`,
      `MEDPLUM_CLIENT_ID=${result.client.id}`,
      `MEDPLUM_CLIENT_SECRET=${result.client.secret}`,
      `PROJECT_ID=${result.project.id}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  console.log(
    [
      `project ${result.project.id} (${result.createdProject ? 'created' : 'found'}), features ${(result.project.features ?? []).join(', ')}${result.featuresChanged ? ' (set)' : ''}`,
      `provisioning client ${result.client.id} (${result.createdClient ? 'created' : 'found'}, project admin)`,
      `written to ${values.out} (a secret: keep it out of git). Next (docs/deploy.md, step 2), in bash or sh:`,
      `  set -a; . ${values.out.includes('/') ? values.out : `./${values.out}`}; set +a; npm run provision -- --clinic your-clinic.yaml --out gateway.env   # your clinic (docs/clinic.md); makes the gateway's key and client, written there`,
      '  or, for the real-Medplum lane on a project of its own (docs/real-medplum.md): npm run verify:medplum',
    ].join('\n'),
  );
}

export interface Bootstrapped {
  project: Project & { id: string };
  client: ClientApplication & { id: string };
  createdProject: boolean;
  createdClient: boolean;
  featuresChanged: boolean;
}

/**
 * As a super admin: the project by name (else `Project/$init`), the features added (never removed), and
 * a ClientApplication of the project named PROVISIONING_CLIENT (else made through the admin API) whose
 * membership is admin. Each step reads first, so a second run writes nothing.
 */
export async function bootstrap(
  medplum: MedplumClient,
  name: string,
  features: readonly string[],
  /** Which step is under way (for the message when one is refused). */
  progress: { step: string } = { step: '' },
): Promise<Bootstrapped> {
  progress.step = 'finding the project';
  const found = (await medplum.searchResources('Project', { name })).filter((p) => p.name === name);
  if (found.length > 1) {
    throw new Error(`${found.length} projects are named "${name}": give a name that is one project's`);
  }
  let project = found[0] as (Project & { id: string }) | undefined;
  const createdProject = !project;
  if (!project) {
    progress.step = 'creating the project (Project/$init)';
    const init = (await medplum.post(medplum.fhirUrl('Project', '$init'), {
      resourceType: 'Parameters',
      parameter: [{ name: 'name', valueString: name }],
    })) as Project | { parameter?: { name: string; resource?: Project }[] };
    const made = 'parameter' in init ? init.parameter?.find((p) => p.name === 'return')?.resource : (init as Project);
    if (!made?.id) {
      throw new Error('Project/$init answered no project');
    }
    project = (await medplum.readResource('Project', made.id)) as Project & { id: string };
  }
  const wanted = [...new Set([...(project.features ?? []), ...features])] as Project['features'];
  const featuresChanged = (wanted?.length ?? 0) !== (project.features ?? []).length;
  if (featuresChanged) {
    progress.step = "setting the project's features";
    project = (await medplum.updateResource({ ...project, features: wanted })) as Project & { id: string };
  }
  progress.step = 'finding the provisioning client';
  const clients = (await medplum.searchResources('ClientApplication', { name: PROVISIONING_CLIENT })).filter(
    (c) => c.meta?.project === project?.id && c.name === PROVISIONING_CLIENT,
  );
  let client = clients[0] as (ClientApplication & { id: string }) | undefined;
  const createdClient = !client;
  if (!client) {
    progress.step = 'creating the provisioning client (admin API)';
    const made = (await medplum.post(`admin/projects/${project.id}/client`, {
      name: PROVISIONING_CLIENT,
      description: 'Applies the Patient Care platform definition (npm run provision).',
    })) as ClientApplication & { id: string };
    client = (await medplum.readResource('ClientApplication', made.id)) as ClientApplication & { id: string };
  }
  progress.step = "making the client the project's admin";
  const membership = (await medplum.searchOne('ProjectMembership', {
    profile: `ClientApplication/${client.id}`,
  })) as (ProjectMembership & { id: string }) | undefined;
  if (!membership) {
    throw new Error(`ClientApplication/${client.id} has no membership in the project`);
  }
  if (!membership.admin) {
    await medplum.updateResource({ ...membership, admin: true });
  }
  if (!client.secret) {
    throw new Error(`the secret of ClientApplication/${client.id} is not readable: sign in as a super admin`);
  }
  return { project, client, createdProject, createdClient, featuresChanged };
}

if (process.argv[1]?.endsWith('bootstrap.ts')) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  });
}
