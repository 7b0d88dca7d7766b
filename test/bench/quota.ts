import type { Bot, ProjectMembership } from '@medplum/fhirtypes';
import { embeddedBackend, embeddedGateway, journey } from '../../scripts/demo';
import { type RoundTripFigure, roundTripsByBot } from '../../scripts/round-trips';
import type { BotRunTrace } from '../../src/embedded/bots/operations';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { demoDefinition } from '../../src/provision/demo';

export interface QuotaFigure {
  /** A bot's name, or who else spent: the patient, the clinician. */
  spender: string;
  bot: boolean;
  points: number;
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
    return { quota: figures.sort((a, b) => b.points - a.points), roundTrips: roundTripsByBot(traces) };
  } finally {
    medplum.close();
  }
}
