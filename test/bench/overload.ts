import { NPM_START_ENV, start } from './gateway';

export interface OverloadFigures {
  rssIdleMiB: number;
  burst: { calls: number; statuses: Record<string, number> };
  rssAfterBurstMiB: number;
  loadSeconds: number;
  load: { calls: number; statuses: Record<string, number> };
  rssAfterLoadMiB: number;
  graphql: {
    firstStatus: number;
    firstMs: number;
    /** Sequential queries once the schema is built. */
    warm: { calls: number; statuses: Record<string, number>; p50Ms: number };
    rssAfterMiB: number;
  };
  /** The same burst again, with GraphQL's schema live on Medplum's thread. */
  burstWithSchema: { calls: number; statuses: Record<string, number> };
  rssAfterBurstWithSchemaMiB: number;
}

/**
 * Issue 24: one process set up as `npm start` (the gateway with its own admission limits, Medplum on its
 * thread, its heap paced), its RSS idle, after a burst of 1,000 concurrent workflow calls from one
 * token, and after `seconds` of workflow load at concurrency 16; then GraphQL: the first query (which
 * builds Medplum's schema), the p50 of 50 once warm, and the burst again with the schema live. The FHIR
 * quota is raised (as for every load section), so that the load is work served, not quota refusals.
 */
export async function runOverloadBench(seconds: number): Promise<OverloadFigures> {
  const helper = start<{ token: string; baseUrl: string }>('test/bench/serve-npm-start.ts', {
    PORT: '18303',
    GATEWAY_PORT: '18280',
    BENCH_ADMISSION: 'default',
    ...NPM_START_ENV,
  });
  const rss = () =>
    new Promise<number>((resolve) => {
      helper.child.once('message', (usage) => resolve((usage as { rss: number }).rss / 2 ** 20));
      helper.child.send('usage');
    });
  const count = (statuses: number[]) =>
    statuses.reduce<Record<string, number>>((all, s) => {
      all[s] = (all[s] ?? 0) + 1;
      return all;
    }, {});
  try {
    const { token, baseUrl } = await helper.ready;
    const base = 'http://127.0.0.1:18280';
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const rssIdleMiB = await rss();
    const requirements = (await (await fetch(`${base}/v1/agreements/requirements`, { headers })).json()) as {
      unmet: { url: string; version: string }[];
    };
    const body = JSON.stringify({ agreements: requirements.unmet.map((u) => `${u.url}|${u.version}`) });
    const accept = () =>
      fetch(`${base}/v1/agreements/acceptances`, { method: 'POST', headers, body }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    const burst = await Promise.all(Array.from({ length: 1000 }, accept));
    const rssAfterBurstMiB = await rss();
    const loadStatuses: number[] = [];
    const until = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (Date.now() < until) {
          const r = await fetch(`${base}/v1/agreements/requirements`, { headers });
          await r.arrayBuffer();
          loadStatuses.push(r.status);
        }
      }),
    );
    const rssAfterLoadMiB = await rss();
    const query = async () => {
      const began = performance.now();
      const r = await fetch(`${baseUrl}fhir/R4/$graphql`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query: '{ PatientList { id name { family } } }' }),
      });
      await r.arrayBuffer();
      return { status: r.status, ms: performance.now() - began };
    };
    const first = await query();
    const warm: { status: number; ms: number }[] = [];
    for (let i = 0; i < 50; i++) {
      warm.push(await query());
    }
    const warmMs = warm.map((w) => w.ms).sort((a, b) => a - b);
    const rssAfterGraphqlMiB = await rss();
    const burstWithSchema = await Promise.all(Array.from({ length: 1000 }, accept));
    const rssAfterBurstWithSchemaMiB = await rss();
    return {
      rssIdleMiB,
      burst: { calls: burst.length, statuses: count(burst) },
      rssAfterBurstMiB,
      loadSeconds: seconds,
      load: { calls: loadStatuses.length, statuses: count(loadStatuses) },
      rssAfterLoadMiB,
      graphql: {
        firstStatus: first.status,
        firstMs: first.ms,
        warm: {
          calls: warm.length,
          statuses: count(warm.map((w) => w.status)),
          p50Ms: warmMs[Math.floor(warmMs.length / 2)],
        },
        rssAfterMiB: rssAfterGraphqlMiB,
      },
      burstWithSchema: { calls: burstWithSchema.length, statuses: count(burstWithSchema) },
      rssAfterBurstWithSchemaMiB,
    };
  } finally {
    helper.child.kill();
  }
}
