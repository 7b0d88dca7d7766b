import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** A free port on 127.0.0.1, as the OS hands one out. */
export const freePort = () =>
  new Promise<number>((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });

/** Retries `check` until it passes (output and files arrive a little after the answers). */
export async function eventually(check: () => Promise<void> | void, ms = 5_000): Promise<void> {
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

export interface NpmStart {
  child: ChildProcess;
  /** Its working directory (it writes `.data/` there), with the built bot bundles. */
  cwd: string;
  /** The gateway, and the embedded Medplum's own API. */
  gatewayUrl: string;
  medplumUrl: string;
  /** The demo patient's token it printed. */
  token: string;
  /** Every demo patient's token, by key (`alice`, ...), as it wrote them (an in-memory store: `.data/demo-tokens.port-<port>.json`). */
  tokens: Record<string, string>;
  stdout(): string;
  exited: Promise<number | null>;
  /** Kills it and removes its directory (which holds live demo tokens). */
  stop(): Promise<void>;
}

/**
 * `npm start`'s entry (src/node.ts) as a user runs it: its own process and working directory, on
 * random ports of 127.0.0.1, an in-memory store unless `env` says otherwise. Resolves once it has
 * printed its banner.
 */
export async function startNpmStart(env: Record<string, string> = {}): Promise<NpmStart> {
  const [port, medplumPort] = [await freePort(), await freePort()];
  const cwd = await mkdtemp(join(tmpdir(), 'patient-care-start-'));
  await symlink(resolve('dist'), join(cwd, 'dist'));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child = spawn(process.execPath, ['--import', tsx, resolve('src/node.ts')], {
    cwd,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      EMBEDDED_MEDPLUM_PORT: String(medplumPort),
      EMBEDDED_MEDPLUM_DB: ':memory:',
      ...env,
    },
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
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  let running = true;
  exited.then(() => {
    running = false;
  });
  const stop = async () => {
    if (running) {
      child.kill('SIGKILL');
      await exited;
    }
    await rm(cwd, { recursive: true, force: true });
  };
  try {
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
    // Written just after the banner.
    let tokens: Record<string, string> = {};
    await eventually(async () => {
      tokens = JSON.parse(
        await readFile(join(cwd, '.data', `demo-tokens.port-${env.PORT ?? port}.json`), 'utf8'),
      ) as Record<string, string>;
    }, 10_000);
    return {
      child,
      cwd,
      gatewayUrl: `http://127.0.0.1:${port}`,
      medplumUrl: `http://localhost:${medplumPort}/`,
      token,
      tokens,
      stdout: () => output,
      exited,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
