import type { Context } from 'hono';
import { FHIR_JSON } from '../../contracts/common';

/** FHIR resources go out as `application/fhir+json` (spec rule 7). */
export function fhirResponse(c: Context, body: unknown, status: 200 | 201 = 200): Response {
  return c.body(JSON.stringify(body), status, { 'Content-Type': FHIR_JSON });
}
