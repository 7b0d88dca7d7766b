import { NPM_START_ENV, start } from './gateway';

export interface OverloadFigures {
  rssIdleMiB: number;
  burst: { calls: number; statuses: Record<string, number> };
  rssAfterBurstMiB: number;
  loadSeconds: number;
  load: { calls: number; statuses: Record<string, number> };
  rssAfterLoadMiB: number;
  graphqlStatus: number;
}

/**
 * Issue 24: one process set up as `npm start` (the gateway with its own admission limits, Medplum on its
 * thread with its bounded heap), its RSS idle, after a burst of 1,000 concurrent workflow calls from one
 * token, and after `seconds` of workflow load at concurrency 16; and what a GraphQL query gets. The FHIR
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
    const graphql = await fetch(`${baseUrl}fhir/R4/$graphql`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query: '{ PatientList { id } }' }),
    });
    await graphql.arrayBuffer();
    return {
      rssIdleMiB,
      burst: { calls: burst.length, statuses: count(burst) },
      rssAfterBurstMiB,
      loadSeconds: seconds,
      load: { calls: loadStatuses.length, statuses: count(loadStatuses) },
      rssAfterLoadMiB,
      graphqlStatus: graphql.status,
    };
  } finally {
    helper.child.kill();
  }
}
