import { readFileSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';

/**
 * The operator commands' command lines (provisioning, bootstrap, the real-Medplum lane): `--help`
 * answers, an unknown or missing option names itself, and Medplum's credentials come from the
 * environment as Medplum's own CLI reads them (`MEDPLUM_BASE_URL`, `MEDPLUM_CLIENT_ID`,
 * `MEDPLUM_CLIENT_SECRET`) or a file, never from a flag: a flag's value is echoed by npm, kept in shell
 * history and shown in process lists.
 */
export interface Command<O extends NonNullable<ParseArgsConfig['options']>> {
  /** `npm run <name> --`, as the usage line shows it. */
  name: string;
  /** What it does, in a sentence or two. */
  summary: string;
  options: O;
  /** One line per option (and environment variable) for `--help`. */
  help: readonly string[];
}

export type Parsed<O extends NonNullable<ParseArgsConfig['options']>> = ReturnType<
  typeof parseArgs<{ options: O; strict: true; allowPositionals: false }>
>['values'];

/** The command's options; undefined after `--help` (printed) or a mistake (printed, exit code 2). */
export function parseCommand<O extends NonNullable<ParseArgsConfig['options']>>(
  command: Command<O>,
  argv: string[] = process.argv.slice(2),
  out: Pick<Console, 'log' | 'error'> = console,
): Parsed<O> | undefined {
  const usage = () =>
    [`usage: npm run ${command.name} -- [options]`, '', command.summary, '', ...command.help].join('\n');
  if (argv.includes('--help') || argv.includes('-h')) {
    out.log(usage());
    return undefined;
  }
  if (argv.some((a) => a === '--client-secret' || a.startsWith('--client-secret='))) {
    return mistake(
      out,
      'a client secret is not taken on the command line: set MEDPLUM_CLIENT_SECRET, or pass --client-secret-file PATH',
      usage,
    );
  }
  try {
    const { values } = parseArgs({ args: argv, options: command.options, strict: true, allowPositionals: false });
    return values as Parsed<O>;
  } catch (err) {
    return mistake(out, err instanceof Error ? err.message : String(err), usage);
  }
}

function mistake(out: Pick<Console, 'error'>, message: string, usage: () => string): undefined {
  out.error(`${message}\n\n${usage()}`);
  process.exitCode = 2;
  return undefined;
}

/** The options every command that signs in to Medplum as a client takes. */
export const CREDENTIAL_OPTIONS = {
  'base-url': { type: 'string' },
  'client-id': { type: 'string' },
  'client-secret-file': { type: 'string' },
} as const;

export const CREDENTIAL_HELP = [
  "  --base-url URL              Medplum's base URL (or MEDPLUM_BASE_URL)",
  '  --client-id ID              the ClientApplication to sign in as (or MEDPLUM_CLIENT_ID)',
  '  --client-secret-file PATH   a file holding its secret (or MEDPLUM_CLIENT_SECRET; never a flag)',
];

export interface Credentials {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
}

/**
 * Medplum's credentials from the flags and the environment; a message naming what is missing otherwise.
 * The base URL ends with a slash (MedplumClient joins paths to it).
 */
export function credentialsFrom(
  values: { 'base-url'?: string; 'client-id'?: string; 'client-secret-file'?: string },
  env: Record<string, string | undefined> = process.env,
): Credentials | { missing: string } {
  const baseUrl = values['base-url'] ?? env.MEDPLUM_BASE_URL;
  const clientId = values['client-id'] ?? env.MEDPLUM_CLIENT_ID;
  const file = values['client-secret-file'];
  const clientSecret = file ? readFileSync(file, 'utf8').trim() : env.MEDPLUM_CLIENT_SECRET;
  const missing = [
    !baseUrl && '--base-url (or MEDPLUM_BASE_URL)',
    !clientId && '--client-id (or MEDPLUM_CLIENT_ID)',
    !clientSecret && 'MEDPLUM_CLIENT_SECRET (or --client-secret-file)',
  ].filter(Boolean);
  if (missing.length > 0) {
    return { missing: `missing: ${missing.join(', ')}` };
  }
  return {
    baseUrl: (baseUrl as string).endsWith('/') ? (baseUrl as string) : `${baseUrl}/`,
    clientId: clientId as string,
    clientSecret: clientSecret as string,
  };
}
