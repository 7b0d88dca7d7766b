import { createHmac } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import { EDGE_KEY_CHECK, EDGE_STATEMENT, SYSTEMS } from '../contracts/systems';
import { absent } from './lib/absent';
import { readInput } from './lib/input';
import { fail } from './lib/result';

/**
 * The gateway's check of its EDGE_STATEMENT_KEY at start and on its readiness probe (src/edge/edge-key.ts):
 * answers the id of the Project's edge-statement key (HMAC-SHA256 of a fixed text under the key, in hex:
 * nothing of the key itself), or `null` when the Project has none. Only the platform's gateway client runs it:
 * the Bot is readable to that client's policy alone, and the bot believes only `event.requester`, re-read as
 * a ClientApplication the platform tagged as its gateway.
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('edge-key-check', event.input);
  if (!input.ok) {
    return input;
  }
  const id = /^ClientApplication\/([A-Za-z0-9\-.]{1,64})$/.exec(event.requester?.reference ?? '')?.[1];
  const client = id ? await medplum.readResource('ClientApplication', id).catch(absent) : undefined;
  const isGateway = client?.meta?.tag?.some(
    (t) => t.system === SYSTEMS.integration && t.code === EDGE_KEY_CHECK.integration,
  );
  if (!isGateway) {
    return fail(403, 'forbidden', 'Only the gateway’s own client checks its key');
  }
  const key = event.secrets?.[EDGE_STATEMENT.secretName]?.valueString;
  return { ok: true, keyId: key ? createHmac('sha256', key).update(EDGE_KEY_CHECK.context).digest('hex') : null };
}
