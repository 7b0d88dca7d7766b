/**
 * What a workflow bot returns. Medplum answers 200 with whatever the bot returns and 400 when it
 * throws, so business failures travel as data and the gateway maps them to HTTP (DESIGN section 2):
 * the public API still never answers 200 with a failure.
 */
export interface BotError {
  status: number;
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export type BotResult<T> = ({ ok: true } & T) | { ok: false; error: BotError };

export function fail(
  status: number,
  code: string,
  message: string,
  details?: Record<string, unknown>,
): { ok: false; error: BotError } {
  return { ok: false, error: { status, code, message, details } };
}
