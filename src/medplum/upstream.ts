import { getStatus, isOperationOutcome, OperationOutcomeError } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { ApiError, forbidden, unauthenticated } from '../errors';
import { hasBufferedBody, withBufferedBody } from '../shared/buffered-body';
import { retryAfterSeconds } from '../shared/rate-limit';

/** Thrown by the gateway's fetch when Medplum itself failed; never a client mistake. */
export class UpstreamFailure extends Error {
  constructor(readonly kind: 'error' | 'unavailable' | 'timeout') {
    super(`upstream ${kind}`);
  }
}

/**
 * The fetch every per-request MedplumClient uses: a deadline for each call, and Medplum's own
 * failures (5xx, unreachable, too slow) turned into UpstreamFailure before the client sees them,
 * so that they map to 502/503/504 and are never mistaken for an answer.
 */
export function upstreamFetch(base: typeof fetch, timeoutMs: number): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    // A timer cleared when the call ends, not AbortSignal.timeout: that one stays armed for the
    // whole timeout, keeping the signal and the fetch's listeners on it alive long after the call.
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new UpstreamFailure('timeout'));
      }, timeoutMs);
    });
    let response: Response;
    try {
      // The signal cancels a network call; the race holds the deadline for a fetch that cannot be
      // cancelled (the in-process embedded Medplum, whose work may still complete after it).
      response = await Promise.race([whole(base(input, { ...init, signal: controller.signal })), deadline]);
    } catch {
      // Only the deadline aborts the call, so an aborted signal is the one sign of a timeout.
      if (controller.signal.aborted) {
        throw new UpstreamFailure('timeout');
      }
      throw new UpstreamFailure('unavailable');
    } finally {
      clearTimeout(timer);
    }
    if (response.status >= 500) {
      throw new UpstreamFailure(
        response.status === 503 ? 'unavailable' : response.status === 504 ? 'timeout' : 'error',
      );
    }
    const type = response.headers.get('content-type') ?? '';
    if (!type.includes('json') && !type.startsWith('text/plain') && response.status !== 204 && !isBinary(input)) {
      throw new UpstreamFailure('error');
    }
    return response;
  }) as typeof fetch;
}

/**
 * The answer with its body read whole, inside the deadline: a fetch that hands over the headers
 * first (the platform's) would otherwise leave a body that stalls after them without a deadline.
 */
async function whole(answer: Promise<Response>): Promise<Response> {
  const response = await answer;
  if (hasBufferedBody(response) || response.body === null) {
    return response;
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const copy = new Response(bytes, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  return withBufferedBody(copy, bytes);
}

function isBinary(input: RequestInfo | URL): boolean {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  return /\/Binary\//.test(url);
}

/** Maps what a MedplumClient call threw to the public error; undefined when it is not Medplum's (a bug). */
export function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) {
    return err;
  }
  if (err instanceof UpstreamFailure) {
    const code = { error: 'upstream_error', unavailable: 'upstream_unavailable', timeout: 'upstream_timeout' } as const;
    const message = {
      error: 'The record service failed',
      unavailable: 'The record service is unreachable',
      timeout: 'The record service did not answer in time',
    } as const;
    return new ApiError(code[err.kind], message[err.kind]);
  }
  const outcome: OperationOutcome | undefined =
    err instanceof OperationOutcomeError ? err.outcome : isOperationOutcome(err) ? err : undefined;
  if (!outcome) {
    return undefined;
  }
  const text = outcome.issue?.[0]?.details?.text ?? outcome.issue?.[0]?.diagnostics;
  switch (getStatus(outcome)) {
    case 400:
    case 422:
      return new ApiError('invalid_request', text ?? 'The request is not valid', {
        issues: (outcome.issue ?? []).map((i) => ({
          path: i.expression?.[0] ?? '',
          message: i.details?.text ?? i.code,
        })),
      });
    case 401:
      // The token passed the gateway's own checks, so Medplum refused the session itself: it has ended.
      return unauthenticated('revoked', 'The session is no longer valid');
    case 403:
      return forbidden('access_policy', 'Not allowed');
    case 404:
    case 410:
      return new ApiError('not_found', 'Not found');
    case 409:
      return new ApiError('invalid_state', 'The resource changed state', { state: 'conflict' });
    case 412:
      // The route that sent the If-Match adds it to the details (src/routes/fhir.ts).
      return new ApiError('version_conflict', 'If-Match does not match the current version');
    case 429: {
      const seconds = retryAfterSeconds(outcome);
      return new ApiError(
        'rate_limited',
        'Too many requests',
        { retryAfter: seconds },
        { 'Retry-After': String(seconds) },
      );
    }
    default:
      return new ApiError('upstream_error', 'The record service failed');
  }
}
