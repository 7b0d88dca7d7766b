import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { makeSimpleRequest } from '@medplum/fhir-router';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import type { CallerContext } from '../../src/embedded/context';
import { createTestStore, TEST_PROJECT } from '../support/store';

/** Resources per patient: ~50, so 10,000 patients is ~500,000 resources. */
const OBSERVATIONS_PER_PATIENT = 45;
const OTHER_PER_PATIENT = 4;

export interface Percentiles {
  p50: number;
  p99: number;
}

export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: at(0.5), p99: at(0.99) };
}

async function timed(iterations: number, work: (i: number) => Promise<unknown>): Promise<Percentiles> {
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    await work(i);
    samples.push(performance.now() - start);
  }
  return percentiles(samples);
}

function patientResources(p: number): Resource[] {
  const subject = { reference: `Patient/p${p}` };
  const resources: Resource[] = [
    { resourceType: 'Patient', id: `p${p}`, name: [{ family: `Family${p}` }] } as Resource,
  ];
  for (let i = 0; i < OBSERVATIONS_PER_PATIENT; i++) {
    resources.push({
      resourceType: 'Observation',
      status: 'final',
      code: { text: `obs-${i % 5}` },
      subject,
      effectiveDateTime: `2026-01-${String((i % 28) + 1).padStart(2, '0')}`,
    });
  }
  for (let i = 0; i < OTHER_PER_PATIENT; i++) {
    resources.push({ resourceType: 'Task', status: 'requested', intent: 'order', for: subject });
  }
  return resources;
}

async function seed(patients: number, path: string) {
  const store = createTestStore(path);
  const batch = 40;
  for (let start = 0; start < patients; start += batch) {
    await store.repo.withTransaction(async (tx) => {
      for (let p = start; p < Math.min(start + batch, patients); p++) {
        for (const resource of patientResources(p)) {
          await tx.createResource(resource, { assignedId: Boolean(resource.id) });
        }
      }
    });
  }
  return store;
}

function patientCaller(p: number): CallerContext {
  return {
    project: TEST_PROJECT,
    membership: {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${TEST_PROJECT.id}` },
      user: { reference: 'User/u' },
      profile: { reference: `Patient/p${p}` },
    },
    profile: { reference: `Patient/p${p}` },
    accessPolicy: {
      resourceType: 'AccessPolicy',
      resource: [
        { resourceType: 'Observation', criteria: `Observation?_compartment=Patient/p${p}`, readonly: true },
        { resourceType: 'Patient', criteria: `Patient?_compartment=Patient/p${p}` },
        { resourceType: 'Task', criteria: `Task?_compartment=Patient/p${p}`, readonly: true },
      ],
    },
  };
}

/** Patient-scoped search as a patient would run it (policy-restricted, through Medplum's router). */
async function measureScopedSearch(patients: number, iterations: number) {
  const dir = mkdtempSync(join(tmpdir(), 'pc-bench-'));
  const seedStart = performance.now();
  const store = await seed(patients, join(dir, 'bench.sqlite'));
  const seedSeconds = (performance.now() - seedStart) / 1000;
  const resources = (store.db.reader.prepare('SELECT count(*) AS n FROM resource').get() as { n: number }).n;
  const search = await timed(iterations, async (i) => {
    const p = (i * 7919) % patients;
    const [, bundle] = await store.router.handleRequest(
      makeSimpleRequest('GET', 'Observation?_count=20&_sort=-date'),
      store.repo.withCaller(patientCaller(p)),
    );
    if (((bundle as Bundle).entry?.length ?? 0) !== 20) {
      throw new Error('unexpected search result');
    }
  });
  return { patients, resources, seedSeconds, search, store, dir };
}

export async function runEmbeddedStoreBench(options: { largePatients: number; iterations: number }) {
  const small = await measureScopedSearch(100, options.iterations);
  const large = await measureScopedSearch(options.largePatients, options.iterations);
  const repo = large.store.repo.withCaller(patientCaller(42));
  const read = await timed(options.iterations, () => repo.readResource('Patient', 'p42'));
  const transaction = await timed(Math.min(options.iterations, 200), async (i) => {
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: Array.from({ length: 5 }, (_, k) => ({
        request: { method: 'POST' as const, url: 'Observation' },
        resource: {
          resourceType: 'Observation' as const,
          status: 'final' as const,
          code: { text: `tx-${i}-${k}` },
          subject: { reference: 'Patient/p42' },
        },
      })),
    };
    const [outcome] = await large.store.router.handleRequest(
      { ...makeSimpleRequest('POST', '', bundle), config: { transactions: true } },
      large.store.repo,
    );
    if (outcome.id !== 'ok') {
      throw new Error('transaction failed');
    }
  });
  for (const run of [small, large]) {
    run.store.db.close();
    rmSync(run.dir, { recursive: true, force: true });
  }
  return {
    small: { patients: small.patients, resources: small.resources, search: small.search },
    large: {
      patients: large.patients,
      resources: large.resources,
      search: large.search,
      seedSeconds: large.seedSeconds,
    },
    ratioP50: large.search.p50 / small.search.p50,
    read,
    search: large.search,
    transaction,
  };
}
