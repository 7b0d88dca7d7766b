import type { BotEvent, MedplumClient } from '@medplum/core';
import type { AuditEvent, AuditEventAgent, Bot, ClientApplication, Practitioner } from '@medplum/fhirtypes';
import type { AccessLog } from '../contracts/access-log';
import { ACCESS_LOG_READS_PER_MINUTE, ACCESS_LOG_RECORD_TYPES, ACCESS_LOG_SCOPE } from '../contracts/access-log-rules';
import { absent } from './lib/absent';
import { overBudget } from './lib/budget';
import { ahead } from './lib/reads';
import type { BotResult } from './lib/result';
import { patientWorkflow } from './lib/trust';

export type AccessLogResult = BotResult<AccessLog>;

/**
 * GET /v1/patient/access-log: who opened or changed her records, from Medplum's own AuditEvents
 * (contracts/access-log.ts). Patients cannot read AuditEvents on Medplum (every entry names someone's
 * address, and another patient's), so this bot reads them with its own access, for the caller her token
 * names, never for anyone the input names.
 *
 * Her entries are those about her Patient and those about a record of hers, one search per type of record
 * (`entity:Observation.patient=Patient/<her>`...: Medplum files an AuditEvent under the record it is
 * about, not under its patient). An entry counts only when Medplum stamped it as written by the agent it
 * names (`meta.author`, which nobody but Medplum sets): one a member wrote about someone else is left out.
 * Another patient's own entries are left out too (only hers are "you").
 */
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<AccessLogResult> {
  const start = await patientWorkflow(medplum, event, 'access-log');
  if (!start.ok) {
    return start;
  }
  const patient = `Patient/${start.caller.patientId}`;
  // Her own budget (ACCESS_LOG_READS_PER_MINUTE): at it she is told when to come back, and nothing more is read.
  const spent = await overBudget(
    medplum,
    patient,
    event.bot?.reference,
    ACCESS_LOG_READS_PER_MINUTE,
    `At most ${ACCESS_LOG_READS_PER_MINUTE} reads of your access log a minute`,
  );
  if (spent) {
    return spent;
  }
  // Her tenant: a clinician's entries count only when the clinician is of it (an entry another tenant's
  // clinician writes about a record of hers, in her own name, is filed in that tenant, not in her log).
  const tenants = ahead(
    medplum
      .readResource('Patient', start.caller.patientId)
      .then((p) => (p.meta?.accounts ?? []).map((a) => a.reference as string)),
  );
  const { before, limit } = start.input;
  const perSearch = Math.min(100, limit * 4);
  const entries: AccessLog['entries'] = [];
  let next = before;
  /** The oldest instant on this page: a group's own oldest member's, not its first's. */
  let oldest: string | undefined;
  // A window whose entries are all left out (written by someone in her own name about a record of hers,
  // dated otherwise than stored) would answer an empty page: the next window is read, up to ROUNDS.
  for (let round = 0; round < ROUNDS && (round === 0 || next !== undefined) && entries.length < limit; round++) {
    // The first window as large as the page needs; a further one (the first held only entries left out) the largest.
    const window = await entriesBefore(medplum, patient, tenants, next, round === 0 ? perSearch : 100);
    next = undefined;
    for (const entry of window.entries) {
      const last = entries[entries.length - 1];
      if (last && sameGroup(last, entry)) {
        last.count++;
        oldest = entry.at;
      } else if (entries.length >= limit && entry.at !== oldest) {
        // The next page starts before the oldest instant here (a group's members are all here, the
        // oldest included): what shares it stays on this page.
        next = oldest;
        break;
      } else {
        entries.push(entry);
        oldest = entry.at;
      }
    }
    next ??= window.more;
  }
  return { ok: true, entries, ...(next ? { next } : {}), scope: ACCESS_LOG_SCOPE };
}

/** Windows of her entries read in one call at most (each one search per type of record). */
const ROUNDS = 3;

/**
 * Her entries stored before `before` (all when undefined), newest first, down to the horizon of the
 * searches that answered a full page (below it a search may hold more not read yet); `more` is that
 * horizon when there is one (the next window's `before`).
 */
