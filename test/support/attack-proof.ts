// Clickwrap proof: what a Consent's proof must say, and the acceptances an attack starts from.
import type { Consent, DocumentReference } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Actor } from './attack';
import type { StoreChange } from './attack-store';
import type { TestBackend } from './backend';

export interface ClickwrapProof {
  who?: string;
  login?: string;
  ipAddress?: string;
  userAgent?: string;
}

export function clickwrapProof(consent: Consent): ClickwrapProof | undefined {
  const proof = consent.extension?.find((e) => e.url === EXTENSIONS.clickwrapProof);
  if (!proof) {
    return undefined;
  }
  const part = (url: string) => proof.extension?.find((e) => e.url === url);
  return {
    who: part('who')?.valueReference?.reference,
    login: part('login')?.valueString,
    ipAddress: part('ipAddress')?.valueString,
    userAgent: part('userAgent')?.valueString,
  };
}

/** Every string anywhere in a value (what the caller sent, so what no proof may repeat). */
export function stringsIn(value: unknown, found = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    found.add(value);
  } else if (Array.isArray(value)) {
    for (const item of value) {
      stringsIn(item, found);
    }
  } else if (value && typeof value === 'object') {
    for (const item of Object.values(value)) {
      stringsIn(item, found);
    }
  }
  return found;
}

/**
 * What is wrong with the proof of the Consents a call created (or whose proof it changed): the login
 * must be the caller's verified session, and no address or agent may come from the caller's input.
 */
export function proofViolations(changes: StoreChange[], caller: Actor, input: unknown): string[] {
  const sent = stringsIn(input);
  const problems: string[] = [];
  for (const change of changes) {
    if (change.type !== 'Consent' || !change.after) {
      continue;
    }
    const proof = clickwrapProof(change.after as Consent);
    const previous = change.before ? clickwrapProof(change.before as Consent) : undefined;
    if (!proof || JSON.stringify(proof) === JSON.stringify(previous)) {
      continue;
    }
    const label = `Consent/${change.id}`;
    if (proof.login !== caller.loginId) {
      problems.push(`${label}: proof login ${String(proof.login).slice(0, 60)} is not the caller's ${caller.loginId}`);
    }
    for (const field of ['ipAddress', 'userAgent'] as const) {
      const value = proof[field];
      if (value !== undefined && (sent.has(value) || [...sent].some((s) => s.length > 8 && value.includes(s)))) {
        problems.push(`${label}: proof ${field} (${value.length} chars) was taken from the input`);
      }
    }
  }
  return problems;
}

/** Inactivates the patient's active acceptances, so the next accept writes new Consents (and proofs). */
export async function resetAcceptances(backend: TestBackend, patientId: string): Promise<void> {
  const consents = await backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [
      { code: 'patient', operator: 'eq', value: `Patient/${patientId}` },
      { code: 'status', operator: 'eq', value: 'active' },
    ],
  });
  for (const consent of consents) {
    await backend.systemRepo.updateResource<Consent>({ ...consent, status: 'inactive' });
  }
}

/**
 * The current versions of published agreements that apply to every patient (platform-wide, no
 * jurisdiction): what any patient may legitimately accept.
 */
export async function universalAgreements(backend: TestBackend): Promise<string[]> {
  const docs = await backend.systemRepo.searchResources<DocumentReference>({
    resourceType: 'DocumentReference',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.agreement}|` }],
    count: 1000,
  });
  const latest = new Map<string, { coordinate: string; date: string }>();
  for (const doc of docs) {
    const coordinate = doc.masterIdentifier?.value;
    const url = coordinate?.slice(0, coordinate.lastIndexOf('|'));
    const regional = doc.extension?.some((e) => e.url === EXTENSIONS.agreementJurisdiction);
    if (!coordinate || !url || regional || doc.meta?.accounts?.length) {
      continue;
    }
    const date = doc.date ?? '';
    if (!latest.has(url) || (latest.get(url)?.date ?? '') < date) {
      latest.set(url, { coordinate, date });
    }
  }
  return [...latest.values()].map((l) => l.coordinate).sort();
}
