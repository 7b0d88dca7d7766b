import type { MiddlewareHandler } from 'hono';
import type { App, AppEnv } from '../app-env';
import { ApiError } from '../errors';
import { cors, type OriginRule } from '../shared/cors';

/** The request headers a page may send: those the document uses (Accept and the like are safelisted). */
const REQUEST_HEADERS = [
  'Authorization',
  'Content-Type',
  'Idempotency-Key',
  'If-Match',
  // A stream of her events resumed where it stopped (GET /v1/events as Server-Sent Events).
  'Last-Event-ID',
  'X-Request-Id',
];

/** What a page may read of an answer, besides the safelisted headers: what the document promises. */
const RESPONSE_HEADERS = [
  'X-Request-Id',
  'ETag',
  'Last-Modified',
  'Location',
  'Allow',
  'Retry-After',
  'WWW-Authenticate',
  'RateLimit',
  'Idempotent-Replayed',
];

/**
 * The gateway's CORS: the allowed origins (`CORS_ORIGINS`), the methods its routes have (read from
 * the registered routes, once) and the headers above. No credentials: the API takes a bearer token,
 * never a cookie. A refused preflight is 403 `forbidden`, naming what was refused.
 */
export function gatewayCors(app: App, origins: readonly OriginRule[]): MiddlewareHandler<AppEnv> {
  let methods: string[] | undefined;
  return cors({
    origins,
    methods: () => {
      methods ??= [...new Set(app.routes.map((r) => r.method).filter((m) => m !== 'ALL'))].sort();
      return methods;
    },
    allowHeaders: REQUEST_HEADERS,
    exposeHeaders: RESPONSE_HEADERS,
    refuse: (_c, why) => {
      throw new ApiError('forbidden', 'This cross-origin call is not allowed', {
        reason: why.method || why.headers ? 'cors_request_not_allowed' : 'cors_origin_not_allowed',
        ...why,
        // The caller's own header, bounded: it is echoed to help a developer, nothing more.
        ...(why.origin ? { origin: why.origin.slice(0, 200) } : {}),
      });
    },
  });
}
