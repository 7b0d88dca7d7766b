import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { roundTripTable } from '../../scripts/round-trips';
import { DEFAULT_LIMITS, MEDPLUM_IN_FLIGHT } from '../../src/app-env';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { loadFhirSchema } from '../../src/embedded/schema';
import { demoDefinition } from '../../src/provision/demo';
import { waitingOnSignInLimit } from '../../src/sdk';
import {
  botBundles,
  EMPTY_BOT,
  measureBadInputExecutes,
  measureBundleStarts,
  measureRealBadInputExecutes,
  zodAloneBundle,
} from './bot-start';
import { percentiles, runEmbeddedStoreBench } from './embedded-store';
import { printEventsBench } from './events';
import { runFairnessBench } from './fairness';
import { canPin, FLOOR_PAIR, type Layout, type LoadResult, runGatewayBench } from './gateway';
import { runIntakeBench } from './intake';
import { runOperationsBench } from './operations';
import { runOverloadBench } from './overload';
import type { Round } from './paired';
import { runQuotaBench } from './quota';
import { runRealGatewayBench } from './real-gateway';
import { runRealWorkflowBench } from './real-workflows';
import { runSchedulingBench } from './scheduling';
import { runSpineBench } from './spine';
import { runTrustCheckBench } from './trust-checks';
import { runRequirementsStoreSizeBench, runWorkflowBench } from './workflows';

/**
 * `npm run bench`: figures measured in ONE run on this machine; the targets are ratios within it.
 * BENCH_PATIENTS (default 10000, ~500,000 resources) sizes the large store; BENCH_LAYOUTS picks the
 * gateway-vs-direct layouts (`none`: none); BENCH_SECTIONS runs only the sections it lists, and
 * BENCH_SKIP_WORKFLOWS, BENCH_SKIP_INTAKE and BENCH_SKIP_STORE skip one (docs/benchmarks.md, Knobs).
 */
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

const SECTIONS = [
  'real-medplum',
  'quota',
  'overload',
  'fairness',
  'operations',
  'events',
  'gateway',
  'workflows',
  'intake',
  'spine',
  'scheduling',
  'trust',
  'bot-start',
  'embedded',
  'store',
] as const;
type Section = (typeof SECTIONS)[number];
const SKIPPED_BY: Partial<Record<Section, string>> = {
  workflows: 'BENCH_SKIP_WORKFLOWS',
  intake: 'BENCH_SKIP_INTAKE',
  store: 'BENCH_SKIP_STORE',
};

function runs(section: Section): boolean {
  const listed = process.env.BENCH_SECTIONS?.split(',').map((s) => s.trim());
  const unknown = listed?.filter((s) => !SECTIONS.includes(s as Section));
  if (unknown?.length) {
    throw new Error(`BENCH_SECTIONS: unknown ${unknown.join(', ')} (known: ${SECTIONS.join(', ')})`);
  }
  const skip = SKIPPED_BY[section];
  return (listed?.includes(section) ?? true) && !(skip && process.env[skip]);
}

const LAYOUT_TITLES: Record<Layout, string> = {
  'gateway-own-cpu': 'gateway alone on CPU 0; Medplum + load generator on CPU 1 (both rounds)',
  'medplum-own-cpu': 'Medplum alone on CPU 1; gateway + load generator on CPU 0',
  shared: 'gateway, Medplum and load generator on every CPU (the gateway takes CPU from Medplum)',
  'npm-start': 'one process, as `npm start`: the gateway on the main thread, Medplum on a thread of its own',
  'same-thread': 'one process, one thread: the gateway calling the embedded Medplum in memory (as the tests do)',
};

