import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NPM_START_ENV, start } from './gateway';
import { buildIntakeStore, type IntakeStore, type StartedIntake, WEIGHT_READING } from './intake-store';
import {
  type Call,
  type Load,
  load,
  median,
  medianRound,
  type PairedFigures,
  pairedRounds,
  type Round,
} from './paired';

export interface IntakeFigures extends PairedFigures {
  name: string;
}

export interface StoreSizeFigures {
  name: string;
  small: Round;
  large: Round;
  /** Median over paired rounds of large p50 / small p50. */
  p50Ratio: number;
}

export interface StoreInfo {
  patients: number;
  resources: number;
  seedSeconds: number;
}

export interface IntakeBenchResult {
  concurrency: number;
  figures: IntakeFigures[];
  storeSize: StoreSizeFigures[];
  stores: { small: StoreInfo; large: StoreInfo };
  /** First completions per timed round (rounds of that many requests, not of `seconds`). */
  firstPerRound: number;
  firstPerStoreSizeRound: number;
}

const CONCURRENCY = 16;
const SMALL_PATIENTS = 100;
/** The four demo patients and the resumer are in every store; the small one's other 95 are ready. */
const SMALL_READY = SMALL_PATIENTS - 5;
/** First completions that warm a server up before its timed first-completion rounds: cost table, store size. */
const WARMUP_FIRST = 40;
const WARMUP_FIRST_STORE_SIZE = 5;

/** A built store served by a helper set up as `npm start`. */
interface Served {
  baseUrl: string;
  store: IntakeStore;
  resume: Call;
  replay: Call;
  /** The next `amount` ready tasks, each handed out once. */
  first(amount: number): Load;
  stop(): void;
}

const completion = (intake: StartedIntake): Call => ({
  method: 'POST',
  path: `/v1/${intake.measurementTask.replace('Task/', 'tasks/')}/complete`,
  body: WEIGHT_READING,
  token: intake.token,
});

async function serveStore(
  dir: string,
  name: string,
  [medplumPort, gatewayPort]: [number, number],
  patients: number,
  ready: number,
): Promise<Served> {
  const dbPath = join(dir, `${name}.sqlite`);
  const store = await buildIntakeStore({ dbPath, baseUrl: `http://127.0.0.1:${medplumPort}/`, patients, ready });
  const helper = start<unknown>('test/bench/serve-npm-start.ts', {
    PORT: String(medplumPort),
    GATEWAY_PORT: String(gatewayPort),
    BENCH_DB: dbPath,
    ...NPM_START_ENV,
  });
  try {
    await helper.ready;
  } catch (err) {
    helper.child.kill();
    throw err;
  }
  let used = 0;
  return {
    baseUrl: `http://127.0.0.1:${gatewayPort}`,
    store,
    resume: {
      method: 'POST',
      path: '/v1/assessments',
      body: JSON.stringify({ healthcareService: store.healthcareService }),
      token: store.resumer.token,
    },
    replay: completion(store.resumer),
    first(amount) {
      // A round that ran out would measure replays under the name of first completions.
      if (used + amount > store.ready.length) {
        throw new Error(`${amount} first completions asked, ${store.ready.length - used} ready tasks left`);
      }
      const calls = store.ready.slice(used, used + amount).map(completion);
      used += amount;
      let sent = 0;
      return {
        amount,
        next: () => {
          const call = calls[sent++];
          if (!call) {
            throw new Error('a first-completion round sent more requests than it had tasks');
          }
          return call;
        },
      };
    },
    stop: () => helper.child.kill(),
  };
}

/**
 * Issue 14's intake workflows on the `npm start` layout, each against a profile read in the same run
 * (paired.ts, as issue 12's section), on a store of `largePatients`: resuming the weight-intake
 * assessment, replaying a measurement completion, and first completions (each request completes a
 * ready task nobody completed before). Then the same three on a store of 100 patients against the
 * large one, both served at once and loaded in turn, rounds alternating.
 */
