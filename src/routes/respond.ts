import type { Context } from 'hono';
import { FHIR_JSON } from '../../contracts/common';

/**
 * FHIR resources go out as `application/fhir+json` (spec rule 7). zod-openapi types a handler's
 * return by the route's JSON schema and cannot express a fhir+json text body, hence the cast here,
 * in one place; the response-validating test client checks these bodies against the document.
 */
export function fhirResponse(c: Context, body: unknown, status: 200 | 201 = 200): never {
  return routeResponse(c.body(JSON.stringify(body), status, { 'Content-Type': FHIR_JSON }));
}

/** A ready Response (e.g. Medplum's bytes passed through) as a route's typed return; see above. */
export function routeResponse(response: Response): never {
  return response as never;
}
