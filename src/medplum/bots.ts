import type { MedplumClient } from '@medplum/core';
import { getStatus, OperationOutcomeError } from '@medplum/core';
import type { Identifier } from '@medplum/fhirtypes';
import { ERROR_STATUS, type ErrorCode } from '../../contracts/errors';
import { ApiError } from '../errors';
import { retryAfterSeconds } from '../shared/rate-limit';

interface BotFailure {
  ok: false;
  error: { status: number; code: string; message: string; details?: Record<string, unknown> };
}

const isFailure = (value: unknown): value is BotFailure =>
  typeof value === 'object' && value !== null && (value as { ok?: unknown }).ok === false;

/**
 * What Medplum answers a `$execute` it refuses before any bot runs: the session (401), access to the
 * Bot (403, 404) and throttling (429). Any other outcome comes from a bot that threw.
 */
const MEDPLUM_REFUSALS = new Set([401, 403, 404, 429]);

/**
 * Runs a workflow bot as the patient (`Bot/$execute?identifier=`; Medplum sets `event.requester`).
 * A bot's business failure comes back as data and becomes the error envelope here; a bot that threw
 * is a 400 from Medplum, which is our bug, not the client's, so it is a 500.
 */
export async function callBot(
  medplum: MedplumClient,
  bot: Identifier,
  input: unknown,
): Promise<Record<string, unknown>> {
  let result: unknown;
  try {
    result = await medplum.executeBot(bot, input, 'application/json', { maxRetries: 0 });
  } catch (err) {
    if (err instanceof OperationOutcomeError && err.outcome.issue?.some((i) => i.code === 'throttled')) {
      // Whose quota (packages/server/src/fhir/fhirquota.ts)? Medplum's `RateLimit` header on the answer is
      // the caller's own state: spent, the $execute itself was refused, and she is over her share (429).
      // Otherwise the bot ran out of its own quota, which all patients share: the platform is at capacity,
      // not the caller at fault (503). Either way nothing was written (each bot's change is one
      // transaction) and the same call later succeeds.
      const own = medplum.rateLimitStatus().find((limit) => limit.name === 'fhirInteractions');
      if (own && own.remainingUnits <= 0) {
        const wait = Math.min(Math.max(own.secondsUntilReset, 1), 60);
        throw new ApiError(
          'rate_limited',
          'Too many requests from this account; try again shortly',
          { retryAfter: wait },
          { 'Retry-After': String(wait) },
        );
      }
      const seconds = retryAfterSeconds(err.outcome);
      throw new ApiError(
        'upstream_unavailable',
        'The record service is at capacity; try again shortly',
        { retryAfter: seconds },
        { 'Retry-After': String(seconds) },
      );
    }
    if (err instanceof OperationOutcomeError && !MEDPLUM_REFUSALS.has(getStatus(err.outcome))) {
      // The bot threw: never the caller's fault, and its text may hold internals. Medplum answers it
      // 400 with the normalized outcome of what was thrown, whose code (conflict, invalid...) is not a
      // status; only a refusal of the $execute itself (session, access to the Bot, throttling) is.
      throw new Error('workflow bot failed');
    }
    throw err;
  }
  return botAnswer(result);
}

/**
 * A workflow's answer as the API gives it: a failure (`{ok: false, error}`) becomes the error envelope,
 * anything else is the answer. For workflows the gateway runs itself with her token (availability).
 */
export function botAnswer(result: unknown): Record<string, unknown> {
  if (isFailure(result)) {
    const code = result.error.code as ErrorCode;
    if (ERROR_STATUS[code] === undefined) {
      throw new Error('bot answered an unknown error code');
    }
    // A bot's own limit (a daily cap) says when to come back, as the gateway's do.
    const wait = result.error.details?.retryAfter;
    throw new ApiError(
      code,
      result.error.message,
      result.error.details,
      code === 'rate_limited' && typeof wait === 'number' ? { 'Retry-After': String(wait) } : undefined,
    );
  }
  if (typeof result !== 'object' || result === null) {
    throw new Error('bot answered no result');
  }
  return result as Record<string, unknown>;
}