export async function runIntakeBench(options: {
  seconds: number;
  rounds: number;
  largePatients: number;
  firstPerRound: number;
}): Promise<IntakeBenchResult> {
  const { seconds, rounds, firstPerRound } = options;
  const firstPerStoreSizeRound = Math.floor((SMALL_READY - WARMUP_FIRST_STORE_SIZE) / rounds);
  const dir = mkdtempSync(join(tmpdir(), 'pc-intake-bench-'));
  const servers: Served[] = [];
  try {
    const largeReady =
      WARMUP_FIRST + rounds * firstPerRound + WARMUP_FIRST_STORE_SIZE + rounds * firstPerStoreSizeRound;
    const large = await serveStore(dir, 'large', [18303, 18280], options.largePatients, largeReady);
    servers.push(large);
    const small = await serveStore(dir, 'small', [18403, 18380], SMALL_PATIENTS, SMALL_READY);
    servers.push(small);

    const paired = (workflow: Load | ((round: number) => Load), warmup?: Load) =>
      pairedRounds({
        baseUrl: large.baseUrl,
        token: large.store.resumer.token,
        profile: { method: 'GET', path: '/v1/patient/profile' },
        workflow,
        warmup,
        concurrency: CONCURRENCY,
        seconds,
        rounds,
      });
    const warmFirst = large.first(WARMUP_FIRST);
    const timedFirst = Array.from({ length: rounds }, () => large.first(firstPerRound));
    const figures: IntakeFigures[] = [
      { name: 'POST /v1/assessments, resume', ...(await paired({ call: large.resume })) },
      {
        name: 'POST /v1/tasks/{id}/complete, measurement, REPLAY (same payload again: 200, same answer)',
        ...(await paired({ call: large.replay })),
      },
      {
        name: 'POST /v1/tasks/{id}/complete, measurement, FIRST completion (a distinct ready task each)',
        ...(await paired((round) => timedFirst[round], warmFirst)),
      },
    ];

    const storeSize: StoreSizeFigures[] = [];
    const pairs: { name: string; small: (round: number) => Load; large: (round: number) => Load }[] = [
      {
        name: 'POST /v1/assessments, resume',
        small: () => ({ call: small.resume }),
        large: () => ({ call: large.resume }),
      },
      {
        name: 'measurement completion, REPLAY',
        small: () => ({ call: small.replay }),
        large: () => ({ call: large.replay }),
      },
    ];
    const warm = [small.first(WARMUP_FIRST_STORE_SIZE), large.first(WARMUP_FIRST_STORE_SIZE)];
    const smallFirst = Array.from({ length: rounds }, () => small.first(firstPerStoreSizeRound));
    const largeFirst = Array.from({ length: rounds }, () => large.first(firstPerStoreSizeRound));
    pairs.push({ name: 'measurement completion, FIRST', small: (r) => smallFirst[r], large: (r) => largeFirst[r] });
    // The small store's server has not been loaded yet: warm both alike.
    await load(small.baseUrl, small.store.resumer.token, { call: small.resume }, CONCURRENCY, 1);
    await load(small.baseUrl, small.store.resumer.token, { call: small.replay }, CONCURRENCY, 1);
    await load(small.baseUrl, small.store.resumer.token, warm[0], CONCURRENCY, 1);
    await load(large.baseUrl, large.store.resumer.token, warm[1], CONCURRENCY, 1);
    for (const pair of pairs) {
      const smallRounds: Round[] = [];
      const largeRounds: Round[] = [];
      const ratios: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const s = await load(small.baseUrl, small.store.resumer.token, pair.small(round), CONCURRENCY, seconds);
        const l = await load(large.baseUrl, large.store.resumer.token, pair.large(round), CONCURRENCY, seconds);
        smallRounds.push(s);
        largeRounds.push(l);
        ratios.push(l.p50 / s.p50);
      }
      storeSize.push({
        name: pair.name,
        small: medianRound(smallRounds),
        large: medianRound(largeRounds),
        p50Ratio: median(ratios),
      });
    }

    const info = ({ patients, resources, seedSeconds }: IntakeStore): StoreInfo => ({
      patients,
      resources,
      seedSeconds,
    });
    return {
      concurrency: CONCURRENCY,
      figures,
      storeSize,
      stores: { small: info(small.store), large: info(large.store) },
      firstPerRound,
      firstPerStoreSizeRound,
    };
  } finally {
    for (const served of servers) {
      served.stop();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
