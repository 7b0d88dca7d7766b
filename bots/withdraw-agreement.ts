import type { BotEvent, MedplumClient } from '@medplum/core';
import { activeAcceptances, contextNotFound, inactivateConsents, patientAgreements } from './lib/agreements';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type WithdrawResult = BotResult<{
  withdrawn: { agreementUrl: string; agreementVersion: string; consent: string }[];
}>;

/**
 * POST /v1/agreements/withdrawals: the Consent becomes `inactive`; the record (and its proof) stays.
 * Withdrawing an agreement the patient is required to hold needs `acknowledgeConsequence: true`.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<WithdrawResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'withdraw-agreement');
  if (!start.ok) {
    return start;
  }
  const { agreementUrl, agreementVersion, acknowledgeConsequence } = start.input;
  const state = await patientAgreements(medplum, start.caller.patientId);
  if (!state) {
    return contextNotFound();
  }
  const matching = state.activeConsents.filter((c) =>
    (c.policy ?? []).some(
      (p) =>
        p.uri === `${agreementUrl}|${agreementVersion}` || (!agreementVersion && p.uri?.startsWith(`${agreementUrl}|`)),
    ),
  );
  if (matching.length === 0) {
    return fail(404, 'not_found', 'There is no active acceptance of this agreement to withdraw');
  }
  const agreement = state.applicable.find((a) => a.url === agreementUrl);
  const required = state.required.some((a) => a.url === agreementUrl) || Boolean(agreement?.required);
  if (required && acknowledgeConsequence !== true) {
    return fail(
      422,
      'acknowledgement_required',
      'This agreement is required; confirm that you understand what stops working',
      {
        consequence:
          agreement?.withdrawalConsequence ?? 'Services that require this agreement stop until it is accepted again.',
      },
    );
  }
  try {
    await inactivateConsents(medplum, matching);
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // Changed concurrently (each PUT is under If-Match): the same answer if they are withdrawn now.
    const stillActive = new Set((await activeAcceptances(medplum, start.caller.patientId)).map((c) => c.id));
    if (matching.some((c) => stillActive.has(c.id))) {
      return fail(409, 'invalid_state', 'This acceptance changed while it was being withdrawn; try again', {
        state: 'conflict',
      });
    }
  }
  return {
    ok: true,
    withdrawn: matching.map((c) => {
      const uri = c.policy?.[0]?.uri ?? '';
      const at = uri.lastIndexOf('|');
      return { agreementUrl: uri.slice(0, at), agreementVersion: uri.slice(at + 1), consent: `Consent/${c.id}` };
    }),
  };
}