async function main(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 3);
  if (runs('real-medplum')) {
    await printRealMedplumBench();
  }
  if (runs('quota')) {
    await printQuotaBench();
  }
  // The load sections drive one patient and the bots far past a minute's FHIR quota on purpose: they
  // measure speed, so the embedded Medplum's quota (Medplum's 50,000 by default) is raised for them.
  process.env.EMBEDDED_FHIR_QUOTA ??= '1000000000';
  // And the direct rounds call Medplum's HTTP API from one address, past Medplum's 60,000 a minute.
  process.env.EMBEDDED_REQUEST_RATE_LIMIT ??= '-1';
  if (runs('overload')) {
    await printOverloadBench(Number(process.env.BENCH_OVERLOAD_SECONDS ?? 60));
  }
  if (runs('fairness')) {
    await printFairnessBench(Number(process.env.BENCH_FAIRNESS_SECONDS ?? 10));
  }
  if (runs('operations')) {
    await printOperationsBench();
  }
  if (runs('events')) {
    await printEventsBench();
  }
  const layouts: Layout[] = !runs('gateway')
    ? []
    : process.env.BENCH_LAYOUTS
      ? (process.env.BENCH_LAYOUTS.split(',').filter((l) => l !== 'none') as Layout[])
      : canPin()
        ? ['medplum-own-cpu', 'shared', 'npm-start']
        : ['shared', 'npm-start'];
  for (const layout of layouts) {
    const { pairs } = await runGatewayBench(seconds, layout);
    console.log(`## Gateway vs direct: ${LAYOUT_TITLES[layout]}`);
    console.log(
      `   direct = the embedded Medplum over HTTP; concurrency ${process.env.BENCH_GATEWAY_CONNECTIONS ?? 32}; ${seconds} s rounds alternating; same run`,
    );
    for (const r of pairs) {
      const line = (label: string, x: LoadResult) =>
        `  ${label.padEnd(8)} ${x.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${x.p50} ms  p99 ${x.p99} ms  (non-2xx ${x.non2xx}, errors ${x.errors})`;
      console.log(r.name);
      console.log(line('direct', r.direct));
      console.log(line('gateway', r.gateway));
      const connections = Number(process.env.BENCH_GATEWAY_CONNECTIONS ?? 32);
      // Issue 17's targets at concurrency 32; issue 27's at concurrency 1 (throughput only: p99 is whole ms).
      const target = connections === 1 ? 0.7 : 0.8;
      if (r.name === FLOOR_PAIR) {
        // The relay's added time per request at this concurrency, on each measured read's direct time.
        const added = connections / r.gateway.requestsPerSecond - connections / r.direct.requestsPerSecond;
        const bounds = pairs
          .filter((p) => p.name !== FLOOR_PAIR)
          .map((p) => {
            const direct = connections / p.direct.requestsPerSecond;
            return `${p.name} ${(direct / (direct + added)).toFixed(2)}x`;
          });
        console.log(
          `  throughput ${r.throughputRatio.toFixed(2)}x of direct; the relay adds ${(added * 1e6).toFixed(0)} µs a request, so a gateway doing nothing over the reads above would reach: ${bounds.join(', ')}`,
        );
        continue;
      }
      const cpu = r.cpuPerRequest;
      const us = (n: number) => `${n.toFixed(0)} µs`;
      console.log(
        cpu.gateway === undefined
          ? `  CPU per request: gateway + Medplum process ${us(cpu.backend)} (Medplum alone, direct: ${us(cpu.backendDirect)}), load generator ${us(cpu.loadGenerator)}`
          : cpu.process === undefined
            ? `  CPU per request: gateway ${us(cpu.gateway)}, Medplum ${us(cpu.backend)} (direct: ${us(cpu.backendDirect)}), load generator ${us(cpu.loadGenerator)}`
            : `  CPU per request: gateway thread ${us(cpu.gateway)}, Medplum thread ${us(cpu.backend)} (direct: ${us(cpu.backendDirect)}), whole process ${us(cpu.process)}, load generator ${us(cpu.loadGenerator)}`,
      );
      console.log(
        `  ratios (median of paired rounds): throughput ${r.throughputRatio.toFixed(2)}x (target >= ${target}) ${r.throughputRatio >= target ? 'MET' : 'NOT MET'}; ${connections === 1 ? 'p99 not compared (whole milliseconds at concurrency 1)' : `p99 ${r.p99Ratio.toFixed(2)}x (target <= 1.3) ${r.p99Ratio <= 1.3 ? 'MET' : 'NOT MET'}`}`,
      );
    }
  }

  if (runs('workflows')) {
    await printWorkflowBench(seconds);
  }
  if (runs('intake')) {
    await printIntakeBench(seconds);
  }
  if (runs('spine')) {
    await printSpineBench();
  }
  if (runs('scheduling')) {
    await printSchedulingBench();
  }
  if (runs('trust')) {
    await printTrustCheckBench();
  }
  if (runs('bot-start')) {
    await printBotStartBench();
  }
  if (runs('embedded')) {
    await printEmbeddedStartup();
  }
  if (runs('store')) {
    await printStoreBench();
  }
}

/** Issue 24's target: RSS after a burst and after load within this of idle, with no heap cap that kills. */
const RSS_TARGET = 1.5;

async function printFairnessBench(seconds: number): Promise<void> {
  // Variants `total:waiting:medplum` (BENCH_FAIRNESS_VARIANTS, comma list; medplum empty: the target's
  // default): npm start's limits, then admission as it was before issue 50 (every call past the total
  // refused at once, no bound of the gateway's own on its calls to Medplum).
  const defaults = `${DEFAULT_LIMITS.inFlightTotal}:${DEFAULT_LIMITS.inFlightWaiting}:`;
  const variants = (process.env.BENCH_FAIRNESS_VARIANTS ?? `${defaults},${DEFAULT_LIMITS.inFlightTotal}:0:0`)
    .split(',')
    .map((v) => v.trim().split(':'));
  // And on a real Medplum when pointed at one (a project the lane provisioned, a tenant's patient app).
  const env = (name: string) => process.env[`BENCH_MEDPLUM_${name}`];
  const remote =
    env('BASE_URL') && env('PROJECT_ID') && env('PATIENT_CLIENT_ID')
      ? {
          baseUrl: env('BASE_URL') as string,
          projectId: env('PROJECT_ID') as string,
          clientId: env('PATIENT_CLIENT_ID') as string,
        }
      : undefined;
  const targets = process.env.BENCH_FAIRNESS_TARGETS?.split(',') ?? ['npm-start', ...(remote ? ['real'] : [])];
  for (const target of targets) {
    for (const [total = '', waiting = '', medplum = ''] of variants) {
      await printFairnessVariant(seconds, { total, waiting, medplum }, target === 'real' ? remote : undefined);
    }
  }
}

