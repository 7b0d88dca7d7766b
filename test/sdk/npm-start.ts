import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface NpmStart {
  /** The gateway's base URL, e.g. http://127.0.0.1:40123 */
  baseUrl: string;
  /** The demo patients' access tokens by key (`alice`, `bob`, ...), as `.data/demo-tokens.json` holds them. */
  tokens: Record<string, string>;
  stop(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });

/**
 * `npm start`'s entry (src/node.ts) as a user runs it: its own process on free ports, the embedded
 * Medplum in memory, a working directory of its own with the built bot bundles. Ready once it has
 * written the demo tokens, which it does after listening.
 */
export async function startNpmStart(): Promise<NpmStart> {
  const [port, medplumPort] = [await freePort(), await freePort()];
  const cwd = await mkdtemp(join(tmpdir(), 'patient-care-sdk-gateway-'));
  await symlink(resolve('dist'), join(cwd, 'dist'));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child: ChildProcess = spawn(process.execPath, ['--import', tsx, resolve('src/node.ts')], {
    cwd,
    env: {
      ...process.env,
      PORT: String(port),
      EMBEDDED_MEDPLUM_PORT: String(medplumPort),
      EMBEDDED_MEDPLUM_DB: ':memory:',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    errors += chunk.toString();
  });
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((done) =>
    child.once('exit', (code) => {
      exitCode = code;
      done();
    }),
  );
  const stop = async () => {
    if (exitCode === undefined) {
      child.kill('SIGKILL');
      await exited;
    }
    // It holds live demo tokens.
    await rm(cwd, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exitCode !== undefined || Date.now() > deadline) {
      await stop();
      throw new Error(
        `src/node.ts ${exitCode === undefined ? 'was not ready in 60 s' : `exited with ${exitCode}`}: ${errors}`,
      );
    }
    // Absent, or still being written: not ready.
    const tokens = await readFile(join(cwd, '.data', 'demo-tokens.json'), 'utf8')
      .then((text) => JSON.parse(text) as Record<string, string>)
      .catch(() => undefined);
    if (tokens) {
      return { baseUrl: `http://127.0.0.1:${port}`, tokens, stop };
    }
    await new Promise((done) => setTimeout(done, 100));
  }
}
