import type { BotEvent, MedplumClient } from '@medplum/core';
import { inactivateConsents, patientAgreements, publishedAgreements } from './lib/agreements';
import { requestingPatientId } from './lib/requester';
import { type BotResult, fail } from './lib/result';

export interface WithdrawInput {
  agreementUrl: string;
  /** Optional: withdraw only this version's acceptance; default every active acceptance of the url. */
  agreementVersion?: string;
  acknowledgeConsequence?: boolean;
}

export type WithdrawResult = BotResult<{
  withdrawn: { agreementUrl: string; agreementVersion: string; consent: string }[];
}>;

/**
 * POST /v1/agreements/withdrawals: the Consent becomes `inactive`; the record (and its proof) stays.
 * Withdrawing an agreement the patient is required to hold needs `acknowledgeConsequence: true`.
 */
export async function handler(medplum: MedplumClient, event: BotEvent<WithdrawInput>): Promise<WithdrawResult> {
  const patientId = requestingPatientId(event);
  if (!patientId) {
    return fail(403, 'forbidden', 'Only a patient can withdraw agreements');
  }
  const { agreementUrl, agreementVersion, acknowledgeConsequence } = event.input ?? ({} as WithdrawInput);
  const state = await patientAgreements(medplum, patientId);
  const matching = state.activeConsents.filter((c) =>
    (c.policy ?? []).some(
      (p) =>
        p.uri === `${agreementUrl}|${agreementVersion}` || (!agreementVersion && p.uri?.startsWith(`${agreementUrl}|`)),
    ),
  );
  if (matching.length === 0) {
    return fail(404, 'not_found', 'There is no active acceptance of this agreement to withdraw');
  }
  const published = await publishedAgreements(medplum);
  const agreement = published.map((p) => p.agreement).find((a) => a.url === agreementUrl);
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
  await inactivateConsents(medplum, matching);
  return {
    ok: true,
    withdrawn: matching.map((c) => {
      const uri = c.policy?.[0]?.uri ?? '';
      const at = uri.lastIndexOf('|');
      return { agreementUrl: uri.slice(0, at), agreementVersion: uri.slice(at + 1), consent: `Consent/${c.id}` };
    }),
  };
}