async function printFairnessVariant(
  seconds: number,
  admission: { total: string; waiting: string; medplum: string },
  remote: Parameters<typeof runFairnessBench>[3],
): Promise<void> {
  {
    const { total, waiting, medplum } = admission;
    // The crowds, by number of accounts (BENCH_FAIRNESS_FLOODS, comma list; 0 is her idle round).
    const floods = (process.env.BENCH_FAIRNESS_FLOODS ?? '0,10,100').split(',').map(Number);
    const { theirCallMs, rounds } = await runFairnessBench(seconds, floods, admission, remote);
    const atMedplum =
      medplum === '0'
        ? 'no bound at Medplum'
        : `${medplum || (remote ? MEDPLUM_IN_FLIGHT.remote : MEDPLUM_IN_FLIGHT.embedded)} at Medplum`;
    console.log(
      `## Fairness, on ${remote ? `a gateway over the Medplum at ${remote.baseUrl}` : 'one process set up as npm start'} (${DEFAULT_LIMITS.inFlightPerCaller} calls a caller, ${total} in flight in all, ${waiting} waiting, ${atMedplum})`,
    );
    console.log(
      `   N self-registered accounts each keep 32 calls going (GET /v1/agreements/requirements) for ${seconds} s; a victim reads her profile one call at a time`,
    );
    const idle = rounds.find((r) => r.accounts === 0)?.victim.p99Ms ?? 0;
    const target = 2 * idle + theirCallMs.p50;
    console.log(
      `   one of their calls alone: p50 ${theirCallMs.p50.toFixed(1)} ms, p99 ${theirCallMs.p99.toFixed(1)} ms; target for her p99: 2 x idle p99 + their call = ${target.toFixed(1)} ms, and no 503/504`,
    );
    for (const r of rounds) {
      const v = r.victim;
      const met = v.p99Ms <= target && !v.statuses['503'] && !v.statuses['504'] ? 'MET' : 'NOT MET';
      console.log(
        `  ${String(r.accounts).padStart(3)} flooding: victim ${v.ok}/${v.calls} answered 200 (${((100 * v.ok) / Math.max(v.calls, 1)).toFixed(1)}%), p50 ${v.p50Ms.toFixed(1)} ms, p99 ${v.p99Ms.toFixed(1)} ms, ${JSON.stringify(v.statuses)}${r.accounts ? ` ${met}` : ''}; flood ${r.flood.calls} calls ${JSON.stringify(r.flood.statuses)}, its 200s p50 ${r.flood.p50Ms.toFixed(0)} ms, p99 ${r.flood.p99Ms.toFixed(0)} ms`,
      );
    }
    console.log('');
  }
}

async function printOverloadBench(seconds: number): Promise<void> {
  const o = await runOverloadBench(seconds);
  const ratio = (mib: number) => mib / o.rssIdleMiB;
  const verdict = (mib: number) => (ratio(mib) <= RSS_TARGET ? 'MET' : 'NOT MET');
  console.log('## Overload, on one process set up as npm start (its own admission limits and Medplum thread)');
  console.log(`  RSS idle ${o.rssIdleMiB.toFixed(0)} MiB`);
  console.log(
    `  a burst of ${o.burst.calls} concurrent acceptances from one token: ${JSON.stringify(o.burst.statuses)}; RSS after ${o.rssAfterBurstMiB.toFixed(0)} MiB, ${ratio(o.rssAfterBurstMiB).toFixed(2)}x (target <= ${RSS_TARGET}) ${verdict(o.rssAfterBurstMiB)}`,
  );
  console.log(
    `  ${o.loadSeconds} s of requirements at concurrency 16: ${o.load.calls} calls ${JSON.stringify(o.load.statuses)}; RSS after ${o.rssAfterLoadMiB.toFixed(0)} MiB, ${ratio(o.rssAfterLoadMiB).toFixed(2)}x (target <= ${RSS_TARGET}) ${verdict(o.rssAfterLoadMiB)}`,
  );
  const g = o.graphql;
  console.log(
    `  GraphQL on its Medplum: the first query ${g.firstStatus} in ${g.firstMs.toFixed(0)} ms (builds the schema); ${g.warm.calls} more one at a time ${JSON.stringify(g.warm.statuses)}, p50 ${g.warm.p50Ms.toFixed(1)} ms; RSS after ${g.rssAfterMiB.toFixed(0)} MiB`,
  );
  console.log(
    `  the burst again with the schema live: ${JSON.stringify(o.burstWithSchema.statuses)}; RSS after ${o.rssAfterBurstWithSchemaMiB.toFixed(0)} MiB`,
  );
}

