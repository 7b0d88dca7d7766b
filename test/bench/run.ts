import { performance } from 'node:perf_hooks';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { loadFhirSchema } from '../../src/embedded/schema';
import { demoDefinition } from '../../src/provision/demo';
import { runEmbeddedStoreBench } from './embedded-store';
import { runGatewayBench } from './gateway';

/**
 * `npm run bench`: figures measured in ONE run on this machine; the targets are ratios within it.
 * BENCH_PATIENTS (default 10000, ~500,000 resources) sizes the large store.
 */
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

async function main(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  console.log('## Gateway vs direct (embedded Medplum over HTTP, concurrency 32, same run)');
  for (const r of await runGatewayBench(seconds)) {
    const line = (
      label: string,
      x: { requestsPerSecond: number; p50: number; p99: number; non2xx: number; errors: number },
    ) =>
      `  ${label.padEnd(8)} ${x.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${x.p50} ms  p99 ${x.p99} ms  (non-2xx ${x.non2xx}, errors ${x.errors})`;
    console.log(r.name);
    console.log(line('direct', r.direct));
    console.log(line('gateway', r.gateway));
    console.log(
      `  CPU per request: gateway ${r.cpuPerRequest.gateway.toFixed(0)} µs, backend ${r.cpuPerRequest.backend.toFixed(0)} µs`,
    );
    console.log(
      `  ratios: throughput ${r.throughputRatio.toFixed(2)}x (target >= 0.8) ${r.throughputRatio >= 0.8 ? 'MET' : 'NOT MET'}; p99 ${r.p99Ratio.toFixed(2)}x (target <= 1.3) ${r.p99Ratio <= 1.3 ? 'MET' : 'NOT MET'}`,
    );
  }

  const schemaStart = performance.now();
  loadFhirSchema();
  const schemaMs = performance.now() - schemaStart;
  const startupStart = performance.now();
  const embedded = await launchEmbeddedMedplum({ dbPath: ':memory:', definition: demoDefinition() });
  const startupMs = performance.now() - startupStart;
  embedded.close();
  console.log('## Embedded Medplum');
  console.log(`start-up with demo data (schema already loaded): ${fmt(startupMs)}; FHIR schema load: ${fmt(schemaMs)}`);

  if (process.env.BENCH_SKIP_STORE) {
    return;
  }
  const largePatients = Number(process.env.BENCH_PATIENTS ?? 10_000);
  const store = await runEmbeddedStoreBench({ largePatients, iterations: 500 });
  console.log(`patient-scoped search (policy-restricted, _sort=-date, _count=20):`);
  console.log(
    `  ${store.small.patients} patients / ${store.small.resources} resources: p50 ${fmt(store.small.search.p50)}  p99 ${fmt(store.small.search.p99)}`,
  );
  console.log(
    `  ${store.large.patients} patients / ${store.large.resources} resources: p50 ${fmt(store.large.search.p50)}  p99 ${fmt(store.large.search.p99)}  (seeded in ${store.large.seedSeconds.toFixed(0)} s)`,
  );
  console.log(
    `  ratio large/small p50: ${store.ratioP50.toFixed(2)}x (target <= 2x) ${store.ratioP50 <= 2 ? 'MET' : 'NOT MET'}`,
  );
  console.log(`read (as patient, large store): p50 ${fmt(store.read.p50)}  p99 ${fmt(store.read.p99)}`);
  console.log(
    `5-entry transaction (large store): p50 ${fmt(store.transaction.p50)}  p99 ${fmt(store.transaction.p99)}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
