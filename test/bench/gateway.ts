import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

const ROUNDS = 3;

/** The round with the median throughput (its latencies come with it). */
function median(rounds: LoadResult[]): LoadResult {
  return [...rounds].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)[Math.floor(rounds.length / 2)];
}

function start(script: string, env: Record<string, string>): { child: ChildProcess; firstLine: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const lines = createInterface({ input: child.stdout as NonNullable<ChildProcess['stdout']> });
  const firstLine = new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return { child, firstLine };
}

/** CPU time (user + system, µs) a helper process has used so far, asked over IPC. */
function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (usage) =>
      resolve((usage as { user: number; system: number }).user + (usage as { system: number }).system),
    );
    child.send('cpu');
  });
}

async function load(url: string, token: string, seconds: number): Promise<LoadResult> {
  const result = await autocannon({
    url,
    connections: 32,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}

/**
 * The gateway against the same call made straight to the embedded Medplum over HTTP, in one run,
 * at concurrency 32: each in its own process, load from this one; `seconds` per round, 3 rounds each.
 */
export async function runGatewayBench(seconds: number) {
  const embedded = start('test/bench/serve-embedded.ts', { PORT: '18103' });
  const info = JSON.parse(await embedded.firstLine) as {
    baseUrl: string;
    projectId: string;
    patientId: string;
    token: string;
  };
  const gateway = start('test/bench/serve-gateway.ts', {
    PORT: '18080',
    MEDPLUM_BASE_URL: info.baseUrl,
    PROJECT_ID: info.projectId,
  });
  await gateway.firstLine;
  try {
    const pairs = [
      {
        name: 'record-plane read',
        gateway: `http://127.0.0.1:18080/v1/fhir/Patient/${info.patientId}`,
        direct: `${info.baseUrl}fhir/R4/Patient/${info.patientId}`,
      },
      {
        name: 'GET /v1/patient/profile',
        gateway: 'http://127.0.0.1:18080/v1/patient/profile',
        direct: `${info.baseUrl}fhir/R4/Patient/${info.patientId}`,
      },
    ];
    const results = [];
    for (const pair of pairs) {
      // Warm both paths (JIT, key sets) before measuring.
      await load(pair.direct, info.token, 1);
      await load(pair.gateway, info.token, 1);
      // Alternate short rounds and keep the median of each side, so that drift on a shared machine
      // (other processes, thermal) falls on both sides alike.
      const directRounds: LoadResult[] = [];
      const gatewayRounds: LoadResult[] = [];
      let gatewayCpu = 0;
      let backendCpuViaGateway = 0;
      let gatewayRequests = 0;
      for (let round = 0; round < ROUNDS; round++) {
        directRounds.push(await load(pair.direct, info.token, seconds));
        const [g0, b0] = await Promise.all([cpuOf(gateway.child), cpuOf(embedded.child)]);
        const result = await load(pair.gateway, info.token, seconds);
        const [g1, b1] = await Promise.all([cpuOf(gateway.child), cpuOf(embedded.child)]);
        gatewayRounds.push(result);
        gatewayCpu += g1 - g0;
        backendCpuViaGateway += b1 - b0;
        gatewayRequests += result.requestsPerSecond * seconds;
      }
      const direct = median(directRounds);
      const viaGateway = median(gatewayRounds);
      results.push({
        name: pair.name,
        direct,
        gateway: viaGateway,
        throughputRatio: viaGateway.requestsPerSecond / direct.requestsPerSecond,
        /** CPU per request, µs: what each process spends, independent of how the cores are shared. */
        cpuPerRequest: { gateway: gatewayCpu / gatewayRequests, backend: backendCpuViaGateway / gatewayRequests },
        p99Ratio: viaGateway.p99 / direct.p99,
      });
    }
    return results;
  } finally {
    gateway.child.kill();
    embedded.child.kill();
  }
}