/**
 * Issue 27 on a real Medplum, when the bench is pointed at one (BENCH_MEDPLUM_BASE_URL, _CLIENT_ID,
 * _CLIENT_SECRET of a project admin client, and _LOG, Medplum's log with `logRequests` on): the
 * real-Medplum lane's journey there, then each bot run's round trips and the journey's server time from
 * Medplum's own request log (scripts/round-trips.ts). Skipped, and said so, when not pointed at one.
 */
async function printRealMedplumBench(): Promise<void> {
  const env = (name: string) => process.env[`BENCH_MEDPLUM_${name}`];
  // Medplum >= 5.1 takes 5 sign-ins and registrations a minute from this one machine: each waits as its 429
  // says (not counted in any figure below: sign-ins are not workflow calls, and the lane reports its own).
  globalThis.fetch = waitingOnSignInLimit(globalThis.fetch);
  const [baseUrl, clientId, clientSecret, log] = [env('BASE_URL'), env('CLIENT_ID'), env('CLIENT_SECRET'), env('LOG')];
  console.log('## A real Medplum (issue 27)');
  if (!baseUrl || !clientId || !clientSecret || !log) {
    console.log('   skipped: set BENCH_MEDPLUM_BASE_URL, _CLIENT_ID, _CLIENT_SECRET and _LOG (docs/benchmarks.md)\n');
    // The gateway against direct needs only a project provisioned with the demo (the lane's).
    if (baseUrl && env('PROJECT_ID')) {
      await printRealGatewayBench(baseUrl, env('PROJECT_ID') as string);
    }
    return;
  }
  // Run as `npm run verify:medplum` runs it (npm puts the project's Node 24 and tsx first on the PATH), with
  // a key of the bench's own, so that the workflow section's gateway can sign for the project it provisions.
  const edgeStatementKey = process.env.EDGE_STATEMENT_KEY || randomBytes(32).toString('base64url');
  const lane = spawnSync('node_modules/.bin/tsx', ['scripts/verify-medplum.ts', '--medplum-log', log], {
    encoding: 'utf8',
    timeout: 15 * 60_000,
    maxBuffer: 64 * 1024 * 1024,
    // Medplum's credentials from the environment, never the command line (process lists show it).
    env: {
      ...process.env,
      MEDPLUM_BASE_URL: baseUrl,
      MEDPLUM_CLIENT_ID: clientId,
      MEDPLUM_CLIENT_SECRET: clientSecret,
      EDGE_STATEMENT_KEY: edgeStatementKey,
    },
  });
  const out = lane.stdout ?? '';
  // The lane's whole table, for docs/real-medplum.md (this section prints only its summary).
  if (env('LANE_OUT')) {
    writeFileSync(env('LANE_OUT') as string, out);
  }
  const summary =
    /\d+ rows: [^\n]*?(?=\.?$)/m.exec(out)?.[0] ??
    `the lane did not finish (exit ${lane.status}): ${lane.stderr?.slice(-500)}`;
  const journey = /\| the whole journey \| ok \| ([^|]*)\|/.exec(out)?.[1]?.trim();
  console.log(`   the real-Medplum lane on it: ${summary}${journey ? `; the journey ${journey}` : ''}`);
  const section = out.indexOf('## Round trips per bot run');
  console.log(section >= 0 ? out.slice(section) : '   no round-trip section (the journey failed, or no log lines)\n');
  const projectId = env('PROJECT_ID');
  if (projectId) {
    await printRealWorkflowBench({ baseUrl, projectId, clientId, clientSecret, edgeStatementKey });
    await printRealGatewayBench(baseUrl, projectId);
  } else {
    console.log(
      '   gateway vs direct on it: skipped (set BENCH_MEDPLUM_PROJECT_ID, the project the lane provisioned)\n',
    );
  }
}

/** Workflow calls at or under this p50 on a real Medplum on this machine (issue 38, item 4). */
const REAL_WORKFLOW_P50_TARGET_MS = 60;

