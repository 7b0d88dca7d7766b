import { parseJWTPayload } from '@medplum/core';
import { SYSTEMS } from '../../contracts/systems';
import type { ProvisionDefinition } from '../../src/provision/definition';
import { DEMO_PATIENTS } from '../../src/provision/demo';
import type { TestBackend } from './backend';

/**
 * The attacker suite's toolkit (DESIGN section 7): who attacks whom, calls made directly on Medplum
 * with the attacker's own token (the gateway is not the boundary), and what the provisioning definition
 * names. Beside it: what a call changed in the store (attack-store.ts), clickwrap proof
 * (attack-proof.ts), resources built from the FHIR schema so that every type a policy names can be
 * attacked without a hand-kept fixture per type (attack-resources.ts), the victim and the scene
 * (attack-victim.ts), what a response exposes (attack-exposure.ts), hostile bot input
 * (attack-hostile.ts) and self-registration (attack-registration.ts).
 */

// ------------------------------------------------------------------ actors

export type AttackerRole =
  | 'patient of the same tenant'
  | 'patient of the other tenant'
  | 'clinician of the other tenant';

/** Every attacker of the matrix, relative to the victim. */
export const ATTACKER_ROLES: AttackerRole[] = [
  'patient of the same tenant',
  'patient of the other tenant',
  'clinician of the other tenant',
];

export interface Actor {
  label: string;
  kind: 'patient' | 'clinician';
  tenant: string;
  /** `Organization/<id>` of the tenant. */
  organization: string;
  token: string;
  /** The token's `login_id`: what a clickwrap proof must name. */
  loginId: string;
  /** `Patient/<id>` or `Practitioner/<id>`. */
  profile: string;
  /** Set for patients. */
  patientId?: string;
  phone?: string;
  family?: string;
}

function tenantOrganization(backend: TestBackend, tenant: string): string {
  const patient = Object.values(backend.patients).find((p) => p.tenant === tenant);
  return patient?.patient.managingOrganization?.reference as string;
}

export function patientActor(backend: TestBackend, key: string): Actor {
  const actor = backend.patients[key];
  return {
    label: `${key} (patient of ${actor.tenant})`,
    kind: 'patient',
    tenant: actor.tenant,
    organization: actor.patient.managingOrganization?.reference as string,
    token: actor.token,
    loginId: loginIdOf(actor.token),
    profile: `Patient/${actor.patient.id}`,
    patientId: actor.patient.id,
    phone: actor.patient.telecom?.find((t) => t.system === 'phone')?.value,
    family: actor.patient.name?.[0]?.family,
  };
}

export function clinicianActor(backend: TestBackend, tenant: string): Actor {
  const clinician = backend.clinicians[tenant];
  return {
    label: `clinician of ${tenant}`,
    kind: 'clinician',
    tenant,
    organization: tenantOrganization(backend, tenant),
    token: clinician.token,
    loginId: loginIdOf(clinician.token),
    profile: `Practitioner/${clinician.practitioner.id}`,
  };
}

/** The attacker in `role` against the demo patient `victimKey`, taken from the demo definition. */
export function attackerFor(backend: TestBackend, victimKey: string, role: AttackerRole): Actor {
  const victim = DEMO_PATIENTS.find((p) => p.key === victimKey);
  const sameTenant = DEMO_PATIENTS.find((p) => p.tenant === victim?.tenant && p.key !== victimKey);
  const otherTenant = DEMO_PATIENTS.find((p) => p.tenant !== victim?.tenant);
  if (!victim || !sameTenant || !otherTenant) {
    throw new Error(`the demo definition has no attackers for ${victimKey}`);
  }
  switch (role) {
    case 'patient of the same tenant':
      return patientActor(backend, sameTenant.key);
    case 'patient of the other tenant':
      return patientActor(backend, otherTenant.key);
    case 'clinician of the other tenant':
      return clinicianActor(backend, otherTenant.tenant);
  }
}

const loginIdOf = (token: string): string => (parseJWTPayload(token) as { login_id: string }).login_id;

// ------------------------------------------------------------------ direct calls on Medplum

export interface DirectResponse {
  status: number;
  body: unknown;
  text: string;
}

/**
 * A call on the embedded Medplum's HTTP API with the caller's own token, around the gateway, in extended
 * mode (`X-Medplum: extended`) as MedplumClient and so Medplum's apps make every call: the caller sees and
 * sends back the server's meta, accounts included. `headers: { 'x-medplum': '' }` makes a plain client's.
 */
export async function direct(
  backend: TestBackend,
  token: string,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<DirectResponse> {
  const headers = new Headers({ 'x-medplum': 'extended', ...options.headers });
  headers.set('authorization', `Bearer ${token}`);
  const body = options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (body !== undefined && !headers.has('content-type')) {
    headers.set('content-type', 'application/fhir+json');
  }
  const response = await backend.fetch(new URL(path, backend.baseUrl), { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: kept as text
  }
  return { status: response.status, body: parsed, text };
}

export const fhirPath = (path: string): string => `fhir/R4/${path}`;

const botIdentifier = (key: string): string => `${SYSTEMS.bots}|${key}`;

/** `Bot/$execute?identifier=`: what `medplum.executeBot` does, with any input, as JSON. */
export function executeBot(
  backend: TestBackend,
  token: string,
  key: string,
  input: BotInput,
  headers: Record<string, string> = {},
): Promise<DirectResponse> {
  const path = fhirPath(`Bot/$execute?identifier=${encodeURIComponent(botIdentifier(key))}`);
  const body = 'raw' in input ? { rawBody: input.raw } : { body: input.value };
  return direct(backend, token, 'POST', path, { ...body, headers: { 'content-type': 'application/json', ...headers } });
}

export type BotInput = { value: unknown } | { raw: string };

// ------------------------------------------------------------------ what the provisioning definition names

/** Types written or read only by the platform: attacked, never seeded with made-up instances (but Binary, a patient's upload). */
export const PLATFORM_TYPES = [
  'Bot',
  'AccessPolicy',
  'ProjectMembership',
  'ClientApplication',
  'Organization',
  'Subscription',
  'Binary',
];

/** Every resource type any access policy of the definition mentions, plus the platform's own types. */
export function policyTypes(definition: ProvisionDefinition): string[] {
  const named = definition.accessPolicies.flatMap((p) => (p.policy.resource ?? []).map((r) => r.resourceType));
  return [...new Set([...named, ...PLATFORM_TYPES])].filter((t) => t !== '*').sort();
}

/**
 * Types the policies publish to patients by tag (catalog entries): for these, an item without the tag
 * is unpublished, and must not reach patients through any other entry.
 */
export function publishedByTag(definition: ProvisionDefinition): string[] {
  const entries = definition.accessPolicies.flatMap((p) => p.policy.resource ?? []);
  return [...new Set(entries.filter((r) => r.criteria?.includes('_tag=')).map((r) => r.resourceType))].sort();
}

/** Bots woken by subscriptions (or a schedule): nobody may `$execute` them, a patient least of all. */
export function isSubscriptionBot(definition: ProvisionDefinition, key: string): boolean {
  const bot = definition.bots.find((b) => b.key === key) as { cronString?: string; cron?: string } | undefined;
  return definition.subscriptions.some((s) => s.bot === key) || Boolean(bot?.cronString ?? bot?.cron);
}
