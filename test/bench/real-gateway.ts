import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { MedplumClient } from '@medplum/core';
import { Pool } from 'undici';
import { DEMO_PASSWORD, DEMO_PATIENTS, demoEmail } from '../../src/provision/demo';

/**
 * A gateway over a real Medplum against the same read straight from Medplum: `GET /v1/patient/profile`
 * through the gateway and `GET fhir/R4/Patient/{id}` with the same patient token, at concurrency 1 and
 * 16, in alternating rounds of one run. The gateway runs as an operator runs it (`src/node.ts` with
 * `MEDPLUM_REMOTE_BASE_URL`, its own process, access log on), so its CPU is its own: read from the
 * kernel's per-thread run time of that process. Beside it, the same read through the least proxy Node
 * can be (test/bench/bare-proxy.ts), measured the same way: what any hop costs on this machine. The
 * project must be provisioned with the demo (the lane's, or `provision --demo`).
 */
export interface PairedRound {
  concurrency: number;
  direct: Round;
  /** The least a Node proxy costs on this machine (test/bench/bare-proxy.ts): the anchor. */
  bare: Round & { cpuUs: number | undefined };
  gateway: Round & { cpuUs: number | undefined };
}

interface Round {
  perSecond: number;
  p50: number;
  p99: number;
}

export async function runRealGatewayBench(options: {
  baseUrl: string;
  projectId: string;
  seconds: number;
  /** The gateway's secrets for that project (EDGE_STATEMENT_KEY, GATEWAY_CLIENT_ID, GATEWAY_CLIENT_SECRET). */
  gateway: Record<string, string>;
}): Promise<PairedRound[]> {
  const { baseUrl, projectId } = options;
  // Three demo patients, each reading her own Patient: a target's rounds go to each in turn, because one
  // patient's reads at full speed through all three would spend her FHIR quota (50,000 a minute) and meet 429s.
  const patients = await Promise.all(
    DEMO_PATIENTS.slice(0, 3).map((p) => signIn(baseUrl, projectId, demoEmail(p.key, p.tenant))),
  );
  const gatewayPort = await freePort();
  const barePort = await freePort();
  const gateway = await startProcess(['src/node.ts'], 'Patient Care API at', {
    MEDPLUM_REMOTE_BASE_URL: baseUrl,
    PROJECT_ID: projectId,
    ...options.gateway,
    PORT: String(gatewayPort),
    HOST: '127.0.0.1',
    // One caller drives the whole load here: admission would rightly hold it to its share.
    IN_FLIGHT_PER_CALLER: '4096',
    IN_FLIGHT_TOTAL: '4096',
  });
  const bare = await startProcess(
    ['test/bench/bare-proxy.ts', baseUrl, String(barePort), '127.0.0.3'],
    'listening',
    {},
  );
  const medplum = new URL(baseUrl);
  // Medplum also counts requests per client address (60,000 a minute), and the bots' own calls come from
  // its host (127.0.0.1): each target's load comes from an address of its own on the loopback network. The
  // gateway names that address to Medplum (X-Forwarded-For); the bare proxy connects from it.
  type Target = (patient: SignedIn) => { origin: string; path: string; token: string; from: string };
  const targets: Record<'direct' | 'bare' | 'gateway', Target> = {
    direct: (p) => ({
      origin: medplum.origin,
      path: `${medplum.pathname}fhir/R4/Patient/${p.id}`,
      token: p.token,
      from: '127.0.0.2',
    }),
    bare: (p) => ({
      origin: `http://127.0.0.1:${barePort}`,
      path: `/fhir/R4/Patient/${p.id}`,
      token: p.token,
      from: '127.0.0.3',
    }),
    gateway: (p) => ({
      origin: `http://127.0.0.1:${gatewayPort}`,
      path: '/v1/patient/profile',
      token: p.token,
      from: '127.0.0.4',
    }),
  };
  type Load = ReturnType<Target>;
  // The load comes from undici's pool (one connection per caller), the cheapest client on Node, so
  // that as much of the machine as possible is left to Medplum and the gateway.
  const round = async (target: Load, concurrency: number, seconds: number) => {
    const headers = { authorization: `Bearer ${target.token}` };
    const pool = new Pool(target.origin, { connections: concurrency, connect: { localAddress: target.from } });
    const latencies: number[] = [];
    const until = performance.now() + seconds * 1000;
    try {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() < until) {
            const began = performance.now();
            const r = await pool.request({ path: target.path, method: 'GET', headers });
            await r.body.arrayBuffer();
            if (r.statusCode !== 200) {
              throw new Error(`${target.path}: ${r.statusCode}`);
            }
            latencies.push(performance.now() - began);
          }
        }),
      );
    } finally {
      await pool.close();
    }
    latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
    return { perSecond: latencies.length / seconds, p50: at(0.5), p99: at(0.99), count: latencies.length };
  };
  const measured = async (target: Load, process: Started, concurrency: number) => {
    const before = process.cpuNs();
    const result = await round(target, concurrency, options.seconds);
    const after = process.cpuNs();
    const cpuUs =
      before === undefined || after === undefined ? undefined : (after - before) / 1000 / Math.max(result.count, 1);
    return { ...result, cpuUs };
  };
  try {
    const rounds: PairedRound[] = [];
    for (const concurrency of [1, 16]) {
      // Warm every path, then alternate three rounds of each and keep the median by the ratio to direct.
      for (const [i, target] of Object.values(targets).entries()) {
        await round(target(patients[i] as SignedIn), concurrency, 1);
      }
      const pairs: PairedRound[] = [];
      for (let i = 0; i < 3; i++) {
        const patient = (k: number) => patients[(i + k) % patients.length] as SignedIn;
        const direct = await round(targets.direct(patient(0)), concurrency, options.seconds);
        const bareRound = await measured(targets.bare(patient(1)), bare, concurrency);
        const through = await measured(targets.gateway(patient(2)), gateway, concurrency);
        pairs.push({ concurrency, direct, bare: bareRound, gateway: through });
      }
      pairs.sort((a, b) => a.gateway.perSecond / a.direct.perSecond - b.gateway.perSecond / b.direct.perSecond);
      rounds.push(pairs[1] as PairedRound);
    }
    return rounds;
  } finally {
    await Promise.all([gateway.stop(), bare.stop()]);
  }
}

