import type { BotEvent, MedplumClient } from '@medplum/core';
import type { AgreementRequirement } from './lib/agreement-rules';
import { contextNotFound, patientAgreements } from './lib/agreements';
import type { BotResult } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type RequirementsResult = BotResult<{ satisfied: boolean; unmet: AgreementRequirement[] }>;

/** GET /v1/agreements/requirements: what the patient must still accept to enter the given context. */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<RequirementsResult> {
  const start = await patientWorkflow(medplum, event, 'agreement-requirements');
  if (!start.ok) {
    return start;
  }
  const state = await patientAgreements(medplum, start.caller.patientId, start.input.context);
  if (!state) {
    return contextNotFound();
  }
  return { ok: true, satisfied: state.unmet.length === 0, unmet: state.unmet };
}
