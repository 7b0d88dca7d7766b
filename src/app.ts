import { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit as honoBodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { routePath } from 'hono/route';
import { BEARER } from '../contracts/common';
import { uploadDocumentRoute } from '../contracts/documents';
import { ACCEPTED_BODY_TYPES } from '../contracts/errors';
import { recordPlaneAllow } from '../contracts/fhir';
import type { AccessLogEntry, App, AppDeps, AppEnv, Limits } from './app-env';
import { createTokenVerifier, type TokenVerifier } from './auth/verify';
import { admission } from './edge/admission';
import { gatewayCors } from './edge/cors';
import { idempotency } from './edge/idempotency';
import { guardJsonBody } from './edge/json-body';
import { clientAddress, createEdge, type Edge } from './edge/request';
import { ApiError, unauthenticated } from './errors';
import { createCatalogCache } from './medplum/catalog-cache';
import { upstreamFor } from './medplum/client';
import { toApiError } from './medplum/upstream';
import { registerAgreementRoutes } from './routes/agreements';
import { registerAppointmentRoutes } from './routes/appointments';
import { registerAssessmentRoutes } from './routes/assessments';
import { registerConfigRoutes } from './routes/config';
import { registerDocsRoutes } from './routes/docs';
import { registerDocumentRoutes } from './routes/documents';
import { registerEnrollmentRoutes } from './routes/enrollments';
import { registerEventRoutes } from './routes/events';
import { registerFhirRoutes } from './routes/fhir';
import { registerHealthRoutes } from './routes/health';
import { registerMessageRoutes } from './routes/messages';
import { registerOrderRoutes } from './routes/orders';
import { registerPatientRoutes } from './routes/patient';
import { registerProtocolRoutes } from './routes/protocols';
import { registerRequestRoutes } from './routes/requests';
import { registerSchedulingRoutes } from './routes/scheduling';
import { registerTaskRoutes } from './routes/tasks';
import { registerWebAppRoutes } from './routes/web-app';
import { describeIssues, type ValidationIssue } from './shared/validation-issues';

export { DEFAULT_LIMITS, MEDPLUM_IN_FLIGHT } from './app-env';
export type { AccessLogEntry, App, AppDeps, AppEnv, Limits };

/** Characters of an unknown route's path echoed in its 404. */
const MAX_ECHOED_PATH = 256;

/** Routes that limit their own body (uploads, larger than any JSON body). */
const OWN_BODY_LIMIT = new Set<string>([uploadDocumentRoute.path]);

/** A record-plane path of a type (known: unknown types are refused before), and of one resource. */
const RECORD_PATH = /^\/v1\/fhir\/([A-Za-z]+)(?:\/([^/]+))?\/?$/;

/** How long a tenant's published catalog read serves the next calls, by default. */
const CATALOG_TTL_MS = 10_000;

/** Routes that need no session. */
const PUBLIC_PATHS = new Set(['/v1/config', '/v1/openapi.json', '/']);

/** Builds the gateway. No I/O happens here: everything reaches the world through `deps`. */
export function createApp(deps: AppDeps): App {
  const verify =
    deps.verifier ??
    createTokenVerifier({
      issuer: deps.issuer,
      jwksUrl: new URL('.well-known/jwks.json', deps.issuer).href,
      fetch: deps.medplum.fetch,
      clock: deps.clock,
    });
  const edge = createEdge(deps);
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.use('*', requestContext(deps, edge));
  app.use('*', gatewayCors(app, deps.corsOrigins ?? []));
  app.use('*', limitBody(deps.limits.bodyBytes));
  app.use(
    '*',
    guardJsonBody((path) => OWN_BODY_LIMIT.has(path)),
  );
  app.use('/v1/*', authenticate(deps, verify));
  app.use(
    '/v1/*',
    admission({
      perCaller: deps.limits.inFlightPerCaller,
      total: deps.limits.inFlightTotal,
      waiting: deps.limits.inFlightWaiting ?? 0,
      maxWaitMs: deps.limits.upstreamTimeoutMs / 2,
    }),
  );
  app.use('/v1/*', idempotency());

  registerHealthRoutes(app, deps);
  registerConfigRoutes(app, deps);
  registerPatientRoutes(app);
  registerProtocolRoutes(app);
  const catalog = createCatalogCache({ ttlMs: deps.catalogTtlMs ?? CATALOG_TTL_MS, clock: deps.clock });
  registerAgreementRoutes(app, deps.edgeSigner, catalog);
  registerAssessmentRoutes(app, catalog);
  registerTaskRoutes(app, deps.edgeSigner, catalog);
  registerRequestRoutes(app);
  registerOrderRoutes(app);
  registerEnrollmentRoutes(app, catalog);
  registerSchedulingRoutes(app, catalog);
  registerAppointmentRoutes(app);
  registerDocumentRoutes(app);
  registerMessageRoutes(app);
  registerEventRoutes(app, deps.limits.eventWaitsTotal, deps.eventTickets);
  registerFhirRoutes(app);
  app.openAPIRegistry.registerComponent('securitySchemes', BEARER, {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A patient access token issued by the platform (Medplum). Staff, bot and machine tokens are refused.',
  });
  registerDocsRoutes(app, deps.assets);
  if (deps.webApp) {
    registerWebAppRoutes(app, deps.webApp.files, deps.webApp.medplumOrigin);
  }

  const allowedMethods = routeMethods(app);
  app.notFound((c) => {
    // A path that exists, asked with a method it does not have: 405 and what it does allow (RFC 9110).
    // On the record plane, what the patient may do with that type: the same Allow as its refusals.
    const record = RECORD_PATH.exec(c.req.path);
    const allow = record ? recordPlaneAllow(record[1], record[2] !== undefined) : allowedMethods(c.req.path);
    if (allow.length > 0) {
      return errorResponse(
        c,
        new ApiError(
          'method_not_allowed',
          `${c.req.method} is not allowed on this path`,
          { allow },
          {
            Allow: allow.join(', '),
          },
        ),
      );
    }
    // What the gateway saw, for a client behind a proxy that rewrote the path; bounded, never the query.
    return errorResponse(
      c,
      new ApiError('not_found', 'No such route', { method: c.req.method, path: c.req.path.slice(0, MAX_ECHOED_PATH) }),
    );
  });
  app.onError((err, c) => errorResponse(c, err));
  return app;
}

/**
 * The methods each registered route path answers, looked up by a request path: what a 405's `Allow`
 * lists. Read once the routes are registered; middleware (method ALL) is no route.
 */
function routeMethods(app: App): (path: string) => string[] {
  const routes = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const { path, method } of app.routes) {
    if (method === 'ALL' || path.includes('*')) {
      continue;
    }
    let route = routes.get(path);
    if (!route) {
      const source = path
        .split('/')
        .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      route = { pattern: new RegExp(`^${source}/?$`), methods: new Set() };
      routes.set(path, route);
    }
    route.methods.add(method);
    if (method === 'GET') {
      route.methods.add('HEAD');
    }
  }
  return (requestPath) => {
    const allowed = new Set<string>();
    for (const { pattern, methods } of routes.values()) {
      if (pattern.test(requestPath)) {
        for (const method of methods) {
          allowed.add(method);
        }
      }
    }
    return [...allowed].sort();
  };
}