async function entriesBefore(
  medplum: MedplumClient,
  patient: string,
  tenants: Promise<string[]>,
  before: string | undefined,
  perSearch: number,
): Promise<{ entries: AccessLog['entries']; more?: string }> {
  const answers = await Promise.all(
    SEARCHES.map(async (entity) => {
      const found = await medplum.searchResources(
        'AuditEvent',
        {
          [entity.param]: patient,
          // Only what her log can show: an entry it would leave out must not fill the page in place of
          // hers (a member may write entries in her own name: failed ones, searches...).
          outcome: '0',
          subtype: Object.keys(ACTIONS)
            .map((code) => `${RESTFUL}|${code}`)
            .join(','),
          // Ordered and paged by when Medplum stored it (`meta.lastUpdated`, which nobody else sets), never by
          // the `recorded` a writer gives: a date of 2150 neither heads her log nor pushes true entries out.
          ...(before ? { _lastUpdated: `lt${before}` } : {}),
          _sort: '-_lastUpdated',
          _count: String(perSearch),
        },
        { headers: { 'X-Medplum': 'extended' }, cache: 'no-cache' },
      );
      return { events: found as AuditEvent[], full: found.length >= perSearch };
    }),
  );
  const full = answers.filter((a) => a.full);
  // The latest of their oldest instants (ISO instants of Medplum's, compared as text).
  const horizon = full.length
    ? full
        .map((a) => storedAt(a.events[a.events.length - 1]))
        .sort()
        .at(-1)
    : undefined;
  const seen = new Set<string>();
  const events = answers
    .flatMap((a) => a.events)
    .filter((e) => {
      const fresh = !!e.id && !seen.has(e.id);
      seen.add(e.id as string);
      return fresh && genuine(e, patient) && (!horizon || storedAt(e) >= horizon);
    })
    .sort((a, b) => Date.parse(storedAt(b)) - Date.parse(storedAt(a)));
  const hers = await tenants;
  const names = await actorsOf(medplum, events, hers);
  const entries = events.flatMap((e) => entryOf(e, patient, names, hers) ?? []);
  return { entries, ...(horizon ? { more: horizon } : {}) };
}

/** Her Patient, then each type of record of hers (the chained search through its `patient` parameter). */
const SEARCHES: { param: string }[] = [
  { param: 'entity' },
  ...ACCESS_LOG_RECORD_TYPES.map((type) => ({ param: `entity:${type}.patient` })),
];

const RESTFUL = 'http://hl7.org/fhir/restful-interaction';

/** Medplum's REST interactions, as she reads them. */
const ACTIONS: Record<string, AccessLog['entries'][number]['action']> = {
  read: 'viewed',
  history: 'viewed',
  create: 'created',
  update: 'changed',
  patch: 'changed',
  delete: 'deleted',
};

/** Medplum 5.1's second agent: the application she signed in through, never a requestor (auditevent.ts). */
const viaApplication = (a: AuditEventAgent): boolean =>
  a.requestor === false && !!a.who?.reference?.startsWith('ClientApplication/');

/**
 * Written by Medplum for the member it names (its author stamp is the requestor, any other agent the
 * application she used), about a REST interaction
 * that succeeded; a patient's own entries count only when they are hers. Whatever else a member may
 * write in her own name counts too (it shows against herself): an entry left out here could fill a
 * search's page and push her true entries off it.
 */
export function genuine(e: AuditEvent, patient: string): boolean {
  const who = e.agent?.[0]?.who?.reference;
  const interaction = e.subtype?.find((s) => s.system === RESTFUL)?.code;
  return (
    !!who &&
    e.meta?.author?.reference === who &&
    e.agent?.[0]?.requestor === true &&
    (e.agent ?? []).slice(1).every(viaApplication) &&
    e.outcome === '0' &&
    !!interaction &&
    interaction in ACTIONS &&
    !!whatOf(e) &&
    (!who.startsWith('Patient/') || who === patient) &&
    Math.abs(Date.parse(e.recorded) - Date.parse(storedAt(e))) <= RECORDED_SKEW_MS
  );
}

/** Whether Medplum filed a record in one of these tenants (`meta.accounts`). */
const filedIn = (resource: { meta?: { accounts?: { reference?: string }[] } } | undefined, tenants: string[]) =>
  !!resource?.meta?.accounts?.some((a) => tenants.includes(a.reference as string));