/** Issue 38 item 4: each workflow call's latency on the real Medplum, over whole journeys. */
async function printRealWorkflowBench(options: {
  baseUrl: string;
  projectId: string;
  clientId: string;
  clientSecret: string;
  edgeStatementKey: string;
}): Promise<void> {
  const journeys = Number(process.env.BENCH_REAL_JOURNEYS ?? 3);
  const { figures, journeyMs, stopped, availability, heard } = await runRealWorkflowBench({ ...options, journeys });
  console.log(`## Workflow calls on a real Medplum (${journeys} whole journeys, a new patient each)`);
  console.log(
    "   a gateway built as npm start builds it over the Medplum, in this process; every /v1 call of the demo's journey timed from her side; polls included; a workflow is a call that ran a bot ($execute)",
  );
  console.log('| call | calls | p50 ms | max ms | a workflow (a bot runs) at p50 <= 60 ms |');
  console.log('|---|---|---|---|---|');
  for (const f of figures) {
    const verdict =
      f.workflow && !f.route.endsWith(')') ? (f.p50 <= REAL_WORKFLOW_P50_TARGET_MS ? 'MET' : 'NOT MET') : '';
    console.log(`| ${f.route} | ${f.calls} | ${f.p50.toFixed(0)} | ${f.max.toFixed(0)} | ${verdict} |`);
  }
  // What her app heard on her event feed (instead of polling): from the write to the answer that carried it.
  const waited = heard.filter((h) => h.type !== 'agreements.changed');
  if (waited.length > 0) {
    const ms = waited.map((h) => h.ms).sort((a, b) => a - b);
    console.log(
      `   her event feed: ${waited.length} events heard (${[...new Set(waited.map((h) => h.type))].join(', ')}), from the write to her app's answer p50 ${ms[Math.floor((ms.length - 1) / 2)].toFixed(0)} ms, max ${ms[ms.length - 1].toFixed(0)} ms (a look every 3 s)`,
    );
  }
  console.log(
    `   whole journeys: ${journeyMs.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ') || 'none'}${stopped.length ? `; stopped: ${stopped.join('; ')}` : ''}\n`,
  );
  if (availability) {
    const ratio = availability.p50 / availability.profileP50;
    console.log(
      `## Availability on a real Medplum: her visit team, a week (the journey's own query), ${availability.calls} calls one at a time, alternating with her profile read`,
    );
    console.log(
      `  p50 ${availability.p50.toFixed(1)} ms vs profile ${availability.profileP50.toFixed(1)} ms: ${ratio.toFixed(1)}x (target <= ${REAL_AVAILABILITY_RATIO_TARGET}x) ${ratio <= REAL_AVAILABILITY_RATIO_TARGET ? 'MET' : 'NOT MET'}\n`,
    );
  }
}

/** Availability on a real Medplum at or under this many profile reads, p50 (issue 38, item 2). */
const REAL_AVAILABILITY_RATIO_TARGET = 3;

/** Issue 38 item 1: a gateway over the real Medplum against the same read straight from it. */
async function printRealGatewayBench(baseUrl: string, projectId: string): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 3);
  // The gateway starts only with the Project's key and its own client: from the gateway.env provisioning wrote.
  const file = process.env.BENCH_MEDPLUM_GATEWAY_ENV;
  if (!file) {
    console.log(
      '   gateway vs direct on it: skipped (set BENCH_MEDPLUM_GATEWAY_ENV, the gateway.env `npm run provision -- --out` wrote for that project)\n',
    );
    return;
  }
  const settings = Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => /^[A-Z_]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  const gateway = {
    EDGE_STATEMENT_KEY: settings.EDGE_STATEMENT_KEY ?? '',
    GATEWAY_CLIENT_ID: settings.GATEWAY_CLIENT_ID ?? '',
    GATEWAY_CLIENT_SECRET: settings.GATEWAY_CLIENT_SECRET ?? '',
  };
  const rounds = await runRealGatewayBench({ baseUrl, projectId, seconds, gateway });
  console.log(
    '## Gateway vs direct on a real Medplum (GET /v1/patient/profile vs GET fhir/R4/Patient/{id}, same token)',
  );
  console.log(
    `   the gateway as an operator runs it (src/node.ts over the Medplum, its own process, access log on); ${seconds} s rounds alternating, the median of three pairs; the gateway's CPU from the kernel's run time of its threads`,
  );
  const cpuText = (us: number | undefined) =>
    us === undefined ? 'CPU not measured (no /proc)' : `CPU ${us.toFixed(0)} µs a read`;
  for (const r of rounds) {
    const ratio = r.gateway.perSecond / r.direct.perSecond;
    const cpu = r.gateway.cpuUs;
    console.log(
      `  c${r.concurrency}: direct ${r.direct.perSecond.toFixed(0)} req/s p50 ${r.direct.p50.toFixed(2)} ms p99 ${r.direct.p99.toFixed(2)} ms | gateway ${r.gateway.perSecond.toFixed(0)} req/s p50 ${r.gateway.p50.toFixed(2)} ms p99 ${r.gateway.p99.toFixed(2)} ms, ${ratio.toFixed(2)}x of direct (target >= 0.9) ${ratio >= 0.9 ? 'MET' : 'NOT MET'}, ${cpuText(cpu)} (target <= 100) ${cpu !== undefined && cpu <= 100 ? 'MET' : 'NOT MET'}`,
    );
    console.log(
      `       the least proxy Node can be, same run: ${r.bare.perSecond.toFixed(0)} req/s p50 ${r.bare.p50.toFixed(2)} ms, ${(r.bare.perSecond / r.direct.perSecond).toFixed(2)}x of direct, ${cpuText(r.bare.cpuUs)}`,
    );
  }
  console.log('');
}

/** Issue 23's target: a whole journey within 2,500 points of Medplum's FHIR quota, bots together. */
const JOURNEY_POINTS_TARGET = 2500;
/** Medplum's default FHIR quota of one membership (each bot's), points a minute. */
const MEMBERSHIP_QUOTA = 50_000;

