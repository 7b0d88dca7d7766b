import type { AuditEvent, Bot, Bundle, Schedule } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { type Answer, DAY, describe, entriesOf, lastLine, row } from './common';

/** Every Schedule of the demo tenants has free Slots in the coming week (materialize-slots ran at provisioning). */
export async function calendars(adminGet: (path: string) => Promise<Answer>): Promise<void> {
  const tenants = new Map<string, string>();
  for (const tenant of DEMO_TENANTS) {
    const org = entriesOf(
      (await adminGet(`fhir/R4/Organization?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|org-${tenant.key}`)}`))
        .body,
    )[0];
    if (org?.id) {
      tenants.set(`Organization/${org.id}`, tenant.name);
    }
  }
  // What the bot said of its runs (provisioning runs it once at its end).
  const bot = entriesOf(
    (await adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|materialize-slots`)}`)).body,
  )[0];
  const runs = bot?.id
    ? (entriesOf(
        (await adminGet(`fhir/R4/AuditEvent?entity=Bot/${bot.id}&_sort=_lastUpdated&_count=20`)).body,
      ) as AuditEvent[])
    : [];
  const failedRuns = runs.filter((r) => r.outcome !== '0');
  row(
    'calendars: the materialize-slots runs (AuditEvents)',
    runs.length > 0 && failedRuns.length === 0 ? 'ok' : 'FAILED',
    runs.length === 0
      ? 'no run recorded'
      : `${runs.length} run(s), outcomes ${runs.map((r) => r.outcome).join(', ')}${failedRuns.length ? `; ${lastLine(failedRuns[0].outcomeDesc)}` : ''}`,
  );
  const schedules = entriesOf((await adminGet('fhir/R4/Schedule?active=true&_count=100')).body) as Schedule[];
  const ours = schedules.filter((s) => s.meta?.accounts?.some((a) => tenants.has(a.reference ?? '')));
  if (ours.length === 0) {
    row('calendars: every demo Schedule has free Slots this week', 'FAILED', 'no Schedule of the demo tenants');
    return;
  }
  const now = new Date();
  const end = new Date(now.getTime() + 7 * DAY);
  for (const schedule of ours) {
    const tenant = tenants.get(schedule.meta?.accounts?.find((a) => tenants.has(a.reference ?? ''))?.reference ?? '');
    const counted = await adminGet(
      `fhir/R4/Slot?schedule=Schedule/${schedule.id}&status=free&start=ge${now.toISOString()}&start=lt${end.toISOString()}&_summary=count`,
    );
    const total = (counted.body as Bundle | undefined)?.total ?? 0;
    row(
      `calendars: ${schedule.comment ?? `Schedule/${schedule.id}`} (${tenant})`,
      counted.status === 200 && total > 0 ? 'ok' : 'FAILED',
      counted.status === 200 ? `${total} free Slots in the coming week` : describe(counted),
    );
  }
}

/** Whether the reconcile cron bot has run: an AuditEvent of a run Medplum started without a requester. */
export async function cron(adminGet: (path: string) => Promise<Answer>, waitMinutes: number): Promise<void> {
  const found = await adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|reconcile`)}`);
  const bot = entriesOf(found.body)[0] as Bot | undefined;
  if (!bot?.id) {
    row('cron: the reconcile bot has run', 'FAILED', 'no reconcile bot');
    return;
  }
  const deadline = Date.now() + waitMinutes * 60_000;
  for (;;) {
    const events = entriesOf(
      (await adminGet(`fhir/R4/AuditEvent?entity=Bot/${bot.id}&_sort=-_lastUpdated&_count=20`)).body,
    ) as AuditEvent[];
    // A cron run has no requester (packages/server/src/workers/cron.ts executeBot without one).
    const runs = events.filter((e) => !e.agent?.some((a) => a.requestor && a.who?.reference));
    if (runs.length > 0) {
      const last = runs[0];
      row(
        `cron: the reconcile bot has run (${bot.cronString})`,
        last.outcome === '0' ? 'ok' : 'FAILED',
        `${runs.length} run(s), last at ${last.recorded} with outcome ${last.outcome}${last.outcome === '0' ? '' : `: ${lastLine(last.outcomeDesc)}`}`,
      );
      return;
    }
    if (Date.now() >= deadline) {
      const waited = waitMinutes > 0 ? ` within ${waitMinutes} min` : ' yet';
      row(
        `cron: the reconcile bot has run (${bot.cronString})`,
        waitMinutes > 0 ? 'FAILED' : 'pending',
        `no run${waited}${waitMinutes > 0 ? '' : ' (--wait-cron-minutes N to wait for one)'}; ${events.length} AuditEvent(s) of it in all`,
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 15_000));
  }
}