/** The one place an error becomes a response: the envelope, its status, never a stack or upstream text. */
export function errorResponse(c: Context<AppEnv>, err: unknown): Response {
  const requestId = c.get('requestId');
  const known = toApiError(err) ?? frameworkError(err);
  if (!known) {
    // A bug: record where it happened for operators, but not its message, which may hold patient data.
    const frames =
      err instanceof Error
        ? (err.stack ?? '')
            .split('\n')
            .slice(1, 6)
            .map((l) => l.trim())
        : [];
    console.error(
      JSON.stringify({ level: 'error', requestId, error: err instanceof Error ? err.name : typeof err, frames }),
    );
  }
  const error = known ?? new ApiError('internal', 'Internal error');
  return c.json(error.toEnvelope(requestId), error.status as 400, { ...error.headers, 'X-Request-Id': requestId });
}

/** Hono's own client-error exceptions (e.g. a body that is not JSON) in our vocabulary. */
function frameworkError(err: unknown): ApiError | undefined {
  if (!(err instanceof HTTPException)) {
    return undefined;
  }
  switch (err.status) {
    case 400:
      return new ApiError('invalid_request', 'The body is not valid JSON', {
        issues: [{ path: '', message: 'malformed JSON' }],
      });
    case 415:
      // Every body route declares JSON, and @hono/zod-openapi's gate lets any `application/*+json` through.
      return new ApiError('unsupported_media_type', 'Send application/json or application/fhir+json', {
        accepted: ACCEPTED_BODY_TYPES,
      });
    default:
      return undefined;
  }
}