async function printQuotaBench(): Promise<void> {
  const { quota: figures, roundTrips } = await runQuotaBench();
  console.log("## FHIR round trips per bot run in one whole journey (npm run demo's steps), embedded");
  console.log(
    '   sequential: the longest chain of requests each started after the one before had ended (in parallel: one step)',
  );
  console.log(roundTripTable(roundTrips));
  const bots = figures.filter((f) => f.bot);
  const botPoints = bots.reduce((sum, f) => sum + f.points, 0);
  console.log("## FHIR quota points of one whole journey (npm run demo's steps), as Medplum counts them");
  console.log('   read 1, history 10, search 20, write 100 (packages/server/src/fhir/fhirquota.ts); by membership');
  console.log('| who | points | journeys a minute before its 50,000 run out |');
  console.log('|---|---|---|');
  for (const f of figures) {
    const perMinute = f.bot ? String(Math.floor(MEMBERSHIP_QUOTA / f.points)) : '(per person)';
    console.log(`| ${f.spender}${f.bot ? ' (bot)' : ''} | ${f.points} | ${perMinute} |`);
  }
  const all = figures.reduce((sum, f) => sum + f.points, 0);
  console.log(
    `bots together: ${botPoints} points (target <= ${JOURNEY_POINTS_TARGET}) ${botPoints <= JOURNEY_POINTS_TARGET ? 'MET' : 'NOT MET'}; everyone: ${all}; the busiest bot allows ${Math.floor(MEMBERSHIP_QUOTA / Math.max(...bots.map((b) => b.points), 1))} journeys a minute at the default quota`,
  );
}

async function printSpineBench(): Promise<void> {
  const selections = Number(process.env.BENCH_SPINE_SELECTIONS ?? 20);
  const accepts = Number(process.env.BENCH_SPINE_ACCEPTS ?? 100);
  const spine = await runSpineBench({ selections, accepts });
  const { offerVisible: v } = spine;
  console.log('## The clinical spine (issue 15)');
  console.log(
    '   in process (the gateway calling the embedded Medplum in memory), sequential; each accept a distinct offer, each followed by a profile read of the same patient',
  );
  console.log(
    `  selection -> offer visible to the patient (${v.samples} selections): p50 ${fmt(v.p50)}  max ${fmt(v.max)} (target within 1 s) ${v.max <= 1000 ? 'MET' : 'NOT MET'}`,
  );
  console.log(
    `  POST /v1/tasks/{id}/complete, accept (${spine.accepts} offers): p50 ${fmt(spine.accept.p50)}  p99 ${fmt(spine.accept.p99)}`,
  );
  console.log(`  GET /v1/patient/profile (same run): p50 ${fmt(spine.profile.p50)}  p99 ${fmt(spine.profile.p99)}`);
  console.log(
    `  accept / profile p50: ${spine.ratioP50.toFixed(1)}x (target <= 5x) ${spine.ratioP50 <= 5 ? 'MET' : 'NOT MET'}`,
  );
}

async function printOperationsBench(): Promise<void> {
  const seconds = Number(process.env.BENCH_OPERATION_SECONDS ?? 1.5);
  const r = await runOperationsBench({ seconds, journeys: Number(process.env.BENCH_JOURNEYS ?? 5) });
  const base = r.profile.p50;
  console.log('## Every operation against a profile read (issue 17)');
  console.log(
    `   in process (the gateway calling the embedded Medplum in memory), concurrency ${r.concurrency}, ${seconds} s each; workflows measured on what repeats them; ratio = p50 / profile p50; target for a workflow <= 5x`,
  );
  const row = (f: (typeof r.operations)[number]) => {
    const ratio = f.p50 / base;
    const verdict = f.workflow ? (ratio <= 5 ? 'MET' : 'NOT MET') : '';
    return `  | ${f.name} | ${f.p50.toFixed(2)} | ${f.p99.toFixed(2)} | ${f.requestsPerSecond.toFixed(0)} | ${ratio.toFixed(1)}x | ${verdict}${f.failures ? ` (${f.failures} failed)` : ''} |`;
  };
  console.log('  | operation | p50 ms | p99 ms | req/s | vs profile | workflow target |');
  console.log('  |---|---|---|---|---|---|');
  console.log(row(r.profile));
  for (const f of r.operations) {
    console.log(row(f));
  }
  const journey = percentiles(r.journeyMs);
  console.log(
    `  the whole journey (npm run demo's steps, clinician included, ${r.journeyMs.length} times): p50 ${fmt(journey.p50)}, slowest ${fmt(Math.max(...r.journeyMs))} (target < 1.5 s) ${journey.p50 < 1500 ? 'MET' : 'NOT MET'}`,
  );
}