interface SignedIn {
  id: string;
  token: string;
}

async function signIn(baseUrl: string, projectId: string, email: string): Promise<SignedIn> {
  const medplum = new MedplumClient({ baseUrl, cacheTime: 0 });
  const login = await medplum.startLogin({ email, password: DEMO_PASSWORD, projectId });
  if (!login.code) {
    throw new Error(`${email}: Medplum asked for more than a password`);
  }
  await medplum.processCode(login.code);
  return { id: medplum.getProfile()?.id as string, token: medplum.getAccessToken() as string };
}

interface Started {
  cpuNs: () => number | undefined;
  stop: () => Promise<void>;
}

/** A TypeScript entry in a process of its own (this Node, tsx), ready once it prints `ready`. */
async function startProcess(args: string[], ready: string, env: Record<string, string>): Promise<Started> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      if (out.includes(ready)) {
        // From here on its output (the gateway's access log) is read and dropped, as a log shipper would.
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${args[0]} exited (${code}): ${stderr.slice(-500)}`)));
  });
  const pid = child.pid as number;
  return {
    cpuNs: () => processCpuNs(pid),
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The CPU time of every thread of a process, in ns (Linux `/proc/<pid>/task/<tid>/schedstat`); else undefined. */
function processCpuNs(pid: number): number | undefined {
  const tasks = `/proc/${pid}/task`;
  if (!existsSync(tasks)) {
    return undefined;
  }
  let total = 0;
  for (const tid of readdirSync(tasks)) {
    try {
      total += Number(readFileSync(`${tasks}/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return total;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
