import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Bundle, Consent } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { type AgreementVersion, coordinate, latestVersions } from './lib/agreement-rules';
import { acceptanceKey, activeAcceptances, contextNotFound, patientAgreements } from './lib/agreements';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { clickwrapProof, edgeFacts, patientWorkflow, type SessionProof } from './lib/trust';

export interface Acceptance {
  agreementUrl: string;
  agreementVersion: string;
  consent: string;
  acceptedAt: string;
}

export type AcceptResult = BotResult<{ acceptances: Acceptance[] }>;

/**
 * POST /v1/agreements/acceptances: one active Consent per agreement, with server-stamped clickwrap
 * proof, all in ONE transaction. Idempotent: each Consent is a conditional create on its acceptance
 * key, so a retry (or 20 at once) finds the existing acceptance instead of adding another.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<AcceptResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'accept-agreements');
  if (!start.ok) {
    return start;
  }
  const { caller, input } = start;
  const { patientId } = caller;
  const coordinates = [...new Set(input.agreements)];
  const state = await patientAgreements(medplum, patientId);
  if (!state) {
    return contextNotFound();
  }
  // Only the current version of an agreement that applies to this patient can be accepted.
  const current = new Map(latestVersions(state.applicable).map((a) => [coordinate(a), a]));
  const unknown = coordinates.filter((c) => !current.has(c));
  if (unknown.length > 0) {
    return fail(400, 'invalid_request', 'These agreements do not exist, are not current, or do not apply to you', {
      issues: unknown.map((c) => ({ path: 'agreements', message: c })),
    });
  }
  const now = new Date().toISOString();
  const session: SessionProof = { loginId: caller.loginId, ...edgeFacts(event, caller, input.edge) };
  const phone =
    state.patient.telecom?.find((t) => t.system === 'phone' && t.use === 'mobile') ??
    state.patient.telecom?.find((t) => t.system === 'phone');
  const entries = coordinates.map((c) => {
    const agreement = current.get(c) as AgreementVersion;
    const key = acceptanceKey(patientId, agreement);
    const consent: Consent = {
      resourceType: 'Consent',
      status: 'active',
      scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'patient-privacy' }] },
      category: [{ coding: [{ system: SYSTEMS.agreementCategory, code: agreement.category }] }],
      patient: { reference: `Patient/${patientId}` },
      dateTime: now,
      identifier: [{ system: SYSTEMS.agreementAcceptance, value: key }],
      policy: [{ uri: c }],
      extension: [
        clickwrapProof(patientId, now, session),
        ...((agreement.category === 'sms' || agreement.category === 'voice') && phone?.value
          ? [{ url: EXTENSIONS.consentChannel, valueContactPoint: { system: 'phone' as const, value: phone.value } }]
          : []),
      ],
    };
    return {
      resource: consent,
      request: {
        method: 'POST' as const,
        url: 'Consent',
        ifNoneExist: `identifier=${encodeURIComponent(`${SYSTEMS.agreementAcceptance}|${key}`)}&status=active`,
      },
    };
  });
  const bundle: Bundle = { resourceType: 'Bundle', type: 'transaction', entry: entries };
  let consents: Consent[];
  try {
    const response = await medplum.executeBatch(bundle);
    consents = (response.entry ?? []).map((entry) => entry.resource as Consent);
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // A concurrent identical call won: its acceptances are the answer, if they are all there now.
    const replay = await existingAcceptances(
      medplum,
      patientId,
      coordinates.map((c) => current.get(c) as AgreementVersion),
    );
    if (!replay) {
      return fail(409, 'invalid_state', 'These agreements changed while they were being accepted; try again', {
        state: 'conflict',
      });
    }
    consents = replay;
  }
  const acceptances = consents.map((consent, i) => {
    const [url, version] = splitCoordinate(coordinates[i]);
    return {
      agreementUrl: url,
      agreementVersion: version,
      consent: `Consent/${consent.id}`,
      acceptedAt: consent.dateTime as string,
    };
  });
  return { ok: true, acceptances };
}

/** The active acceptance of each agreement, in order; undefined unless every one exists. */
async function existingAcceptances(
  medplum: MedplumClient,
  patientId: string,
  agreements: AgreementVersion[],
): Promise<Consent[] | undefined> {
  const active = await activeAcceptances(medplum, patientId);
  const byKey = new Map(
    active.flatMap((c) =>
      (c.identifier ?? []).filter((i) => i.system === SYSTEMS.agreementAcceptance).map((i) => [i.value, c] as const),
    ),
  );
  const found = agreements.map((a) => byKey.get(acceptanceKey(patientId, a)));
  return found.every((c) => c !== undefined) ? (found as Consent[]) : undefined;
}

function splitCoordinate(value: string): [string, string] {
  const at = value.lastIndexOf('|');
  return [value.slice(0, at), value.slice(at + 1)];
}