async function printSchedulingBench(): Promise<void> {
  const iterations = Number(process.env.BENCH_SCHEDULING_ITERATIONS ?? 30);
  const bookings = Number(process.env.BENCH_SCHEDULING_BOOKINGS ?? 50);
  const r = await runSchedulingBench({ iterations, bookings });
  console.log('## Scheduling (issue 16)');
  console.log(
    `   in process, sequential; a visit team of ${r.practitioners} practitioners, ${r.slots} free 30-minute slots over two weeks; ${iterations} calls of each view, each followed by a profile read`,
  );
  for (const round of r.rounds) {
    const ratio = round.slotsView.p50 / round.profile.p50;
    console.log(
      `  ${String(round.patients).padStart(6)} patients: slots view p50 ${fmt(round.slotsView.p50)} p99 ${fmt(round.slotsView.p99)} | days view p50 ${fmt(round.daysView.p50)} p99 ${fmt(round.daysView.p99)} | profile p50 ${fmt(round.profile.p50)} | slots/profile ${ratio.toFixed(1)}x (target <= 3x) ${ratio <= 3 ? 'MET' : 'NOT MET'}`,
    );
  }
  const [small, large] = r.rounds;
  const flat = large.slotsView.p50 / small.slotsView.p50;
  const flatDays = large.daysView.p50 / small.daysView.p50;
  console.log(
    `  10,000 vs 100 patients, p50: slots ${flat.toFixed(2)}x, days ${flatDays.toFixed(2)}x (target <= 1.5x) ${Math.max(flat, flatDays) <= 1.5 ? 'MET' : 'NOT MET'}`,
  );
  console.log(
    `  booking (${r.samples}): p50 ${fmt(r.book.p50)} p99 ${fmt(r.book.p99)}; reschedule (${r.samples}): p50 ${fmt(r.reschedule.p50)} p99 ${fmt(r.reschedule.p99)}`,
  );
}

async function printTrustCheckBench(): Promise<void> {
  const trust = await runTrustCheckBench();
  console.log('## Trust checks in a workflow bot: GET /v1/agreements/requirements');
  console.log(
    '   one `$execute` of the requirements bot by a patient, sequential, in process; before = the same resolution without the checks',
  );
  console.log(
    `  before (no checks) p50 ${fmt(trust.unchecked)}; after (token verified against the JWKS, input validated, context ownership) p50 ${fmt(trust.checked)}`,
  );
  console.log(
    `  ratio after/before: ${trust.ratio.toFixed(2)}x (target <= 1.10) ${trust.ratio <= 1.1 ? 'MET' : 'NOT MET'}`,
  );
}

/** Issue 40 item 3: a bot's input check, as JSON Schema or as the contract's zod, in its bundle and its start. */
async function printBotStartBench(): Promise<void> {
  const bundles = { schema: await botBundles('schema'), zod: await botBundles('zod') };
  const zodAlone = await zodAloneBundle();
  bundles.schema['(zod alone: one small schema)'] = EMPTY_BOT;
  bundles.zod['(zod alone: one small schema)'] = zodAlone;
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KB`;
  console.log("## A bot's start: its input check as JSON Schema (as built) or as the contract's zod (issue 40 item 3)");
  console.log(
    '   schema = bots/lib/input.ts with the generated JSON Schema; zod = contracts/bot-inputs.ts by safeParse, bundled and minified (test/bench/zod-bots/)',
  );
  console.log("   start = p50 of loading the bundle in a fresh vmcontext-like context, less an empty bundle's");
  console.log('| bot | schema bytes | zod bytes | schema start ms | zod start ms | zod - schema ms |');
  console.log('|---|---|---|---|---|---|');
  const starts = measureBundleStarts(bundles);
  for (const f of starts) {
    console.log(
      `| ${f.bot} | ${f.bytes.schema} | ${f.bytes.zod} | ${f.startMs.schema.toFixed(2)} | ${f.startMs.zod.toFixed(2)} | ${(f.startMs.zod - f.startMs.schema).toFixed(2)} |`,
    );
  }
  const bots = starts.filter((f) => !f.bot.startsWith('('));
  const sum = (pick: (f: (typeof starts)[number]) => number) => bots.reduce((total, f) => total + pick(f), 0);
  console.log(
    `   all ${bots.length} bundles: schema ${kb(sum((f) => f.bytes.schema))}, zod ${kb(sum((f) => f.bytes.zod))}; start p50 of the bots' p50s: schema ${fmt(percentiles(bots.map((f) => f.startMs.schema)).p50)}, zod ${fmt(percentiles(bots.map((f) => f.startMs.zod)).p50)}`,
  );
  for (const f of await measureBadInputExecutes(bundles)) {
    console.log(
      `  $execute ${f.bot} with a bad input, by ${f.caller} (embedded, in process): schema p50 ${fmt(f.p50.schema)}, zod p50 ${fmt(f.p50.zod)} (+${fmt(f.p50.zod - f.p50.schema)})`,
    );
  }
  const env = (name: string) => process.env[`BENCH_MEDPLUM_${name}`];
  const [baseUrl, clientId, clientSecret] = [env('BASE_URL'), env('CLIENT_ID'), env('CLIENT_SECRET')];
  if (baseUrl && clientId && clientSecret) {
    const real = await measureRealBadInputExecutes({ baseUrl, clientId, clientSecret });
    console.log(
      `  $execute sms-opt-out with a bad input on the real Medplum ${baseUrl} (three Bots made in its project): empty bundle p50 ${fmt(real.empty)}, schema (${kb(real.bytes.schema)}) ${fmt(real.schema)}, zod (${kb(real.bytes.zod)}) ${fmt(real.zod)}`,
    );
  } else {
    console.log('  on a real Medplum: skipped (set BENCH_MEDPLUM_BASE_URL, _CLIENT_ID, _CLIENT_SECRET)');
  }
  console.log('');
}

