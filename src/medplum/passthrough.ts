import { isOperationOutcome, OperationOutcomeError } from '@medplum/core';
import { FHIR_JSON } from '../../contracts/common';
import { bodyBytes } from '../shared/buffered-body';
import type { Upstream } from './client';
import { UpstreamFailure } from './upstream';

/**
 * Reads one resource with the patient's token and hands Medplum's bytes on unchanged: a read needs no
 * rewriting, and parsing and re-serializing every resource was a large part of the gateway's own work
 * per call. One GET with the headers MedplumClient would send, and no MedplumClient: making one was about
 * 12 µs of every read (profiled over a real Medplum). Failures are Medplum's OperationOutcome, thrown for
 * the error mapper.
 */
export async function readThrough(upstream: Upstream, type: string, id: string): Promise<Response> {
  const url = `${upstream.baseUrl}fhir/R4/${type}/${encodeURIComponent(id)}`;
  const response = await upstream.fetch(url, {
    headers: {
      ...upstream.headers,
      Accept: FHIR_JSON,
      'X-Medplum': 'extended',
      Authorization: `Bearer ${upstream.accessToken}`,
    },
  });
  if (!response.ok) {
    const outcome = (await response.json().catch(() => undefined)) as unknown;
    throw isOperationOutcome(outcome) ? new OperationOutcomeError(outcome) : new UpstreamFailure('error');
  }
  // Whole bytes, not a stream: the server then writes headers and body in one go.
  return new Response(await bodyBytes(response), { status: 200, headers: { 'Content-Type': FHIR_JSON } });
}
