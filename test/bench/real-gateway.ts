import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { MedplumClient } from '@medplum/core';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';

/**
 * Issue 38 item 1 on a real Medplum: the same Patient read through the gateway (`GET /v1/patient/profile`,
 * a gateway served over HTTP on this machine, pointed at the Medplum) and straight from Medplum
 * (`GET fhir/R4/Patient/{id}`) with the same patient token, at concurrency 1 and 16, in alternating
 * rounds of one run. The project must be provisioned with the demo (the lane's, or `provision --demo`).
 */
export interface PairedRound {
  concurrency: number;
  direct: { perSecond: number; p50: number; p99: number; cpuUs: number };
  gateway: { perSecond: number; p50: number; p99: number; cpuUs: number };
}

export async function runRealGatewayBench(options: {
  baseUrl: string;
  projectId: string;
  seconds: number;
}): Promise<PairedRound[]> {
  const { baseUrl, projectId } = options;
  const alice = new MedplumClient({ baseUrl, cacheTime: 0 });
  const login = await alice.startLogin({ email: demoEmail('alice', 'northwind'), password: DEMO_PASSWORD, projectId });
  if (!login.code) {
    throw new Error('alice: Medplum asked for more than a password');
  }
  await alice.processCode(login.code);
  const token = alice.getAccessToken() as string;
  const patientId = alice.getProfile()?.id as string;
  const app = createApp({
    medplum: { baseUrl },
    issuer: baseUrl,
    projectId,
    limits: { ...DEFAULT_LIMITS, inFlightPerCaller: 4096, inFlightTotal: 4096 },
    edgeSigner: createEdgeSigner('bench-edge-key-not-a-secret-0123456789'),
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  const gatewayUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/patient/profile`;
  const directUrl = `${baseUrl}fhir/R4/Patient/${patientId}`;
  const headers = { authorization: `Bearer ${token}` };
  const round = async (url: string, concurrency: number, seconds: number) => {
    const latencies: number[] = [];
    // This process's CPU per request: the load generator's alone (direct), or with the gateway's.
    const cpu = process.cpuUsage();
    const until = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until) {
          const began = performance.now();
          const r = await fetch(url, { headers });
          await r.arrayBuffer();
          if (r.status !== 200) {
            throw new Error(`${url}: ${r.status}`);
          }
          latencies.push(performance.now() - began);
        }
      }),
    );
    latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
    const used = process.cpuUsage(cpu);
    return {
      perSecond: latencies.length / seconds,
      p50: at(0.5),
      p99: at(0.99),
      cpuUs: (used.user + used.system) / Math.max(latencies.length, 1),
    };
  };
  try {
    const rounds: PairedRound[] = [];
    for (const concurrency of [1, 16]) {
      // Warm both paths, then alternate three rounds of each and keep the median pair by throughput.
      await round(directUrl, concurrency, 1);
      await round(gatewayUrl, concurrency, 1);
      const pairs: PairedRound[] = [];
      for (let i = 0; i < 3; i++) {
        const direct = await round(directUrl, concurrency, options.seconds);
        const gateway = await round(gatewayUrl, concurrency, options.seconds);
        pairs.push({ concurrency, direct, gateway });
      }
      pairs.sort((a, b) => a.gateway.perSecond / a.direct.perSecond - b.gateway.perSecond / b.direct.perSecond);
      rounds.push(pairs[1] as PairedRound);
    }
    return rounds;
  } finally {
    server.close();
  }
}
