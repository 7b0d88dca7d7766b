import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { scaled } from '../support/slowness';

/** The operator's command, as `npm run provision --` runs it (Medplum's credentials from the environment). */
const provision = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'src/provision/cli.ts', ...args], {
    encoding: 'utf8',
    timeout: scaled(60_000),
    env: { PATH: process.env.PATH ?? '', ...env },
  });

describe('npm run provision against a Medplum over HTTP', () => {
  it('signs in with credentials from the environment, changes nothing on a provisioned project, and writes what the operator needs (its one secret the edge key, for her alone)', async () => {
    const server = spawn(process.execPath, ['--import', 'tsx', 'src/embedded/main.ts'], {
      env: { ...process.env, EMBEDDED_MEDPLUM_PORT: '18113', EMBEDDED_MEDPLUM_DB: ':memory:' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: server.stdout }).once('line', resolve);
        server.once('exit', (code) => reject(new Error(`embedded exited ${code}`)));
      });
      const info = JSON.parse(line) as {
        baseUrl: string;
        projectId: string;
        adminClientId: string;
        adminClientSecret: string;
      };
      const env = (secret: string) => ({
        MEDPLUM_BASE_URL: info.baseUrl,
        MEDPLUM_CLIENT_ID: info.adminClientId,
        MEDPLUM_CLIENT_SECRET: secret,
      });
      const out = join(mkdtempSync(join(tmpdir(), 'provision-')), 'gateway.env');
      // The Project has an edge-statement key (the embedded Medplum made one): without one given, refused
      // before anything is written.
      const keyless = provision(['--demo', '--out', out], env(info.adminClientSecret));
      expect(keyless.status).toBe(2);
      expect(keyless.stderr).toContain('This Project has an edge-statement key, and EDGE_STATEMENT_KEY is not set');
      expect(existsSync(out)).toBe(false);
      // A new key given replaces it, and says so; the same key again changes nothing.
      const key = randomBytes(32).toString('hex');
      const rotated = provision(['--demo', '--out', out], { ...env(info.adminClientSecret), EDGE_STATEMENT_KEY: key });
      expect(rotated.status, rotated.stderr).toBe(0);
      expect(rotated.stdout).toContain('The edge-statement key changed: restart every gateway');
      const run = provision(['--demo', '--out', out], { ...env(info.adminClientSecret), EDGE_STATEMENT_KEY: key });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).not.toContain('The edge-statement key changed');
      // Printed nowhere, written to the operator's file only.
      for (const output of [rotated.stdout, rotated.stderr, run.stdout, run.stderr]) {
        expect(output).not.toContain(key);
      }
      const report = JSON.parse(run.stdout.split('\n').find((l) => l.startsWith('{')) as string) as {
        created: number;
        updated: number;
        unchanged: number;
        deployed: string[];
      };
      expect(report).toMatchObject({ created: 0, updated: 0, deployed: [] });
      expect(report.unchanged).toBeGreaterThan(20);
      // The settings: printed and written (readable by the operator only), with the ids Medplum holds.
      const written = readFileSync(out, 'utf8');
      expect(written).toContain(`\nEDGE_STATEMENT_KEY=${key}\n`);
      expect(run.stdout).toContain(written.slice(0, written.indexOf('# The edge-statement key')).trim());
      expect(statSync(out).mode & 0o077).toBe(0);
      expect(written).toContain(`MEDPLUM_REMOTE_BASE_URL=${info.baseUrl}`);
      expect(written).toMatch(/^PROJECT_ID=[0-9a-f-]{36}$/m);
      for (const tenant of DEMO_TENANTS) {
        expect(written).toContain(`PATIENT_APP_CLIENT_ID_${tenant.key.toUpperCase()}=${tenant.appId}`);
      }
      expect(written).not.toContain(info.adminClientSecret);
      // A secret in a file works the same; a wrong one fails to sign in.
      const secretFile = join(mkdtempSync(join(tmpdir(), 'provision-')), 'secret');
      writeFileSync(secretFile, `${info.adminClientSecret}\n`);
      const fromFile = provision(['--client-secret-file', secretFile], {
        ...env(''),
        MEDPLUM_CLIENT_SECRET: '',
        EDGE_STATEMENT_KEY: key,
      });
      expect(fromFile.status, fromFile.stderr).toBe(0);
      expect(provision([], env('wrong')).status).toBe(1);
    } finally {
      server.kill();
    }
  });

  it('--help answers; a secret on the command line, an unknown option or missing credentials are refused, naming what to do', () => {
    const help = provision(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: npm run provision');
    expect(help.stdout).toContain('MEDPLUM_CLIENT_SECRET');

    const flagged = provision(['--client-secret', 'shh'], {
      MEDPLUM_BASE_URL: 'http://127.0.0.1:9/',
      MEDPLUM_CLIENT_ID: 'x',
    });
    expect(flagged.status).toBe(2);
    expect(flagged.stderr).toContain('not taken on the command line');
    expect(flagged.stderr).not.toContain('shh');

    const unknown = provision(['--bogus']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('--bogus');

    const missing = provision([], { MEDPLUM_BASE_URL: 'http://127.0.0.1:9/' });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('MEDPLUM_CLIENT_ID');
    expect(missing.stderr).toContain('MEDPLUM_CLIENT_SECRET');
  });
});
