import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** `npm start`'s entry as a user runs it: a process, a port, a printed token, then curl. */
const freePort = () =>
  new Promise<number>((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });

/** Retries `check` until it passes (output and files arrive a little after the answers). */
async function eventually(check: () => Promise<void> | void, ms = 5_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > until) {
        throw err;
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  }
}

let child: ChildProcess | undefined;
let cwd: string | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  // It holds live demo tokens.
  if (cwd) {
    await rm(cwd, { recursive: true, force: true });
  }
});

describe('npm start (src/node.ts)', () => {
  it('prints a token that reads the demo patient through the gateway, and stops on SIGTERM', {
    timeout: 90_000,
  }, async () => {
    const port = await freePort();
    // Its own working directory (it writes .data/demo-tokens.json there), with the built bot bundles.
    cwd = await mkdtemp(join(tmpdir(), 'patient-care-start-'));
    await symlink(resolve('dist'), join(cwd, 'dist'));
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    child = spawn(process.execPath, ['--import', tsx, resolve('src/node.ts')], {
      cwd,
      env: { ...process.env, PORT: String(port), EMBEDDED_MEDPLUM_DB: ':memory:' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let errors = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      errors += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => child?.once('exit', (code) => done(code)));
    const token = await new Promise<string>((done, fail) => {
      const check = setInterval(() => {
        const match = /token:\s+(\S+)/.exec(output);
        if (match) {
          clearInterval(check);
          done(match[1]);
        }
      }, 50);
      exited.then((code) => {
        clearInterval(check);
        fail(new Error(`npm start exited with ${code}: ${errors}`));
      });
    });

    const base = `http://127.0.0.1:${port}`;
    const profile = await fetch(`${base}/v1/patient/profile`, { headers: { authorization: `Bearer ${token}` } });
    expect(profile.status).toBe(200);
    expect(await profile.json()).toMatchObject({ resourceType: 'Patient', name: [{ given: ['Alice'] }] });
    const record = await fetch(`${base}/v1/fhir/Observation`, { headers: { authorization: `Bearer ${token}` } });
    expect(record.status).toBe(200);
    expect(((await record.json()) as { entry?: unknown[] }).entry?.length).toBeGreaterThan(0);

    // The access log is JSON lines without the token.
    await eventually(() => {
      const logLines = output.split('\n').filter((line) => line.startsWith('{'));
      expect(logLines.map((line) => JSON.parse(line).route)).toContain('/v1/patient/profile');
      expect(logLines.join('\n')).not.toContain(token);
    });
    await eventually(async () => {
      const file = await readFile(join(cwd as string, '.data', 'demo-tokens.json'), 'utf8');
      expect(Object.keys(JSON.parse(file)).sort()).toEqual(['alice', 'bob', 'carol', 'dave']);
    });

    child.kill('SIGTERM');
    expect(await exited).toBe(143);
  });
});
