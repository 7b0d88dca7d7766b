import type { BotEvent, MedplumClient } from '@medplum/core';
import { fail } from './result';
import { requireTenantBackend, type TenantBackendCaller } from './trust';

/**
 * A caller's budget of runs of one bot a minute: Medplum records each run of a bot with its requester
 * (createBotAuditEvent, packages/server/src/util/auditevent.ts: agent[0] the requester, entity the Bot), so
 * the caller's runs in the last minute are one search away and nothing is written to count them. At the
 * budget the caller is told when to come back (429 `rate_limited`, `retryAfter` in seconds); undefined below it.
 */
export async function overBudget(
  medplum: MedplumClient,
  requester: string,
  bot: string | undefined,
  perMinute: number,
  message: string,
): Promise<ReturnType<typeof fail> | undefined> {
  if (!bot) {
    return undefined;
  }
  const now = Date.now();
  const runs = await medplum.searchResources(
    'AuditEvent',
    {
      agent: requester,
      entity: bot,
      date: `ge${new Date(now - 60_000).toISOString()}`,
      _sort: 'date',
      _count: String(perMinute),
    },
    { cache: 'no-cache' },
  );
  if (runs.length < perMinute) {
    return undefined;
  }
  const oldest = Date.parse(runs[0]?.recorded ?? '') || now;
  return fail(429, 'rate_limited', message, {
    retryAfter: Math.max(1, Math.ceil((oldest + 60_000 - now) / 1000)),
    limit: perMinute,
  });
}

/**
 * A tenant's backend calling one of its operations (bots/lib/trust.ts `requireTenantBackend`), within its
 * budget of `perMinute` runs of this bot: its caller, or the answer to give (403 to anyone else, 429 over it).
 */
export async function tenantBackendWithin(
  medplum: MedplumClient,
  event: BotEvent,
  perMinute: number,
  message: string,
): Promise<{ ok: true; caller: TenantBackendCaller } | ReturnType<typeof fail>> {
  const backend = await requireTenantBackend(medplum, event);
  if (!backend.ok) {
    return backend;
  }
  return (await overBudget(medplum, backend.caller.client, event.bot?.reference, perMinute, message)) ?? backend;
}
