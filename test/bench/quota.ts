import type { Bot, ProjectMembership } from '@medplum/fhirtypes';
import { embeddedBackend, embeddedGateway, journey } from '../../scripts/demo';
import { type BotRunTrace, longestChain, sequentialRoundTrips } from '../../src/embedded/bots/operations';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { demoDefinition } from '../../src/provision/demo';

export interface QuotaFigure {
  /** A bot's name, or who else spent: the patient, the clinician. */
  spender: string;
  bot: boolean;
  points: number;
}

/** A bot's runs in one whole journey: its requests to Medplum per run, and how many were one after another. */
export interface RoundTripFigure {
  bot: string;
  runs: number;
  /** Requests of its busiest run. */
  maxRequests: number;
  /** Sequential round trips of its longest run (requests in flight together count once). */
  maxSequential: number;
  /** Its longest run's chain of requests made one after another: `GET Patient`, `POST (batch)`... */
  busiestRun: string[];
}

/**
 * What one whole journey (npm run demo's steps) spends of Medplum's FHIR quota, by membership, as the
 * embedded Medplum counts it (src/embedded/quota.ts: Medplum's points). A bot's points count against the
 * bot for every patient at once: they bound how many journeys a minute the platform can carry. With it,
 * each bot run's round trips to Medplum (issue 27: at most 6 per run).
 */
export async function runQuotaBench(): Promise<{ quota: QuotaFigure[]; roundTrips: RoundTripFigure[] }> {
  const traces: BotRunTrace[] = [];
  let tracing = false;
  const medplum = await launchEmbeddedMedplum({
    dbPath: ':memory:',
    definition: demoDefinition(),
    onBotRun: (run) => {
      if (tracing) {
        traces.push(run);
      }
    },
  });
  try {
    const { fetch: gatewayFetch } = embeddedGateway(medplum);
    await medplum.subscriptions.idle();
    medplum.quota.resetSpending();
    tracing = true;
    await journey(embeddedBackend(medplum), gatewayFetch, { silent: true });
    await medplum.subscriptions.idle();
    tracing = false;
    const figures: QuotaFigure[] = [];
    for (const [membershipId, points] of medplum.quota.spending()) {
      const membership = await medplum.systemRepo.readResource<ProjectMembership>('ProjectMembership', membershipId);
      const [type, id] = (membership.profile?.reference ?? '').split('/');
      if (type === 'Bot') {
        const bot = await medplum.systemRepo.readResource<Bot>('Bot', id);
        figures.push({ spender: bot.name ?? id, bot: true, points });
      } else {
        figures.push({
          spender: type === 'Patient' ? 'the patient' : type === 'Practitioner' ? 'the clinician' : type,
          bot: false,
          points,
        });
      }
    }
    return { quota: figures.sort((a, b) => b.points - a.points), roundTrips: roundTripsOf(traces) };
  } finally {
    medplum.close();
  }
}

function roundTripsOf(traces: BotRunTrace[]): RoundTripFigure[] {
  const byBot = new Map<string, BotRunTrace[]>();
  for (const trace of traces) {
    byBot.set(trace.bot, [...(byBot.get(trace.bot) ?? []), trace]);
  }
  return [...byBot]
    .map(([bot, runs]) => {
      const busiest = runs.reduce((a, b) =>
        sequentialRoundTrips(b.requests) > sequentialRoundTrips(a.requests) ? b : a,
      );
      return {
        bot,
        runs: runs.length,
        maxRequests: Math.max(...runs.map((r) => r.requests.length)),
        maxSequential: sequentialRoundTrips(busiest.requests),
        busiestRun: longestChain(busiest.requests).map(describeRequest),
      };
    })
    .sort((a, b) => b.maxSequential - a.maxSequential);
}

/** `GET ObservationDefinition/_history`, `POST (transaction)`: what a request asked, without ids or values. */
function describeRequest(request: BotRunTrace['requests'][number]): string {
  const path = new URL(request.url).pathname.replace(/^\/fhir\/R4\/?/, '');
  const [type, second, third] = path.split('/');
  const shape =
    second === undefined
      ? type
      : second.startsWith('$') || third?.startsWith('$')
        ? `${type}/${second.startsWith('$') ? second : third}`
        : third === '_history'
          ? `${type}/_history`
          : `${type}/{id}`;
  return `${request.method} ${shape || '(batch)'}`;
}
