import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, realpath, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NpmStart, startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';

const run = promisify(execFile);
const SDK = resolve('packages/sdk');
const CONSUMER = resolve('test/sdk/consumer');

interface Manifest {
  name: string;
  files: string[];
  dependencies: Record<string, string>;
}

/**
 * A patient app's folder with @patient-care/sdk installed as npm would install its tarball
 * (package.json and its `files`, built by the global setup) beside its declared dependencies and
 * nothing else: a run-time import the package forgot to declare fails here, where inside this
 * repository it would resolve. Also @types/node, which a Node app written in TypeScript has.
 */
async function installSdk(): Promise<string> {
  const app = await mkdtemp(join(tmpdir(), 'patient-care-sdk-app-'));
  const manifest = JSON.parse(await readFile(join(SDK, 'package.json'), 'utf8')) as Manifest;
  const installed = join(app, 'node_modules', manifest.name);
  for (const entry of ['package.json', ...manifest.files]) {
    await cp(join(SDK, entry), join(installed, entry), { recursive: true });
  }
  for (const dependency of [...Object.keys(manifest.dependencies), '@types/node']) {
    const link = join(app, 'node_modules', dependency);
    await mkdir(dirname(link), { recursive: true });
    await symlink(await realpath(resolve('node_modules', dependency)), link);
  }
  await cp(CONSUMER, app, { recursive: true });
  return app;
}

let app: string;
let gateway: NpmStart | undefined;
beforeAll(async () => {
  app = await installSdk();
  gateway = await startNpmStart();
}, scaled(90_000));
afterAll(async () => {
  await gateway?.stop();
  await rm(app, { recursive: true, force: true });
});

/** Runs a consumer script with Node 24 as its user would, as a demo patient; its printed JSON. */
async function runAs(patient: string, script: string): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [script], {
    cwd: app,
    env: {
      PATH: process.env.PATH,
      PATIENT_CARE_URL: gateway?.gatewayUrl,
      PATIENT_TOKEN: gateway?.tokens[patient],
    },
  });
  return JSON.parse(stdout);
}

/** The gateway's own `GET /v1/config` project, which a script must have read through the SDK. */
async function projectId(): Promise<string> {
  const response = await fetch(`${gateway?.gatewayUrl}/v1/config`);
  return ((await response.json()) as { projectId: string }).projectId;
}

/** What both scripts print for a demo patient who had accepted nothing. */
async function expectFirstAgreementRun(output: Record<string, unknown>, given: string): Promise<void> {
  expect(output.projectId).toBe(await projectId());
  expect(output.given).toEqual([given]);
  const unmet = output.unmet as { url: string; version: string }[];
  expect(unmet.length).toBeGreaterThan(0);
  for (const entry of unmet) {
    expect(Object.keys(entry).sort()).toEqual(['category', 'sourceUrl', 'url', 'version']);
  }
  // `accept(unmet)`: the requirements' entries, as they were answered, are what got accepted.
  const acceptances = output.acceptances as { agreementUrl: string; agreementVersion: string }[];
  expect(acceptances.map((a) => `${a.agreementUrl}|${a.agreementVersion}`).sort()).toEqual(
    unmet.map((u) => `${u.url}|${u.version}`).sort(),
  );
  expect(output.satisfiedAfter).toBe(true);
  expect(output.refused).toEqual({ apiError: true, status: 401, code: 'unauthenticated' });
}

describe('@patient-care/sdk as a package', () => {
  it('is imported by name from a plain .mjs with top-level await and runs config, profile, requirements, accept(unmet) against npm start', {
    timeout: scaled(30_000),
  }, async () => {
    await expectFirstAgreementRun(await runAs('alice', 'app.mjs'), 'Alice');
  });

  it('runs the same script as .mts (top-level await in TypeScript) under Node 24', {
    timeout: scaled(30_000),
  }, async () => {
    await expectFirstAgreementRun(await runAs('bob', 'app.mts'), 'Bob');
  });

  it('is also required from CommonJS (Node loads the ES module)', { timeout: scaled(30_000) }, async () => {
    expect(await runAs('alice', 'config.cjs')).toEqual({ projectId: await projectId() });
  });

  it('type-checks a TypeScript app against the built declarations alone, which refuse what the contract refuses', {
    timeout: scaled(60_000),
  }, async () => {
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', join(app, 'tsconfig.json')], { cwd: app }).then(
      () => 'ok',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(checked).toBe('ok');
  });
});