/** When Medplum stored the entry (its server stamp): what her log orders, pages and shows by. */
const storedAt = (e: AuditEvent | undefined): string => e?.meta?.lastUpdated ?? '';

/**
 * How far an entry's own `recorded` may be from when Medplum stored it: Medplum writes its entries as it
 * answers (milliseconds; a minute allows a slow server). Further is a date someone chose: left out.
 */
const RECORDED_SKEW_MS = 60_000;

/** What the entry is about: its first entity that names a record. */
const whatOf = (e: AuditEvent): string | undefined => e.entity?.find((x) => x.what?.reference)?.what?.reference;

export type Names = Map<
  string,
  {
    kind: AccessLog['entries'][number]['by']['kind'];
    name?: string;
    purpose?: string;
    /** A clinician's own record files her in the patient's tenant (`meta.accounts`). */
    ofHerTenant?: boolean;
  }
>;

/** Who each actor is: a clinician's name, an application's name, a workflow's purpose (read once each). */
async function actorsOf(medplum: MedplumClient, events: AuditEvent[], tenants: string[]): Promise<Names> {
  const names: Names = new Map();
  const actors = [...new Set(events.map((e) => e.agent?.[0]?.who?.reference as string))];
  await Promise.all(
    actors.map(async (reference) => {
      const [type, id] = reference.split('/');
      if (type === 'Practitioner') {
        const who = (await medplum.readResource('Practitioner', id).catch(absent)) as Practitioner | undefined;
        const ofHerTenant = filedIn(who, tenants);
        const name = who?.name?.[0];
        const text = name
          ? [...(name.prefix ?? []), ...(name.given ?? []), name.family].filter(Boolean).join(' ')
          : undefined;
        names.set(reference, { kind: 'clinician', ofHerTenant, ...(text ? { name: text } : {}) });
      } else if (type === 'Bot') {
        const bot = (await medplum.readResource('Bot', id).catch(absent)) as Bot | undefined;
        names.set(reference, { kind: 'platform', ...(bot?.description ? { purpose: bot.description } : {}) });
      } else if (type === 'ClientApplication') {
        const app = (await medplum.readResource('ClientApplication', id).catch(absent)) as
          | ClientApplication
          | undefined;
        names.set(reference, { kind: 'application', ...(app?.name ? { name: app.name } : {}) });
      } else if (type === 'Patient') {
        names.set(reference, { kind: 'you' });
      }
    }),
  );
  return names;
}

export function entryOf(
  e: AuditEvent,
  patient: string,
  names: Names,
  tenants: string[],
): AccessLog['entries'][number] | undefined {
  const who = e.agent?.[0]?.who?.reference as string;
  const actor = who === patient ? { kind: 'you' as const } : names.get(who);
  // A clinician's entry is hers only when the clinician is of her care provider: the entry filed in her
  // tenant (Medplum files a member's entries under her policy's tenant, which she cannot choose) or the
  // clinician's own record filed there. Another tenant's clinician's entry about a record of hers is not.
  if (actor?.kind === 'clinician' && !actor.ofHerTenant && !filedIn(e, tenants)) {
    return undefined;
  }
  const by = actor
    ? {
        kind: actor.kind,
        ...('name' in actor && actor.name ? { name: actor.name } : {}),
        ...('purpose' in actor && actor.purpose ? { purpose: actor.purpose } : {}),
      }
    : undefined;
  const interaction = e.subtype?.find((s) => s.system === RESTFUL)?.code as string;
  const resourceType = (whatOf(e) ?? '').split('/')[0];
  return by ? { at: storedAt(e), action: ACTIONS[interaction], resourceType, by, count: 1 } : undefined;
}

/** The same person doing the same to the same kind of record within the same minute: one entry. */
export function sameGroup(a: AccessLog['entries'][number], b: AccessLog['entries'][number]): boolean {
  return (
    a.action === b.action &&
    a.resourceType === b.resourceType &&
    JSON.stringify(a.by) === JSON.stringify(b.by) &&
    Math.floor(Date.parse(a.at) / 60_000) === Math.floor(Date.parse(b.at) / 60_000)
  );
}
