import type { BotEvent, MedplumClient } from '@medplum/core';
import type { AgreementRequirement } from './lib/agreement-rules';
import { type AgreementContext, patientAgreements } from './lib/agreements';
import { requestingPatientId } from './lib/requester';
import { type BotResult, fail } from './lib/result';

export type RequirementsResult = BotResult<{ satisfied: boolean; unmet: AgreementRequirement[] }>;

/** GET /v1/agreements/requirements: what the patient must still accept to enter the given context. */
export async function handler(
  medplum: MedplumClient,
  event: BotEvent<{ context?: AgreementContext }>,
): Promise<RequirementsResult> {
  const patientId = requestingPatientId(event);
  if (!patientId) {
    return fail(403, 'forbidden', 'Only a patient has agreements');
  }
  const { unmet } = await patientAgreements(medplum, patientId, event.input?.context ?? {});
  return { ok: true, satisfied: unmet.length === 0, unmet };
}
