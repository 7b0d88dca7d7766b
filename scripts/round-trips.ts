import { readFileSync } from 'node:fs';
import type { AuditEvent, Bot } from '@medplum/fhirtypes';
import type { BotRunTrace } from '../src/embedded/bots/operations';

/**
 * Round trips per bot run, for the bench (the embedded Medplum's traces, `onBotRun`) and the
 * real-Medplum lane (Medplum's own request log), counted and printed the same way.
 */

/** At most this many sequential FHIR round trips in any workflow bot run: each is a wait she sees. */
export const ROUND_TRIPS_TARGET = 6;

/**
 * The longest chain of a run's requests each started after the one before it in the chain had ended
 * (requests in flight together, a `Promise.all`, are one step), first to last: its length is the run's
 * sequential round trips. Timing cannot tell a request that waited for another from one that merely came
 * later, so this counts at least every round trip a run waits for (an upper bound).
 */
export function longestChain(requests: BotRunTrace['requests']): BotRunTrace['requests'] {
  const sorted = [...requests].sort((a, b) => a.start - b.start);
  const depth: number[] = [];
  const previous: number[] = [];
  sorted.forEach((request, i) => {
    let best = -1;
    for (let j = 0; j < i; j++) {
      if (sorted[j].end <= request.start && (best === -1 || depth[j] > depth[best])) {
        best = j;
      }
    }
    depth.push(best === -1 ? 1 : depth[best] + 1);
    previous.push(best);
  });
  const chain: BotRunTrace['requests'] = [];
  for (let at = depth.indexOf(Math.max(0, ...depth)); at >= 0; at = previous[at]) {
    chain.unshift(sorted[at]);
  }
  return chain;
}

/**
 * Round trips and server time of a stretch of work on a real Medplum, from its own request log:
 * with `logRequests` on, Medplum logs one "Request served" line per request with its start, duration,
 * trace and caller (`profile`). A bot's requests carry its profile (`Bot/<id>`) and its run's trace; a
 * run's AuditEvent names its bot, trace and period, so every request is put in its run, also when one
 * trace holds two runs of a bot (its own write woke its Subscription again).
 */
export interface ServedLine {
  method: string;
  path: string;
  status: number;
  start: number;
  end: number;
  traceId?: string;
  profile?: string;
}

/** The "Request served" lines of a Medplum log that started within [from, to]. */
export function servedLines(logPath: string, from: Date, to: Date): ServedLine[] {
  const lines: ServedLine[] = [];
  for (const text of readFileSync(logPath, 'utf8').split('\n')) {
    if (!text.includes('"Request served"')) {
      continue;
    }
    try {
      const line = JSON.parse(text) as {
        method: string;
        path: string;
        status: number;
        receivedAt: string;
        durationMs: number;
        traceId?: string;
        profile?: string;
      };
      const start = Date.parse(line.receivedAt);
      if (start >= from.getTime() && start <= to.getTime()) {
        lines.push({ ...line, start, end: start + line.durationMs });
      }
    } catch {
      // not a JSON line
    }
  }
  return lines;
}