function validationHook(
  result: { success: boolean; error?: { issues: ValidationIssue[] } },
  c: Context<AppEnv>,
): Response | undefined {
  if (result.success) {
    return undefined;
  }
  const issues = describeIssues(result.error?.issues ?? []);
  return errorResponse(c, new ApiError('invalid_request', 'The request is not valid', { issues }));
}

const REQUEST_ID = /^[A-Za-z0-9._-]{8,128}$/;

function requestContext(deps: AppDeps, edge: Edge): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const incoming = c.req.header('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set('requestId', requestId);
    c.set('edge', edge);
    const started = performance.now();
    await next();
    c.res.headers.set('X-Request-Id', requestId);
    deps.log?.({
      requestId,
      method: c.req.method,
      // The route that matched last: the endpoint's, also for a call a middleware answered (a replay).
      route: routePath(c, -1),
      status: c.res.status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
    });
  };
}

/**
 * Hono's body limit: checks Content-Length up front and counts a chunked body as it streams, so a
 * body is read once (by the route), never buffered twice.
 */
function limitBody(limit: number): MiddlewareHandler<AppEnv> {
  const limited = honoBodyLimit({
    maxSize: limit,
    onError: (c) =>
      errorResponse(
        c as Context<AppEnv>,
        new ApiError('payload_too_large', `The body is over ${limit} bytes`, { limit }),
      ),
  });
  // No route reads the body of a GET or HEAD, so there is nothing to limit there; and asking the
  // request for its body stream would cost every read a full Request object on Node. An upload counts
  // its own body against its own documented limit.
  return (c, next) =>
    c.req.method === 'GET' || c.req.method === 'HEAD' || OWN_BODY_LIMIT.has(c.req.path) ? next() : limited(c, next);
}

function authenticate(deps: AppDeps, verify: TokenVerifier): MiddlewareHandler<AppEnv> {
  const upstream = upstreamFor(deps.medplum, deps.limits.upstreamTimeoutMs, deps.limits.medplumInFlight);
  return async (c, next) => {
    if (PUBLIC_PATHS.has(c.req.path)) {
      return next();
    }
    const header = c.req.header('authorization') ?? '';
    // Her event feed in a browser: a ticket in the URL stands for her token (GET /v1/events only).
    const ticket = !header && c.req.method === 'GET' && c.req.path === '/v1/events' ? c.req.query('ticket') : undefined;
    const token = ticket ? await deps.eventTickets?.open(ticket) : /^Bearer ([A-Za-z0-9\-_.]+)$/.exec(header)?.[1];
    if (ticket && !token) {
      throw unauthenticated(
        'invalid_token',
        'The ticket is not valid or has expired: ask for a new one (POST /v1/events/tickets)',
      );
    }
    if (!token) {
      throw unauthenticated(header ? 'invalid_token' : 'missing_token', 'A bearer token is required');
    }
    const session = await verify(token);
    c.set('session', session);
    c.set('upstream', upstream(token, clientAddress(c), session.profile));
    return next();
  };
}
