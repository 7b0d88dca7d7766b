import type { MedplumClient } from '@medplum/core';
import { isOperationOutcome, OperationOutcomeError } from '@medplum/core';
import { FHIR_JSON } from '../../contracts/common';
import { bodyBytes } from '../shared/buffered-body';
import { UpstreamFailure } from './upstream';

/**
 * Reads one resource through the patient's MedplumClient and hands Medplum's bytes on unchanged:
 * a read needs no rewriting, and parsing and re-serializing every resource was a large part of the
 * gateway's own work per call. Failures are Medplum's OperationOutcome, thrown for the error mapper.
 */
export async function readThrough(medplum: MedplumClient, type: string, id: string): Promise<Response> {
  const response = await medplum.downloadResponse(medplum.fhirUrl(type, id), { headers: { Accept: FHIR_JSON } });
  if (!response.ok) {
    const outcome = (await response.json().catch(() => undefined)) as unknown;
    throw isOperationOutcome(outcome) ? new OperationOutcomeError(outcome) : new UpstreamFailure('error');
  }
  // Whole bytes, not a stream: the server then writes headers and body in one go.
  return new Response(await bodyBytes(response), { status: 200, headers: { 'Content-Type': FHIR_JSON } });
}