/** A bot run's requests, as the bench's traces are (so that the same chain is taken). */
export function botRunsOf(lines: ServedLine[], bots: Bot[], audits: AuditEvent[]): BotRunTrace[] {
  const names = new Map(bots.map((b) => [`Bot/${b.id}`, b.identifier?.[0]?.value ?? b.name ?? `Bot/${b.id}`]));
  const runs = audits
    .filter((a) => names.has(a.source?.observer?.reference ?? ''))
    .map((a) => ({
      profile: a.source?.observer?.reference as string,
      traceId: a.extension?.find((e) => e.url.endsWith('/tracing'))?.extension?.find((e) => e.url === 'traceId')
        ?.valueId,
      from: Date.parse(a.period?.start ?? ''),
      to: Date.parse(a.period?.end ?? ''),
      trace: { bot: names.get(a.source?.observer?.reference ?? '') as string, requests: [] } as BotRunTrace,
    }));
  // A run's requests fall within its period (give or take the clocks' and the log's rounding).
  const SLACK_MS = 100;
  for (const line of lines) {
    // Medplum 5.0 names the caller of each request (`profile`); 5.1's log does not, so a line without one is
    // a bot's when it falls in a run of the same trace, and is not the `$execute` that started the run.
    const anonymous = !line.profile && !line.path.includes('$execute');
    if (!anonymous && (!line.profile || !names.has(line.profile))) {
      continue;
    }
    const candidates = runs
      .filter(
        (r) =>
          (anonymous ? true : r.profile === line.profile) &&
          r.traceId === line.traceId &&
          line.start >= r.from - SLACK_MS &&
          line.start <= r.to + SLACK_MS,
      )
      .sort((a, b) => b.from - a.from);
    // Two runs of one bot in one trace: the latest that had started by then.
    const run = candidates.find((r) => r.from <= line.start) ?? candidates.at(-1);
    if (run) {
      BOT_LINES.add(line);
    }
    run?.trace.requests.push({
      method: line.method,
      url: `http://medplum${line.path}`,
      start: line.start,
      end: line.end,
    });
  }
  return runs.map((r) => r.trace).filter((t) => t.requests.length > 0);
}

/** The lines botRunsOf put in a bot's run (Medplum 5.1's lines name no caller, so a bot's are known only so). */
const BOT_LINES = new WeakSet<ServedLine>();

/** What the callers (not the bots) spent of the server's time: the sum of their requests' durations. */
export function topLevelServerMs(lines: ServedLine[]): number {
  return lines
    .filter((l) => !l.profile?.startsWith('Bot/') && !BOT_LINES.has(l))
    .reduce((sum, l) => sum + (l.end - l.start), 0);
}

/** Per bot: its runs, its busiest run's requests and its longest chain of round trips. */
export function roundTripsByBot(
  runs: BotRunTrace[],
): { bot: string; runs: number; maxRequests: number; maxSequential: number; chain: string[] }[] {
  const byBot = new Map<string, BotRunTrace[]>();
  for (const run of runs) {
    byBot.set(run.bot, [...(byBot.get(run.bot) ?? []), run]);
  }
  return [...byBot]
    .map(([bot, all]) => {
      const chains = all.map((r) => longestChain(r.requests));
      const longest = chains.reduce((a, b) => (b.length > a.length ? b : a));
      return {
        bot,
        runs: all.length,
        maxRequests: Math.max(...all.map((r) => r.requests.length)),
        maxSequential: longest.length,
        chain: longest.map((r) => `${r.method} ${shapeOf(r.url)}`),
      };
    })
    .sort((a, b) => b.maxSequential - a.maxSequential);
}

export type RoundTripFigure = ReturnType<typeof roundTripsByBot>[number];

/** The markdown table of `roundTripsByBot`, then the chain of every bot over the target. */
export function roundTripTable(figures: RoundTripFigure[]): string {
  return [
    `| bot | runs | requests (busiest run) | sequential round trips (longest run) | target <= ${ROUND_TRIPS_TARGET} |`,
    '|---|---|---|---|---|',
    ...figures.map(
      (r) =>
        `| ${r.bot} | ${r.runs} | ${r.maxRequests} | ${r.maxSequential} | ${r.maxSequential <= ROUND_TRIPS_TARGET ? 'met' : 'NOT MET'} |`,
    ),
    ...figures
      .filter((r) => r.maxSequential > ROUND_TRIPS_TARGET)
      .map((r) => `   ${r.bot}, the chain of its longest run: ${r.chain.join(' → ')}`),
  ].join('\n');
}

/** A request's path without ids or values: `Task/{id}/_history`, `PlanDefinition?url&version`. */
function shapeOf(url: string): string {
  const parsed = new URL(url);
  const path = parsed.pathname
    .replace(/^\/fhir\/R4\/?/, '')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '{id}');
  const keys = [...new Set([...parsed.searchParams.keys()])];
  return `${path || '(batch)'}${keys.length ? `?${keys.join('&')}` : ''}`;
}
