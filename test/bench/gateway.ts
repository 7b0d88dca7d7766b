import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { cpus } from 'node:os';
import autocannon from 'autocannon';

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

/**
 * CPU time per request, µs (user + system), over the gateway rounds; Medplum's also over the direct
 * rounds. In `same-thread`, Medplum's figure includes the gateway's work.
 */
export interface CpuPerRequest {
  gateway?: number;
  backend: number;
  /** `npm-start`: the whole process (both threads plus V8's and libuv's helper threads). */
  process?: number;
  backendDirect: number;
  loadGenerator: number;
}

export interface PairResult {
  name: string;
  direct: LoadResult;
  gateway: LoadResult;
  /** Median over rounds of gateway/direct, each round paired with the direct round just before it. */
  throughputRatio: number;
  p99Ratio: number;
  cpuPerRequest: CpuPerRequest;
}

export interface LayoutResult {
  layout: Layout;
  pairs: PairResult[];
}

/**
 * Where the load generator (this process), the gateway and Medplum run. In production the gateway and
 * Medplum run on different hosts and the clients elsewhere; two CPUs cannot give each its own, so the
 * bench shows the layouts around that:
 * - `gateway-own-cpu`: the gateway alone on CPU 0; Medplum and the load generator share CPU 1, in
 *   the direct rounds too;
 * - `medplum-own-cpu`: Medplum alone on CPU 1; the gateway shares CPU 0 with the load generator;
 * - `shared`: the same processes on every CPU, so the gateway takes CPU from Medplum;
 * - `npm-start`: one process as `npm start` runs it: the gateway on the main thread, Medplum on a
 *   thread of its own (which also serves the direct rounds' HTTP);
 * - `same-thread`: one process, the gateway and Medplum on one thread (how the tests run them).
 * Medplum is single-threaded, so in the direct rounds it has one CPU at most.
 */
export type Layout = 'gateway-own-cpu' | 'medplum-own-cpu' | 'shared' | 'npm-start' | 'same-thread';

/** CPUs (taskset lists) of the load generator, Medplum and the gateway, per pinned layout. */
const PINNING: Partial<Record<Layout, { load: string; medplum: string; gateway: string }>> = {
  'gateway-own-cpu': { load: '1', medplum: '1', gateway: '0' },
  'medplum-own-cpu': { load: '0', medplum: '1', gateway: '0' },
};

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
/** Calls in flight (BENCH_GATEWAY_CONNECTIONS; issue 27 measures the gateway's own cost at 1). */
const CONNECTIONS = Number(process.env.BENCH_GATEWAY_CONNECTIONS ?? 32);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The round with the median throughput (its latencies come with it). */
function medianRound(rounds: LoadResult[]): LoadResult {
  return [...rounds].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)[Math.floor(rounds.length / 2)];
}