async function printEmbeddedStartup(): Promise<void> {
  const schemaStart = performance.now();
  loadFhirSchema();
  const schemaMs = performance.now() - schemaStart;
  const startupStart = performance.now();
  const embedded = await launchEmbeddedMedplum({ dbPath: ':memory:', definition: demoDefinition() });
  const startupMs = performance.now() - startupStart;
  embedded.close();
  console.log('## Embedded Medplum');
  console.log(`start-up with demo data (schema already loaded): ${fmt(startupMs)}; FHIR schema load: ${fmt(schemaMs)}`);
}

async function printStoreBench(): Promise<void> {
  console.log("## The embedded Medplum's store");
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

const cell = (r: Round) =>
  `${r.requestsPerSecond.toFixed(0).padStart(5)} req/s p50 ${String(r.p50).padStart(3)} ms p99 ${String(r.p99).padStart(3)} ms${r.failures ? ` (${r.failures} failed)` : ''}`;

async function printWorkflowBench(seconds: number): Promise<void> {
  const rounds = Number(process.env.BENCH_WORKFLOW_ROUNDS ?? 3);
  const wf = await runWorkflowBench(seconds, rounds);
  console.log('## Workflow calls against a profile read (`npm start` layout, same run)');
  console.log(
    `   ${rounds} paired rounds of ${seconds} s; cost = profile req/s / workflow req/s (median of pairs); target at concurrency 16 <= 3x`,
  );
  for (const f of wf.figures) {
    const verdict = f.concurrency === 16 ? (f.costRatio <= 3 ? ' MET' : ' NOT MET') : '';
    console.log(`  c=${String(f.concurrency).padEnd(2)} ${f.name}`);
    console.log(
      `       workflow ${cell(f.workflow)} | profile ${cell(f.profile)} | cost ${f.costRatio.toFixed(2)}x${verdict}`,
    );
  }
  const rssRatio = wf.rssAfterMiB / wf.rssIdleMiB;
  console.log(
    `  RSS idle ${wf.rssIdleMiB.toFixed(0)} MiB, after ${wf.workflowSeconds} s of workflow load ${wf.rssAfterMiB.toFixed(0)} MiB: ${rssRatio.toFixed(2)}x (target <= 1.5) ${rssRatio <= 1.5 ? 'MET' : 'NOT MET'}`,
  );
  const size = await runRequirementsStoreSizeBench();
  console.log(
    `  requirements ($execute, sequential p50): ${fmt(size.small)} with ${size.smallDocuments} DocumentReferences, ${fmt(size.large)} with ${size.largeDocuments}: ${size.ratio.toFixed(2)}x (target <= 1.3) ${size.ratio <= 1.3 ? 'MET' : 'NOT MET'}`,
  );
}

async function printIntakeBench(seconds: number): Promise<void> {
  const rounds = Number(process.env.BENCH_WORKFLOW_ROUNDS ?? 3);
  const intake = await runIntakeBench({
    seconds,
    rounds,
    largePatients: Number(process.env.BENCH_INTAKE_PATIENTS ?? 10_000),
    firstPerRound: Number(process.env.BENCH_INTAKE_FIRST ?? 150),
  });
  const { small, large } = intake.stores;
  console.log('## Intake workflows (issue 14)');
  console.log(
    `   \`npm start\` layout, concurrency ${intake.concurrency}, ${large.patients} patients (${large.resources} resources, built in ${large.seedSeconds.toFixed(0)} s); ${rounds} paired rounds against a profile read: ${seconds} s each, FIRST completions ${intake.firstPerRound} distinct ready tasks a round; cost = profile req/s / workflow req/s (median of pairs); target <= 4x`,
  );
  for (const f of intake.figures) {
    console.log(`  ${f.name}`);
    console.log(
      `       workflow ${cell(f.workflow)} | profile ${cell(f.profile)} | cost ${f.costRatio.toFixed(2)}x ${f.costRatio <= 4 ? 'MET' : 'NOT MET'}`,
    );
  }
  console.log(
    `   store size: ${small.patients} patients (${small.resources} resources) vs ${large.patients} (${large.resources}), both served, rounds alternating; FIRST rounds of ${intake.firstPerStoreSizeRound} tasks; ratio = large p50 / small p50 (median of pairs); target <= 1.5x`,
  );
  for (const f of intake.storeSize) {
    console.log(`  ${f.name}`);
    console.log(
      `       ${small.patients} ${cell(f.small)} | ${large.patients} ${cell(f.large)} | p50 ${f.p50Ratio.toFixed(2)}x ${f.p50Ratio <= 1.5 ? 'MET' : 'NOT MET'}`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
