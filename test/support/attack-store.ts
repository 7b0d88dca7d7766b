// The attacker suite's view of the store: what a call changed, whose it was, and what is stored now.
import type { Resource } from '@medplum/fhirtypes';
import type { Actor } from './attack';
import type { TestBackend } from './backend';

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

export const compartmentOf = (resource: Resource | undefined): string[] =>
  (resource?.meta?.compartment ?? []).map((c) => c.reference ?? '');

/**
 * The patients whose record a resource is in: its patient compartments, and for a Binary (in no
 * compartment) the patient its security context names, who decides who may read it (Medplum's
 * packages/server/src/fhir/binary-utils.ts).
 */
export const patientsOf = (resource: Resource | undefined): string[] => {
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
