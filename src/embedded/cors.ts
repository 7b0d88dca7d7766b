import { forbidden } from '@medplum/core';
import type { MiddlewareHandler } from 'hono';
import { cors, type OriginRule } from '../shared/cors';
import { outcomeResponse } from './fhir-http';

/** Medplum's API prefixes that answer CORS (packages/server/src/cors.ts `prefixes`, those we serve). */
const PREFIXES = ['/.well-known/', '/admin/', '/auth/', '/fhir/', '/oauth2/'];

/** What Medplum lets a page read (packages/server/src/cors.ts `exposedHeaders`). */
const EXPOSED = ['Content-Location', 'ETag', 'Last-Modified', 'Location', 'RateLimit'];

/** The `cors` package's default methods, which Medplum's server uses. */
const METHODS = ['GET', 'HEAD', 'PUT', 'PATCH', 'POST', 'DELETE'];

/**
 * CORS as Medplum's server answers it (packages/server/src/cors.ts): the allowed origins only, on its
 * API paths only, the origin reflected with credentials, the requested headers allowed. Refused
 * preflights are 403 here (Medplum's falls through to its routes, which do not answer OPTIONS).
 */
export function medplumCors(origins: readonly OriginRule[]): MiddlewareHandler {
  return cors({
    origins,
    methods: () => METHODS,
    exposeHeaders: EXPOSED,
    credentials: true,
    paths: (path) => PREFIXES.some((prefix) => path.startsWith(prefix)),
    refuse: () => outcomeResponse(forbidden),
  });
}
