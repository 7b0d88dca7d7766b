import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NpmStart, startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';

/**
 * The README's code, as a reader copies it (issue 28 item 7): its TypeScript blocks (the SDK section) are
 * one program, type-checked under strict `tsc` and run with Node 24 against `npm start`; its curl block
 * runs in bash against the same. Each in a folder inside the project, so that `@patient-care/sdk` and
 * `@medplum/core` resolve as they do for an app that installs them.
 */
const README = readFileSync('README.md', 'utf8');
const WORK = resolve('.readme-check');

/** The fenced blocks of a language, in order. */
const blocks = (language: string) =>
  [...README.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1]);

let started: NpmStart;
beforeAll(async () => {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  started = await startNpmStart();
}, scaled(90_000));
afterAll(async () => {
  await started?.stop();
  rmSync(WORK, { recursive: true, force: true });
});

const node = process.execPath;
const run = (command: string, args: string[], env: Record<string, string> = {}) =>
  spawnSync(command, args, {
    cwd: WORK,
    encoding: 'utf8',
    timeout: scaled(120_000),
    // Node 24 first on the PATH: what the README's `node` and `npx` mean here.
    env: { ...process.env, PATH: `${dirname(node)}:${process.env.PATH}`, ...env },
  });

describe('the README’s examples, run', () => {
  it(
    'its TypeScript (the SDK section) compiles under strict tsc and runs: she signs in, does the intake, her open tasks listed',
    () => {
      const program = blocks('ts').join('\n');
      expect(program).toContain("from '@patient-care/sdk'");
      writeFileSync(join(WORK, 'app.mts'), program);
      writeFileSync(
        join(WORK, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            target: 'es2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            noEmit: true,
            skipLibCheck: true,
            types: ['node'],
          },
          files: ['app.mts'],
        }),
      );
      const tsc = run(node, [resolve('node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json']);
      expect(tsc.status, `${tsc.stdout}${tsc.stderr}`).toBe(0);
      const tsx = resolve('node_modules/tsx/dist/cli.mjs');
      const ran = run(node, [tsx, 'app.mts'], { API: started.gatewayUrl });
      expect(ran.status, `${ran.stdout}${ran.stderr}`).toBe(0);
      expect(ran.stdout).toContain('Alice');
      // Every task of the intake done, none left open.
      expect(ran.stdout).toMatch(/\b[1-9]\d* intake tasks done; still open: \[\]/);
    },
    scaled(180_000),
  );

  it(
    'its curl block runs in bash: a patient registered, homed and located, then a demo patient signed in',
    () => {
      const [curl] = blocks('sh').filter((b) => b.includes('auth/newuser'));
      expect(curl).toBeDefined();
      const script = curl.replace(/^API=.*$/m, `API=${started.gatewayUrl.replace(/\/$/, '')}`);
      writeFileSync(join(WORK, 'curl.sh'), `set -euo pipefail\n${script}`);
      // Every curl's arguments, as \`ps\` shows them to anyone on the machine, recorded by a curl in front.
      const real = spawnSync('sh', ['-c', 'command -v curl'], { encoding: 'utf8' }).stdout.trim();
      mkdirSync(join(WORK, 'bin'), { recursive: true });
      writeFileSync(
        join(WORK, 'bin', 'curl'),
        `#!/bin/sh\nprintf '%s\\n' "$*" >> ${join(WORK, 'curl-args.log')}\nexec ${real} "$@"\n`,
        { mode: 0o755 },
      );
      const ran = run('bash', ['curl.sh'], { PATH: `${join(WORK, 'bin')}:${dirname(node)}:${process.env.PATH}` });
      expect(ran.status, `${ran.stdout}${ran.stderr}`).toBe(0);
      // No token, password or PKCE verifier among them: secrets go on a pipe.
      const args = readFileSync(join(WORK, 'curl-args.log'), 'utf8');
      expect(args.split('\n').length).toBeGreaterThan(8);
      expect(args).not.toMatch(/Bearer|password|code_verifier|"login"|patient-care-demo/);
      // Her Patient after the address step, then Alice's profile.
      expect(ran.stdout).toMatch(/"address":\[\{"state":"NY","country":"US"\}\]/);
      expect(ran.stdout).toContain('"given":["Alice"]');
      // Run as the README says (bash -e), with a client id Medplum does not know: it stops at the first
      // failure (the registration), printing the server's answer; nothing after it runs.
      writeFileSync(join(WORK, 'curl-wrong.sh'), script);
      const wrong = run('bash', ['-e', 'curl-wrong.sh'], {
        PATIENT_APP_CLIENT_ID_SOUTHRIDGE: 'ffffffff-0000-4000-8000-000000000000',
      });
      expect(wrong.status).not.toBe(0);
      expect(wrong.stderr).toMatch(/unexpected answer: .*(not found|Client|client)/i);
      expect(wrong.stdout).not.toContain('"organization"');
    },
    scaled(120_000),
  );
});