/** Whether this machine can pin processes to CPUs (Linux `taskset`, two CPUs or more). */
export function canPin(): boolean {
  if (cpus().length < 2) {
    return false;
  }
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Pins every thread of this process to `list` (a taskset CPU list such as `0` or `0-1`). */
function pinSelf(list: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', list, String(process.pid)], { stdio: 'ignore' });
}

export interface Helper<T> {
  child: ChildProcess;
  ready: Promise<T>;
}

/** A helper process; it reports readiness (and what it knows) as its first IPC message. */
export function start<T>(script: string, env: Record<string, string>, cpuList?: string): Helper<T> {
  const node = [process.execPath, '--import', 'tsx', script];
  const [command, ...args] = cpuList ? ['taskset', '-c', cpuList, ...node] : node;
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = new Promise<T>((resolve, reject) => {
    child.once('message', (message) => resolve(message as T));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return { child, ready };
}

/** CPU time (user + system, µs) used so far by the gateway and by Medplum in a helper, asked over IPC. */
interface CpuSoFar {
  gateway: number;
  medplum: number;
  /** The whole process, where the helper runs both (npm-start). */
  all: number;
}

function cpuOf(child: ChildProcess | undefined): Promise<CpuSoFar> {
  if (!child) {
    return Promise.resolve({ gateway: 0, medplum: 0, all: 0 });
  }
  return new Promise((resolve) => {
    child.once('message', (usage) => {
      const { gateway = 0, medplum = 0, all = 0 } = usage as Partial<CpuSoFar>;
      resolve({ gateway, medplum, all });
    });
    child.send('cpu');
  });
}

/** What `npm start` sets in its own environment (package.json): glibc's malloc arenas, see README. */
export const NPM_START_ENV = { MALLOC_ARENA_MAX: '2' };

/** A port free on 127.0.0.1 now (the bench's servers take random ports, never fixed ones). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The helper processes of each layout that has one beyond serve-embedded's plain Medplum. */
const HELPERS: Partial<Record<Layout, { script: string; env: Record<string, string> }>> = {
  'npm-start': { script: 'test/bench/serve-npm-start.ts', env: { ...NPM_START_ENV } },
  'same-thread': { script: 'test/bench/serve-embedded.ts', env: {} },
};

async function load(url: string, token: string, seconds: number): Promise<{ result: LoadResult; requests: number }> {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  return {
    result: {
      requestsPerSecond: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors,
      non2xx: result.non2xx,
    },
    requests: result.requests.total,
  };
}

/**
 * The floor pair of `npm start`'s layout: a relay that does no work of its own against the server it
 * relays to (test/bench/serve-relay.ts). Its CPU is not the gateway's or Medplum's, so none is reported.
 */
export const FLOOR_PAIR = 'the floor: a relay doing nothing (Hono on the main thread, a message to a thread and back)';

/** What a helper reports when ready: where Medplum is, and a demo patient's token. */
interface EmbeddedInfo {
  baseUrl: string;
  projectId: string;
  token: string;
}

/** The id of the token's patient (its `profile` claim, `Patient/<id>`). */
const patientIdOf = (token: string) =>
  (JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as { profile: string }).profile.split('/')[1];

/**
 * The gateway against the same call made straight to the embedded Medplum over HTTP, in one run,
 * at concurrency 32 (BENCH_GATEWAY_CONNECTIONS), load from this process; see `Layout` for where the servers run. Rounds alternate direct/gateway so that drift on a shared machine
 * falls on both; each ratio is taken within a pair of neighbouring rounds, then the median.
 */
export async function runGatewayBench(seconds: number, layout: Layout): Promise<LayoutResult> {
  const pinning = PINNING[layout];
  const oneProcess = HELPERS[layout];
  if (pinning) {
    pinSelf(pinning.load);
  }
  const [medplumPort, gatewayPort] = [String(await freePort()), await freePort()];
  const embedded = oneProcess
    ? start<EmbeddedInfo>(oneProcess.script, {
        ...oneProcess.env,
        PORT: medplumPort,
        GATEWAY_PORT: String(gatewayPort),
      })
    : start<EmbeddedInfo>('test/bench/serve-embedded.ts', { PORT: medplumPort }, pinning?.medplum);
  const gateway = oneProcess ? undefined : start<string>('test/bench/serve-gateway.ts', {}, pinning?.gateway);
  const helpers: (Helper<unknown> | undefined)[] = [];
  try {
    const info = await embedded.ready;
    const patientId = patientIdOf(info.token);
    if (gateway) {
      await gateway.ready;
      gateway.child.send({ medplumBaseUrl: info.baseUrl, projectId: info.projectId, port: gatewayPort });
      await new Promise((resolve) => gateway.child.once('message', resolve));
    }
    // Both servers' CPU so far: the gateway's and Medplum's, wherever each runs.
    const cpuNow = async (): Promise<CpuSoFar> => {
      const [a, b] = await Promise.all([cpuOf(gateway?.child), cpuOf(embedded.child)]);
      return { gateway: a.gateway + b.gateway, medplum: a.medplum + b.medplum, all: a.all + b.all };
    };
    const pairs = [
      {
        name: 'record-plane read',
        gateway: `http://127.0.0.1:${gatewayPort}/v1/fhir/Patient/${patientId}`,
        direct: `${info.baseUrl}fhir/R4/Patient/${patientId}`,
      },
      {
        name: 'GET /v1/patient/profile',
        gateway: `http://127.0.0.1:${gatewayPort}/v1/patient/profile`,
        direct: `${info.baseUrl}fhir/R4/Patient/${patientId}`,
      },
    ];
    // npm start's floor: a relay that does nothing over a server that does nothing (serve-relay.ts).
    const floor =
      layout === 'npm-start' ? start<{ direct: string; relay: string }>('test/bench/serve-relay.ts', {}) : undefined;
    helpers.push(floor);
    if (floor) {
      const { direct, relay } = await floor.ready;
      pairs.push({ name: FLOOR_PAIR, gateway: `${relay}floor`, direct: `${direct}floor` });
    }
    const results: PairResult[] = [];
    for (const pair of pairs) {
      // Warm both paths (JIT tiers, key sets, pools) before measuring.
      await load(pair.direct, info.token, 2);
      await load(pair.gateway, info.token, 2);
      const directRounds: LoadResult[] = [];
      const gatewayRounds: LoadResult[] = [];
      const throughputRatios: number[] = [];
      const p99Ratios: number[] = [];
      const cpu = { gateway: 0, backend: 0, process: 0, backendDirect: 0, loadGenerator: 0 };
      let requests = 0;
      let directRequests = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const d0 = await cpuNow();
        const direct = await load(pair.direct, info.token, seconds);
        const c0 = await cpuNow();
        const l0 = process.cpuUsage();
        const viaGateway = await load(pair.gateway, info.token, seconds);
        const l1 = process.cpuUsage(l0);
        const c1 = await cpuNow();
        directRounds.push(direct.result);
        gatewayRounds.push(viaGateway.result);
        throughputRatios.push(viaGateway.result.requestsPerSecond / direct.result.requestsPerSecond);
        p99Ratios.push(viaGateway.result.p99 / direct.result.p99);
        cpu.gateway += c1.gateway - c0.gateway;
        cpu.backend += c1.medplum - c0.medplum;
        cpu.process += c1.all - c0.all;
        cpu.backendDirect += c0.medplum - d0.medplum;
        directRequests += direct.requests;
        cpu.loadGenerator += l1.user + l1.system;
        requests += viaGateway.requests;
      }
      results.push({
        name: pair.name,
        direct: medianRound(directRounds),
        gateway: medianRound(gatewayRounds),
        throughputRatio: median(throughputRatios),
        p99Ratio: median(p99Ratios),
        cpuPerRequest: {
          gateway: layout === 'same-thread' ? undefined : cpu.gateway / requests,
          backend: cpu.backend / requests,
          process: layout === 'npm-start' ? cpu.process / requests : undefined,
          backendDirect: cpu.backendDirect / directRequests,
          loadGenerator: cpu.loadGenerator / requests,
        },
      });
    }
    return { layout, pairs: results };
  } finally {
    gateway?.child.kill();
    embedded.child.kill();
    for (const helper of helpers) {
      helper?.child.kill();
    }
    if (pinning) {
      // Every CPU again (availableParallelism() would now say 1: it follows this process's affinity).
      pinSelf(`0-${cpus().length - 1}`);
    }
  }
}
