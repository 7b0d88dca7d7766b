import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';

/**
 * A workflow against a profile read in the same run: load from this process, rounds alternating so
 * that the machine's drift falls on both, each ratio taken within a pair, then the median. Shared by
 * the issue-12 workflow section (workflows.ts) and the intake section (intake.ts).
 */

/** One load round's figures. */
export interface Round {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  /** Answers other than 2xx (a bench of failures measures nothing). */
  failures: number;
  /** Requests answered. */
  requests: number;
}

/** One request as sent; `token` overrides the load's bearer token. */
export interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  token?: string;
}

/**
 * What a round sends: the same call for `seconds`, or a distinct call per request (`next`, e.g. a
 * task that has never been completed) for `amount` requests, however long they take.
 */
export type Load = { call: Call } | { next: () => Call; amount: number };

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The round with the median throughput (its latencies come with it). */
export const medianRound = <R extends { requestsPerSecond: number }>(rounds: R[]) =>
  [...rounds].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)[Math.floor(rounds.length / 2)];

const headersOf = (call: Call, token: string) => ({
  authorization: `Bearer ${call.token ?? token}`,
  ...(call.body ? { 'content-type': 'application/json' } : {}),
});

export async function load(
  baseUrl: string,
  token: string,
  what: Load,
  connections: number,
  seconds: number,
): Promise<Round> {
  // autocannon notices that a fixed amount is done only at its next one-second tick: such a round is
  // timed here, from the start to the last answer.
  const startedAt = performance.now();
  let lastAnswerAt = startedAt;
  const options =
    'call' in what
      ? {
          method: what.call.method,
          body: what.call.body,
          headers: headersOf(what.call, token),
          url: `${baseUrl}${what.call.path}`,
          duration: seconds,
        }
      : {
          url: baseUrl,
          amount: what.amount,
          requests: [
            {
              setupRequest: (request: autocannon.Request) => {
                const call = what.next();
                return {
                  ...request,
                  method: call.method,
                  path: call.path,
                  body: call.body,
                  headers: headersOf(call, token),
                };
              },
              onResponse: () => {
                lastAnswerAt = performance.now();
              },
            },
          ],
        };
  // autocannon refuses more connections than requests (a short warm-up).
  const result = await autocannon({
    ...options,
    connections: 'call' in what ? connections : Math.min(connections, what.amount),
  });
  return {
    requestsPerSecond:
      'call' in what ? result.requests.average : (result.requests.total * 1000) / (lastAnswerAt - startedAt),
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: result.non2xx + result.errors,
    requests: result.requests.total,
  };
}

export interface PairedFigures {
  profile: Round;
  workflow: Round;
  /** Median over paired rounds of profile throughput / workflow throughput (the workflow's cost in reads). */
  costRatio: number;
}

/**
 * `rounds` pairs of (profile read, workflow) at `concurrency`, after a short warm-up of each (JIT
 * tiers, the bot's compiled bundle, caches). `warmup` is what the workflow's warm-up sends (by
 * default the workflow itself, for 1 s; required when each round has its own).
 */
export async function pairedRounds(options: {
  baseUrl: string;
  token: string;
  profile: Call;
  /** The same each round, or each round its own (e.g. tasks never completed). */
  workflow: Load | ((round: number) => Load);
  warmup?: Load;
  concurrency: number;
  seconds: number;
  rounds: number;
}): Promise<PairedFigures> {
  const { baseUrl, token, concurrency, seconds } = options;
  const { workflow: each, warmup } = options;
  const workflow = typeof each === 'function' ? each : () => each;
  if (typeof each === 'function' && !warmup) {
    throw new Error('rounds of their own need a warm-up of its own');
  }
  await load(baseUrl, token, { call: options.profile }, concurrency, 1);
  await load(baseUrl, token, warmup ?? workflow(0), concurrency, 1);
  const profileRounds: Round[] = [];
  const workflowRounds: Round[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < options.rounds; round++) {
    const p = await load(baseUrl, token, { call: options.profile }, concurrency, seconds);
    const w = await load(baseUrl, token, workflow(round), concurrency, seconds);
    profileRounds.push(p);
    workflowRounds.push(w);
    ratios.push(p.requestsPerSecond / w.requestsPerSecond);
  }
  return { profile: medianRound(profileRounds), workflow: medianRound(workflowRounds), costRatio: median(ratios) };
}
