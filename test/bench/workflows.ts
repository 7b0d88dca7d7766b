import type { DocumentReference } from '@medplum/fhirtypes';
import { startTestGateway } from '../support/gateway';
import { NPM_START_ENV, start } from './gateway';
import { type Call, median, type PairedFigures, pairedRounds } from './paired';

export interface WorkflowFigures extends PairedFigures {
  name: string;
  concurrency: number;
}

export interface WorkflowBenchResult {
  figures: WorkflowFigures[];
  rssIdleMiB: number;
  rssAfterMiB: number;
  workflowSeconds: number;
}

/** What serve-npm-start reports first, and then per IPC message. */
interface Ready {
  token: string;
}
interface Usage {
  rss: number;
}

/**
 * Every workflow call that exists against a profile read, on one process set up as `npm start` (the
 * gateway on the main thread, Medplum on its own), load from this process, at concurrency 1 and 16.
 * Profile and workflow rounds alternate; each ratio is taken within a pair, then the median. The
 * process's RSS is read before any load and after all of it.
 */
export async function runWorkflowBench(seconds: number, rounds: number): Promise<WorkflowBenchResult> {
  const helper = start<Ready>('test/bench/serve-npm-start.ts', {
    PORT: '18203',
    GATEWAY_PORT: '18180',
    ...NPM_START_ENV,
  });
  const rss = () =>
    new Promise<number>((resolve) => {
      helper.child.once('message', (usage) => resolve((usage as Usage).rss / 2 ** 20));
      helper.child.send('usage');
    });
  try {
    const { token } = await helper.ready;
    const base = 'http://127.0.0.1:18180';
    const rssIdleMiB = await rss();
    // The patient accepts what is asked of them once; the bench then repeats that acceptance.
    const requirements = (await (
      await fetch(`${base}/v1/agreements/requirements`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { unmet: { url: string; version: string }[] };
    const acceptance = JSON.stringify({ agreements: requirements.unmet.map((u) => `${u.url}|${u.version}`) });
    const first = await fetch(`${base}/v1/agreements/acceptances`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: acceptance,
    });
    if (first.status !== 200) {
      throw new Error(`acceptance answered ${first.status}`);
    }
    const profile: Call = { method: 'GET', path: '/v1/patient/profile' };
    const workflows: { name: string; call: Call }[] = [
      { name: 'GET /v1/agreements/requirements', call: { method: 'GET', path: '/v1/agreements/requirements' } },
      {
        name: 'POST /v1/agreements/acceptances (repeated)',
        call: { method: 'POST', path: '/v1/agreements/acceptances', body: acceptance },
      },
    ];
    const figures: WorkflowFigures[] = [];
    let workflowSeconds = 0;
    for (const concurrency of [1, 16]) {
      for (const { name, call } of workflows) {
        const paired = await pairedRounds({
          baseUrl: base,
          token,
          profile,
          workflow: { call },
          concurrency,
          seconds,
          rounds,
        });
        workflowSeconds += 1 + rounds * seconds;
        figures.push({ name, concurrency, ...paired });
      }
    }
    return { figures, rssIdleMiB, rssAfterMiB: await rss(), workflowSeconds };
  } finally {
    helper.child.kill();
  }
}

export interface StoreSizeResult {
  /** p50 of one requirements `$execute`, ms, with the demo catalog only. */
  small: number;
  smallDocuments: number;
  /** The same after the patients' documents were added. */
  large: number;
  largeDocuments: number;
  ratio: number;
}

/**
 * The requirements call as the store grows with documents that are not agreements (patients'
 * clinical documents): its cost must follow the catalog, not the store. Sequential calls of
 * `GET /v1/agreements/requirements` by a demo patient, in process, p50.
 */
export async function runRequirementsStoreSizeBench(documents = 2000, calls = 300): Promise<StoreSizeResult> {
  const gw = await startTestGateway();
  const backend = gw.backend;
  try {
    const patient = backend.patients.alice;
    const p50 = async () => {
      const times: number[] = [];
      for (let i = 0; i < calls; i++) {
        const started = performance.now();
        const answer = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
        if (answer.status !== 200) {
          throw new Error(`requirements answered ${answer.status}`);
        }
        times.push(performance.now() - started);
      }
      return median(times.slice(calls / 5));
    };
    const countDocuments = async () =>
      (await backend.systemRepo.search({ resourceType: 'DocumentReference', count: 0, total: 'accurate' })).total ?? 0;
    const smallDocuments = await countDocuments();
    const small = await p50();
    const patients = Object.values(backend.patients);
    for (let batch = 0; batch < documents / 500; batch++) {
      await backend.admin.executeBatch({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: 500 }, (_, i) => {
          const owner = patients[i % patients.length].patient;
          const doc: DocumentReference = {
            resourceType: 'DocumentReference',
            status: 'current',
            subject: { reference: `Patient/${owner.id}` },
            identifier: [{ system: 'https://bench.example/document', value: `${batch}-${i}` }],
            date: new Date(Date.UTC(2026, 0, 1) + (batch * 500 + i) * 60_000).toISOString(),
            content: [
              { attachment: { contentType: 'application/pdf', url: `https://bench.example/${batch}-${i}.pdf` } },
            ],
          };
          return { resource: doc, request: { method: 'POST' as const, url: 'DocumentReference' } };
        }),
      });
    }
    const largeDocuments = await countDocuments();
    const large = await p50();
    return { small, smallDocuments, large, largeDocuments, ratio: large / small };
  } finally {
    await gw.close();
  }
}
