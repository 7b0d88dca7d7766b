import type { BotEvent, MedplumClient } from '@medplum/core';
import type { AgreementRequirement } from './lib/agreement-rules';
import { contextNotFound, patientAgreements } from './lib/agreements';
import { readInput } from './lib/input';
import type { BotResult } from './lib/result';
import { requirePatient } from './lib/trust';

export type RequirementsResult = BotResult<{ satisfied: boolean; unmet: AgreementRequirement[] }>;

/** GET /v1/agreements/requirements: what the patient must still accept to enter the given context. */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<RequirementsResult> {
  const patient = await requirePatient(medplum, event);
  if (!patient.ok) {
    return patient;
  }
  const input = readInput('agreement-requirements', event.input);
  if (!input.ok) {
    return input;
  }
  const state = await patientAgreements(medplum, patient.caller.patientId, input.value.context);
  if (!state) {
    return contextNotFound();
  }
  return { ok: true, satisfied: state.unmet.length === 0, unmet: state.unmet };
}
