import type { Bundle, QuestionnaireResponse, Resource } from '@medplum/fhirtypes';
import type { Context } from 'hono';
import {
  concreteReadRoutes,
  createQuestionnaireResponseRoute,
  DEFAULT_COUNT,
  MAX_QUERY_BYTES,
  NO_PATIENT_WRITE,
  readRoute,
  recordPlaneAllow,
  refusedCreateRoute,
  refusedDeleteRoute,
  refusedPatchRoute,
  refusedUpdateRoute,
  searchRoute,
  someTypeAllows,
  updatePatientRoute,
  updateQuestionnaireResponseRoute,
  WRITE_OWNERS,
} from '../../contracts/fhir';
import { isCountryCode } from '../../contracts/iso3166';
import { isKnownResourceType, UNKNOWN_RESOURCE_TYPE } from '../../contracts/resource-types';
import type { App, AppEnv } from '../app-env';
import { publicUrl } from '../edge/request';
import { ApiError, forbidden, notFound } from '../errors';
import { medplumOf } from '../medplum/client';
import { readThrough } from '../medplum/passthrough';
import { toApiError } from '../medplum/upstream';
import { fhirResponse, routeResponse } from './respond';

export function registerFhirRoutes(app: App): void {
  // `$` operations first: whatever the method, they do not exist here (spec rule 9). Then the method:
  // one no type allows on this path (DELETE, PATCH) is 405 whatever the type. Then the type: one the
  // record service does not know is 400, also for a method no route of its path has (PUT on a
  // collection), which would otherwise be a 405 naming methods of a type that does not exist.
  app.use('/v1/fhir/*', async (c, next) => {
    const segments = c.req.path.split('/');
    const operation = segments.find((segment) => segment.startsWith('$'));
    if (operation) {
      throw new ApiError('not_found', 'FHIR operations are not available', { operation });
    }
    const type = segments[3];
    const instance = segments.length > 4 && segments[4] !== '';
    if (type && segments.length <= 5 && !someTypeAllows(c.req.method, instance)) {
      // Asked of Medplum once, so that a revoked session is 401 here too.
      await medplumOf(c).readResource('Patient', c.get('session').patientId);
      const allow = recordPlaneAllow(isKnownResourceType(type) ? type : '', instance);
      throw new ApiError(
        'method_not_allowed',
        `${c.req.method} is not allowed here; this change belongs to a workflow endpoint`,
        { use: (isKnownResourceType(type) && WRITE_OWNERS[type]) || NO_PATIENT_WRITE, allow },
        { Allow: allow.join(', ') },
      );
    }
    if (type && !isKnownResourceType(type)) {
      throw new ApiError('invalid_request', 'The request is not valid', {
        issues: [{ path: 'type', message: UNKNOWN_RESOURCE_TYPE }],
      });
    }
    if (type === 'Binary' && (c.req.method === 'GET' || c.req.method === 'HEAD')) {
      // Stored files are never read by id on the record plane (her policy has no Binary read: see
      // src/provision/definition.ts); her own come back through their endpoint. Asked of Medplum once,
      // so that a revoked session is 401 here too.
      await medplumOf(c).readResource('Patient', c.get('session').patientId);
      throw new ApiError('not_found', 'Stored files are read at their own endpoint', {
        use: 'GET /v1/documents/{id}',
      });
    }
    return next();
  });

  app.openapi(searchRoute, async (c) => {
    const { type } = c.req.valid('param');
    const query = new URLSearchParams(new URL(c.req.url).search);
    // A page size of our own, unless she asks for the count alone (`_summary=count`, which a `_count`
    // after it would undo: Medplum reads the parameters in order).
    if (!query.has('_count') && query.get('_summary') !== 'count') {
      query.set('_count', String(DEFAULT_COUNT));
    }
    // Measured as it will be sent (MedplumClient sends exactly this encoding), not as it came.
    const forwarded = query.toString().length;
    if (forwarded > MAX_QUERY_BYTES) {
      throw new ApiError('invalid_request', `The search query is over ${MAX_QUERY_BYTES} bytes once encoded`, {
        limit: MAX_QUERY_BYTES,
        issues: [{ path: '', message: `${forwarded} bytes once percent-encoded; the limit is ${MAX_QUERY_BYTES}` }],
      });
    }
    const bundle = await medplumOf(c).search(type as Resource['resourceType'], query);
    return fhirResponse(c, rewriteBundle(bundle, c));
  });

  app.openapi(readRoute, async (c) => {
    const { type, id } = c.req.valid('param');
    return routeResponse(await readThrough(c.get('upstream'), type, id));
  });

  // In the document only: the templated routes above answer these paths.
  for (const route of concreteReadRoutes) {
    app.openAPIRegistry.registerPath(route);
  }

  app.openapi(updatePatientRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    if (id !== c.get('session').patientId || body.id !== id) {
      // Someone else's Patient, or a body for another id: indistinguishable from absent.
      throw notFound();
    }
    const addresses = body.address ?? [];
    const invalid = addresses.findIndex((a) => !isCountryCode(a.country));
    if (addresses.length === 0 || invalid >= 0) {
      throw new ApiError('invalid_country', 'address.country is required and must be an ISO 3166-1 alpha-2 code', {
        path: addresses.length === 0 ? 'address' : `address.${invalid}.country`,
      });
    }
    return fhirResponse(c, await update(c, body as Resource));
  });

  app.openapi(createQuestionnaireResponseRoute, async (c) => {
    const answers = ownAnswers(c, c.req.valid('json') as QuestionnaireResponse);
    const created = await medplumOf(c).createResource({ ...answers, id: undefined });
    return fhirResponse(c, created, 201);
  });

  app.openapi(updateQuestionnaireResponseRoute, async (c) => {
    const { id } = c.req.valid('param');
    const answers = ownAnswers(c, c.req.valid('json') as QuestionnaireResponse);
    // The document makes the body's `id` optional: without one, the path names the resource; with one,
    // it must be the path's (a body naming another resource is a mistake, never a redirect).
    if (answers.id !== undefined && answers.id !== id) {
      throw new ApiError('invalid_request', 'The body id must match the path', {
        issues: [{ path: 'id', message: 'must equal the path id' }],
      });
    }
    return fhirResponse(c, await update(c, { ...answers, id }));
  });

  for (const route of [refusedCreateRoute, refusedUpdateRoute, refusedPatchRoute, refusedDeleteRoute]) {
    app.openapi(route, async (c) => {
      // Nothing here reaches Medplum otherwise: ask it once, so a revoked session is 401 here too.
      await medplumOf(c).readResource('Patient', c.get('session').patientId);
      const { type } = c.req.valid('param') as { type: string; id?: string };
      const allow = recordPlaneAllow(type, route.path.endsWith('{id}'));
      throw new ApiError(
        'method_not_allowed',
        `${c.req.method} is not allowed here; this change belongs to a workflow endpoint`,
        { use: WRITE_OWNERS[type] ?? NO_PATIENT_WRITE, allow },
        { Allow: allow.join(', ') },
      );
    });
  }
}

