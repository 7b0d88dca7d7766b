import type { BotEvent, MedplumClient } from '@medplum/core';
import type { AuditEvent, AuditEventAgent, Bot, ClientApplication, Practitioner } from '@medplum/fhirtypes';
import type { AccessLog } from '../contracts/access-log';
import { ACCESS_LOG_RECORD_TYPES, ACCESS_LOG_SCOPE } from '../contracts/access-log-rules';
import { absent } from './lib/absent';
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
  const { before, limit } = start.input;
  const perSearch = Math.min(100, limit * 4);
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
          ...(before ? { date: `lt${before}` } : {}),
          _sort: '-date',
          _count: String(perSearch),
        },
        { headers: { 'X-Medplum': 'extended' }, cache: 'no-cache' },
      );
      return { events: found as AuditEvent[], full: found.length >= perSearch };
    }),
  );
  // Below the oldest entry of a full answer, that search may hold more not read yet: the page stops there.
  const horizon = Math.max(
    0,
    ...answers.filter((a) => a.full).map((a) => Date.parse(a.events[a.events.length - 1]?.recorded ?? '')),
  );
  const seen = new Set<string>();
  const events = answers
    .flatMap((a) => a.events)
    .filter((e) => {
      const fresh = !!e.id && !seen.has(e.id);
      seen.add(e.id as string);
      return fresh && genuine(e, patient) && Date.parse(e.recorded) >= horizon;
    })
    .sort((a, b) => Date.parse(b.recorded) - Date.parse(a.recorded));
  const names = await actorsOf(medplum, events);
  const entries: AccessLog['entries'] = [];
  let oldest: string | undefined;
  let stopped = false;
  for (const e of events) {
    const entry = entryOf(e, patient, names);
    if (!entry) {
      continue;
    }
    const last = entries[entries.length - 1];
    if (last && sameGroup(last, entry)) {
      last.count++;
    } else if (entries.length >= limit && e.recorded !== oldest) {
      // The next page starts before the oldest instant here: what shares it stays on this page.
      stopped = true;
      break;
    } else {
      entries.push(entry);
    }
    oldest = e.recorded;
  }
  const more = stopped || answers.some((a) => a.full);
  return { ok: true, entries, ...(more && oldest ? { next: oldest } : {}), scope: ACCESS_LOG_SCOPE };
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
function genuine(e: AuditEvent, patient: string): boolean {
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
    (!who.startsWith('Patient/') || who === patient)
  );
}

/** What the entry is about: its first entity that names a record. */
const whatOf = (e: AuditEvent): string | undefined => e.entity?.find((x) => x.what?.reference)?.what?.reference;

type Names = Map<string, { kind: AccessLog['entries'][number]['by']['kind']; name?: string; purpose?: string }>;

/** Who each actor is: a clinician's name, an application's name, a workflow's purpose (read once each). */
async function actorsOf(medplum: MedplumClient, events: AuditEvent[]): Promise<Names> {
  const names: Names = new Map();
  const actors = [...new Set(events.map((e) => e.agent?.[0]?.who?.reference as string))];
  await Promise.all(
    actors.map(async (reference) => {
      const [type, id] = reference.split('/');
      if (type === 'Practitioner') {
        const who = (await medplum.readResource('Practitioner', id).catch(absent)) as Practitioner | undefined;
        const name = who?.name?.[0];
        const text = name
          ? [...(name.prefix ?? []), ...(name.given ?? []), name.family].filter(Boolean).join(' ')
          : undefined;
        names.set(reference, { kind: 'clinician', ...(text ? { name: text } : {}) });
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

function entryOf(e: AuditEvent, patient: string, names: Names): AccessLog['entries'][number] | undefined {
  const who = e.agent?.[0]?.who?.reference as string;
  const by = who === patient ? { kind: 'you' as const } : names.get(who);
  const interaction = e.subtype?.find((s) => s.system === RESTFUL)?.code as string;
  const resourceType = (whatOf(e) ?? '').split('/')[0];
  return by ? { at: e.recorded, action: ACTIONS[interaction], resourceType, by, count: 1 } : undefined;
}

/** The same person doing the same to the same kind of record within the same minute: one entry. */
function sameGroup(a: AccessLog['entries'][number], b: AccessLog['entries'][number]): boolean {
  return (
    a.action === b.action &&
    a.resourceType === b.resourceType &&
    JSON.stringify(a.by) === JSON.stringify(b.by) &&
    Math.floor(Date.parse(a.at) / 60_000) === Math.floor(Date.parse(b.at) / 60_000)
  );
}
