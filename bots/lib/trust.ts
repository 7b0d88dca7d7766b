import { Buffer } from 'node:buffer';
import { createHmac, createPublicKey, type JsonWebKey, timingSafeEqual, verify } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Extension, Organization } from '@medplum/fhirtypes';
import type { BotInput, BotName, EdgeStatement } from '../../contracts/bot-inputs';
import { EDGE_STATEMENT, EXTENSIONS, SIGNING_KEYS, SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import { readInput } from './input';
import { fail } from './result';

/**
 * What a bot may believe about who called it (DESIGN section 7): `event.requester`, set by Medplum,
 * and the caller's own access token, which Medplum passes in `event.headers.authorization` and which
 * the bot verifies itself against Medplum's key set. Nothing about the caller is ever taken from
 * `event.input`. Node built-ins come from the runtime's `require` (Medplum's vmcontext has no
 * `crypto` or `Buffer` global).
 */
export interface VerifiedCaller {
  /** `Patient/<id>`, `Practitioner/<id>`...: the requester, confirmed by the token's `profile`. */
  profile: string;
  /** The session (the token's `login_id`): the proof of an acceptance names it. */
  loginId: string;
  /** The app the session was issued to (`client_id`), when the token names one. */
  clientId?: string;
}

export interface VerifiedPatient extends VerifiedCaller {
  patientId: string;
}

interface AccessClaims {
  exp?: unknown;
  profile?: unknown;
  login_id?: unknown;
  client_id?: unknown;
}

/** Algorithms Medplum signs access tokens with (older servers RS256, newer ES384); never none or HMAC. */
const ALGORITHMS: Record<string, { hash: string; ec: boolean }> = {
  RS256: { hash: 'sha256', ec: false },
  ES256: { hash: 'sha256', ec: true },
  ES384: { hash: 'sha384', ec: true },
};

const PATIENT = /^Patient\/([A-Za-z0-9\-.]{1,64})$/;

/**
 * The caller of a `$execute`, when the requester and a valid access token for that same profile agree;
 * otherwise undefined (a subscription delivery, a missing or forged token, a mismatch).
 */
export async function verifiedCaller(medplum: MedplumClient, event: BotEvent): Promise<VerifiedCaller | undefined> {
  const requester = event.requester?.reference;
  const token = bearerToken(event.headers);
  if (!requester || !token) {
    return undefined;
  }
  const claims = await verifyAccessToken(medplum, token, event.secrets?.[SIGNING_KEYS.secretName]?.valueString);
  if (!claims || claims.profile !== requester || typeof claims.login_id !== 'string' || !claims.login_id) {
    return undefined;
  }
  return {
    profile: requester,
    loginId: claims.login_id,
    clientId: typeof claims.client_id === 'string' ? claims.client_id : undefined,
  };
}

/** The patient calling a patient-facing bot, or the 403 every such bot answers anyone else. */
export async function requirePatient(
  medplum: MedplumClient,
  event: BotEvent,
): Promise<{ ok: true; caller: VerifiedPatient } | ReturnType<typeof fail>> {
  const caller = await verifiedCaller(medplum, event);
  const patientId = caller ? PATIENT.exec(caller.profile)?.[1] : undefined;
  if (!caller || !patientId) {
    return fail(403, 'forbidden', 'Only a signed-in patient can run this workflow');
  }
  return { ok: true, caller: { ...caller, patientId } };
}

function bearerToken(headers: BotEvent['headers']): string | undefined {
  const value = Object.entries(headers ?? {}).find(([name]) => name.toLowerCase() === 'authorization')?.[1];
  const header = Array.isArray(value) ? value[0] : value;
  return typeof header === 'string' ? /^Bearer ([A-Za-z0-9\-_.]{1,8192})$/i.exec(header)?.[1] : undefined;
}

/**
 * Signature and expiry; `exp` must be present. The key is Medplum's, from the copy of its key set that
 * provisioning keeps in a Project secret (no fetch: a vmcontext run keeps nothing between runs), or, when
 * the copy does not hold the token's key (Medplum rotated its keys since), from Medplum's key set fetched
 * then. A key Medplum no longer trusts but the copy still holds admits nothing: Medplum authenticated this
 * same Authorization header before it ran the bot, so the check here only ever adds to Medplum's own.
 */
async function verifyAccessToken(
  medplum: MedplumClient,
  token: string,
  heldKeys: string | undefined,
): Promise<AccessClaims | undefined> {
  const [headerPart, payloadPart, signaturePart] = token.split('.');
  if (!headerPart || !payloadPart || !signaturePart) {
    return undefined;
  }
  const header = decodeJson(headerPart) as { alg?: unknown; kid?: unknown } | undefined;
  const algorithm = typeof header?.alg === 'string' ? ALGORITHMS[header.alg] : undefined;
  if (!header || !algorithm) {
    return undefined;
  }
  const keyOf = (keys: JsonWebKey[] | undefined) =>
    keys?.find((k) => k.kid === header.kid && (k.alg === undefined || k.alg === header.alg));
  const jwk =
    keyOf(keySet(heldKeys)) ??
    keyOf(((await medplum.get('.well-known/jwks.json', { cache: 'no-cache' })) as { keys?: JsonWebKey[] }).keys);
  if (!jwk) {
    return undefined;
  }
  let signed = false;
  try {
    const key = createPublicKey({ key: jwk, format: 'jwk' });
    signed = verify(
      algorithm.hash,
      Buffer.from(`${headerPart}.${payloadPart}`),
      algorithm.ec ? { key, dsaEncoding: 'ieee-p1363' } : key,
      Buffer.from(signaturePart, 'base64url'),
    );
  } catch {
    // A key of another type than the header claims, or a malformed key: not verified.
  }
  const claims = decodeJson(payloadPart) as AccessClaims | undefined;
  if (!signed || !claims) {
    return undefined;
  }
  // The key set is this Medplum's own, so a valid signature already says who issued the token; `iss`
  // is not compared with the base URL, which a Medplum may configure apart from its issuer.
  const expired = typeof claims.exp !== 'number' || claims.exp * 1000 <= Date.now();
  return expired ? undefined : claims;
}

/** The keys of a key set's JSON text; none when there is no text or it is not a key set. */
function keySet(text: string | undefined): JsonWebKey[] | undefined {
  try {
    const keys = text ? (JSON.parse(text) as { keys?: unknown }).keys : undefined;
    return Array.isArray(keys) ? (keys as JsonWebKey[]) : undefined;
  } catch {
    return undefined;
  }
}

function decodeJson(part: string): unknown {
  try {
    const value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the gateway alone saw of this call (client address, user agent), when it vouches for it: a
 * statement signed with the Project secret `edge-statement-key`, bound to this patient's session and
 * at most a minute old. Anything else (no statement, no key, a forged or stale one) yields nothing.
 */
export function edgeFacts(
  event: BotEvent,
  caller: VerifiedCaller,
  statement: string | undefined,
): { ipAddress?: string; userAgent?: string } {
  const key = event.secrets?.[EDGE_STATEMENT.secretName]?.valueString;
  const [payloadPart, signaturePart] = (statement ?? '').split('.');
  if (!key || !payloadPart || !signaturePart) {
    return {};
  }
  const expected = createHmac('sha256', key).update(payloadPart).digest();
  const given = Buffer.from(signaturePart, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return {};
  }
  const claims = decodeJson(payloadPart) as Partial<EdgeStatement> | undefined;
  const now = Date.now() / 1000;
  if (
    !claims ||
    claims.sub !== caller.profile ||
    claims.lid !== caller.loginId ||
    typeof claims.exp !== 'number' ||
    typeof claims.iat !== 'number' ||
    claims.exp < now ||
    claims.iat > now + 5 ||
    claims.exp - claims.iat > EDGE_STATEMENT.maxAgeSeconds
  ) {
    return {};
  }
  return {
    ipAddress: typeof claims.ip === 'string' ? claims.ip.slice(0, 64) : undefined,
    userAgent: typeof claims.ua === 'string' ? claims.ua.slice(0, 512) : undefined,
  };
}

/**
 * The prologue of every patient-facing workflow bot: the verified patient, then the input checked
 * against the bot's contract; or the failure to answer (403 for anyone but a patient, 400 for bad input).
 */
export async function patientWorkflow<N extends BotName>(
  medplum: MedplumClient,
  event: BotEvent,
  name: N,
): Promise<{ ok: true; caller: VerifiedPatient; input: BotInput<N> } | ReturnType<typeof fail>> {
  const patient = await requirePatient(medplum, event);
  if (!patient.ok) {
    return patient;
  }
  const input = readInput(name, event.input);
  return input.ok ? { ok: true, caller: patient.caller, input: input.value } : input;
}

/** The session a consent came from: its login from the verified token, the rest only as the gateway vouches. */
export interface SessionProof {
  loginId: string;
  ipAddress?: string;
  userAgent?: string;
}

/**
 * The clickwrap proof of a consent (an agreement's acceptance, a treatment offer's): who accepted (the
 * patient), when (server time) and from what session (login, address, agent).
 */
export function clickwrapProof(patientId: string, when: string, session: SessionProof): Extension {
  const parts: Extension[] = [
    { url: 'who', valueReference: { reference: `Patient/${patientId}` } },
    { url: 'when', valueDateTime: when },
    { url: 'login', valueString: session.loginId },
  ];
  if (session.ipAddress) {
    parts.push({ url: 'ipAddress', valueString: session.ipAddress });
  }
  if (session.userAgent) {
    parts.push({ url: 'userAgent', valueString: session.userAgent });
  }
  return { url: EXTENSIONS.clickwrapProof, extension: parts };
}

/** A tenant's backend calling a bot: its client, and its tenant's Organization. */
export interface TenantBackendCaller {
  /** `ClientApplication/<id>`: the requester. */
  client: string;
  tenant: Organization & { id: string };
}

const CLIENT_APPLICATION = /^ClientApplication\/([A-Za-z0-9\-.]{1,64})$/;

/**
 * The tenant backend calling a backend-facing bot (issue 51 item 4), or the 403 every such bot answers
 * anyone else. Believed: `event.requester` alone (Medplum sets it to the ClientApplication that signed in
 * with client credentials), re-read as a ClientApplication that provisioning tagged as a tenant's backend
 * (`SYSTEMS.tenantBackend|<tenant>/<backend>`, src/provision/tenants.ts `tenantBackends`: only a project
 * admin writes ClientApplications), and that tenant's Organization as provisioning identified it. The
 * same run of provisioning gives the client's membership the same tenant as its `organization` parameter,
 * which bounds what the backend reads itself; nothing of the input names the tenant.
 */
export async function requireTenantBackend(
  medplum: MedplumClient,
  event: BotEvent,
): Promise<{ ok: true; caller: TenantBackendCaller } | ReturnType<typeof fail>> {
  const refused = fail(403, 'forbidden', "Only a tenant's backend can run this operation");
  const requester = event.requester?.reference ?? '';
  const id = CLIENT_APPLICATION.exec(requester)?.[1];
  const client = id ? await medplum.readResource('ClientApplication', id).catch(absent) : undefined;
  const code = client?.meta?.tag?.find((t) => t.system === SYSTEMS.tenantBackend)?.code;
  const tenantKey = code && /^[^/]+\/[^/]+$/.test(code) ? code.split('/')[0] : undefined;
  if (!tenantKey) {
    return refused;
  }
  const tenant = (await medplum.searchOne('Organization', {
    identifier: `${SYSTEMS.tenant}|${tenantKey}`,
  })) as (Organization & { id: string }) | undefined;
  return tenant?.id ? { ok: true, caller: { client: requester, tenant } } : refused;
}