/** QuestionnaireResponses are the patient's own: the subject is them, set when omitted. */
function ownAnswers(c: Context<AppEnv>, answers: QuestionnaireResponse): QuestionnaireResponse {
  const patient = c.get('session').profile;
  const subject = answers.subject?.reference;
  if (subject !== undefined && subject !== patient) {
    throw forbidden('not_own_record', "Answers can only be written for the signed-in patient's own record");
  }
  return { ...answers, subject: { reference: patient } };
}

/** Longest If-Match echoed in a 412 (`W/"<uuid>"` is 41). */
const MAX_ECHOED_IF_MATCH = 100;

/**
 * An update, conditional on the client's If-Match when it sent one (FHIR's rule): a stale version is
 * 412 with `details.ifMatch`, what was sent, so the client can tell which write lost.
 */
async function update<T extends Resource>(c: Context<AppEnv>, resource: T): Promise<T> {
  const sent = c.req.header('if-match');
  try {
    return await medplumOf(c).updateResource(resource, sent ? { headers: { 'If-Match': sent } } : undefined);
  } catch (err) {
    const known = toApiError(err);
    if (known?.code === 'version_conflict') {
      throw new ApiError(known.code, known.message, { ifMatch: sent?.slice(0, MAX_ECHOED_IF_MATCH) });
    }
    throw err;
  }
}

/**
 * Medplum's URLs in links and fullUrls become this API's own `/v1/fhir/...` URLs under PUBLIC_URL
 * (never the backend's host, never the Host header a client sent).
 */
function rewriteBundle(bundle: Bundle, c: Context<AppEnv>): Bundle {
  const origin = publicUrl(c);
  const rewrite = (url: string | undefined): string | undefined => {
    if (!url) {
      return url;
    }
    const match = /\/fhir\/R4\/(.*)$/.exec(url);
    return match ? `${origin}/v1/fhir/${match[1]}` : undefined;
  };
  return {
    ...bundle,
    link: bundle.link?.map((l) => ({ ...l, url: rewrite(l.url) ?? '' })).filter((l) => l.url),
    entry: bundle.entry?.map((e) => ({ ...e, fullUrl: rewrite(e.fullUrl) })),
  };
}
