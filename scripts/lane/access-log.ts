// Her access log on a real Medplum (its saveAuditEvents on): who opened or changed her records, only hers,
// nothing written in someone else's name.
import type { AuditEvent } from '@medplum/fhirtypes';
import { ACCESS_LOG_READS_PER_MINUTE, type AccessLog } from '../../contracts/access-log';
import { demoEmail } from '../../src/provision/demo';
import {
  type AttackContext,
  describe,
  medplumCall,
  message,
  NEWCOMER_PASSWORD,
  type Person,
  PUBLIC_URL,
  pause,
  register,
  row,
  signIn,
} from './common';
import { OUTSIDER } from './queues';

type Log = AccessLog;
type Entry = AccessLog['entries'][number];

/**
 * (a) the journey patient's log through the gateway: her care team's clinicians by name, the platform by
 * purpose, herself; (b) a new Northwind patient's log names no clinician until the Northwind clinician
 * opens her chart (her Patient, by id, on Medplum), then does, once; another new patient's log still names
 * none; (c) on Medplum itself: she cannot read AuditEvents; the Northwind clinician cannot write one in a
 * colleague's name, the Southridge clinician not even in her own about a Northwind patient, a patient not
 * in another's name; bob's own entry about her is kept by Medplum and left out of her log; (d) her log
 * page by page (limit 1) is her whole log.
 */
export async function accessLog(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'access log';
  const steps = {
    journey: `${family}: (a) the journey patient's log through the gateway (GET /v1/patient/access-log, every page: limit=100, each page's next as before): entries by her care team's clinicians by name (at least two), by the Northwind clinician outside her care team who opened her records (the queue outsider), by the platform with a purpose, and by herself (signed in through her tenant's app), newest first`,
    opened: `${family}: (b) a new Northwind patient's log names no clinician; the Northwind clinician reads her Patient by id on Medplum, and she reads it herself (on a Medplum process that keeps AuditEvents); her log then names that clinician (viewed Patient) and herself; another new patient's log still names no clinician`,
    forged: `${family}: (c) on Medplum: she cannot search AuditEvent; POST AuditEvent in a colleague's name (Northwind clinician), about a Northwind patient (Southridge clinician, in her own name), in her name (bob), and bob in his own name about her Patient: refused; her log unchanged`,
    paged: `${family}: (d) the new patient's log page by page (limit=1, each page's next as before) is her whole log`,
    budget: `${family}: (f) her budget: the journey patient reads her log (limit=1) until refused: within ${ACCESS_LOG_READS_PER_MINUTE + 1} reads a 429 rate_limited with Retry-After (at most ${ACCESS_LOG_READS_PER_MINUTE} a minute, counted from Medplum's own record of the bot's runs for her); a new patient's read meanwhile 200`,
    stored: `${family}: (e) only what Medplum stored (issue 50): about a Task of the journey patient's, an entry dated 2150 by her and one dated 2199 by the Northwind clinician are refused; the Southridge clinician's entry in his own name is kept by Medplum and not in her log; 30 of hers dated 2020 are kept and left out, her first page (limit 10) still shows entries, none of 2020; before=2026-02-30T00:00:00Z and before=0000-01-01T00:00:00Z are 400`,
  };
  const read = async (person: Person, query = ''): Promise<Log> => {
    let res = await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/access-log${query}`, {
      headers: { authorization: `Bearer ${person.token}` },
    });
    // Her budget of reads a minute (ACCESS_LOG_READS_PER_MINUTE): wait as told, as an app does.
    for (let tries = 0; res.status === 429 && tries < 3; tries++) {
      await pause(1000 * Number(res.headers.get('retry-after') ?? '1'));
      res = await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/access-log${query}`, {
        headers: { authorization: `Bearer ${person.token}` },
      });
    }
    if (res.status !== 200) {
      throw new Error(`GET /v1/patient/access-log${query}: ${res.status} ${(await res.text()).slice(0, 300)}`);
    }
    return (await res.json()) as Log;
  };
  /** Her whole log, page after page (limit 100, each page's `next` as `before`): the lane's own reads fill more than a page. */
  const wholeLog = async (person: Person): Promise<Log> => {
    const first = await read(person, '?limit=100');
    const entries = [...first.entries];
    let next = first.next;
    for (let page = 1; next && page < 50; page++) {
      const got = await read(person, `?limit=100&before=${next}`);
      entries.push(...got.entries);
      next = got.next;
    }
    return { ...first, entries, next };
  };
  const summary = (log: Log) => {
    const kinds = new Map<string, number>();
    for (const e of log.entries) {
      kinds.set(e.by.kind, (kinds.get(e.by.kind) ?? 0) + e.count);
    }
    return [...kinds].map(([k, n]) => `${k} ${n}`).join(', ');
  };

  // Whether this Medplum keeps AuditEvents at all (its saveAuditEvents): Medplum 5.0.10 must not, since with
  // it every `_include` or GraphQL reference read leaves a database connection in a transaction until the
  // server stops answering (docs/medplum-auditevents.md). Without it the journey's log is rightly empty.
  // MEDPLUM_AUDITING_BASE_URL: a second Medplum process over the same database that keeps them, its own
  // Redis database (docs/real-medplum.md): plain reads by id made there are kept, and her log (read through
  // the gateway, its bot on the lane's Medplum) must show them.
  const maya = people.get('maya');
  const kept = maya ? (await read(maya, '?limit=1').catch(() => undefined))?.entries.length !== 0 : false;
  const auditing = process.env.MEDPLUM_AUDITING_BASE_URL || (kept ? ctx.baseUrl : undefined);
  const NOT_KEPT =
    'this Medplum keeps no AuditEvents (saveAuditEvents off: on Medplum 5.0.10 it leaks a database connection with every _include or GraphQL reference read, docs/medplum-auditevents.md); her log is empty, as it should be';
  if (!kept) {
    row(steps.journey, 'not reached', NOT_KEPT);
  }
  if (!auditing) {
    row(steps.opened, 'not reached', `${NOT_KEPT}; no MEDPLUM_AUDITING_BASE_URL`);
    row(steps.paged, 'not reached', `${NOT_KEPT}; no MEDPLUM_AUDITING_BASE_URL`);
  }

  try {
    if (!kept) {
      throw new Skip();
    }
    if (!maya) {
      throw new Error('the journey left no patient');
    }
    const log = await wholeLog(maya);
    const clinicians = [...new Set(log.entries.filter((e) => e.by.kind === 'clinician').map((e) => e.by.name))];
    const purposes = log.entries.filter((e) => e.by.kind === 'platform' && e.by.purpose).length;
    const herself = log.entries.filter((e) => e.by.kind === 'you').length;
    const at = log.entries.map((e) => Date.parse(e.at));
    const newestFirst = at.every((t, i) => i === 0 || at[i - 1] >= t);
    // An honest log names everyone of her tenant who opened her records: her care team (the clinician who
    // reviewed her intake, the visit's practitioner) and the lane's queue outsider, who read her review Task
    // while attacking it (queues.ts).
    const outsider = `${OUTSIDER.firstName} ${OUTSIDER.lastName}`;
    const careTeam = clinicians.filter((name) => name !== outsider);
    row(
      steps.journey,
      careTeam.length >= 2 &&
        clinicians.every(Boolean) &&
        clinicians.includes(outsider) &&
        purposes > 0 &&
        herself > 0 &&
        newestFirst
        ? 'ok'
        : 'FAILED',
      `${log.entries.length} entries (${summary(log)}); her care team ${careTeam.join(', ') || 'none'}; outside it ${clinicians.includes(outsider) ? outsider : 'nobody (the queue outsider is missing)'}; platform purposes ${purposes}; her own ${herself}; newest first: ${newestFirst}`,
    );
  } catch (err) {
    if (!(err instanceof Skip)) {
      row(steps.journey, 'FAILED', message(err));
    }
  }

  let zoe: (Person & { id: string; email: string }) | undefined;
  try {
    const clinician = people.get('northwind-clinician');
    if (!clinician) {
      throw new Error('the Northwind clinician is not signed in');
    }
    const newPatient = async (who: string) => {
      const person = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who };
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/home`, {
        method: 'POST',
        headers: { authorization: `Bearer ${person.token}` },
      });
      const me = (await (
        await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/profile`, {
          headers: { authorization: `Bearer ${person.token}` },
        })
      ).json()) as { id: string };
      return { ...person, id: me.id };
    };
    zoe = await newPatient('a new Northwind patient');
    if (!auditing) {
      throw new Skip();
    }
    const yan = await newPatient('another new Northwind patient');
    const before = (await read(zoe, '?limit=100')).entries.filter((e) => e.by.kind === 'clinician').length;
    // Signed in there (a Medplum process keeps its sign-ins in its own Redis database).
    const clinicianThere = await signIn(
      auditing,
      ctx.projectId,
      'the Northwind clinician',
      demoEmail('clinician', 'northwind'),
    );
    const zoeThere = await signIn(auditing, ctx.projectId, zoe.who, zoe.email, NEWCOMER_PASSWORD);
    const opened = await medplumCall(auditing, clinicianThere.token, 'GET', `fhir/R4/Patient/${zoe.id}`);
    const own = await medplumCall(auditing, zoeThere.token, 'GET', `fhir/R4/Patient/${zoe.id}`);
    let after: Entry[] = [];
    let herself: Entry[] = [];
    for (let i = 0; i < 20; i++) {
      const entries = (await read(zoe, '?limit=100')).entries;
      after = entries.filter((e) => e.by.kind === 'clinician');
      herself = entries.filter((e) => e.by.kind === 'you');
      if (after.length > 0 && herself.length > 0) {
        break;
      }
      await pause(250);
    }
    const others = (await read(yan, '?limit=100')).entries.filter((e) => e.by.kind === 'clinician').length;
    const named = after.map((e) => `${e.by.name} ${e.action} ${e.resourceType} x${e.count}`);
    row(
      steps.opened,
      opened.status === 200 &&
        own.status === 200 &&
        herself.some((e) => e.action === 'viewed' && e.resourceType === 'Patient') &&
        before === 0 &&
        after.length === 1 &&
        after[0].action === 'viewed' &&
        after[0].resourceType === 'Patient' &&
        after[0].by.name &&
        others === 0
        ? 'ok'
        : 'FAILED',
      `before ${before}; the clinician's read ${describe(opened)}, hers ${describe(own)} (at ${auditing}); after: ${named.join('; ') || 'none'}, and ${herself.map((e) => `you ${e.action} ${e.resourceType} x${e.count}`).join('; ') || 'nothing of hers'}; the other new patient's clinician entries: ${others}`,
    );
  } catch (err) {
    if (!(err instanceof Skip)) {
      row(steps.opened, 'FAILED', message(err));
    }
  }

  try {
    const nw = people.get('northwind-clinician');
    const sr = people.get('southridge-clinician');
    const bob = people.get('bob');
    if (!nw || !sr || !bob || !zoe) {
      throw new Error('someone is not signed in');
    }
    const forged = (who: string, what: string): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
      subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
      action: 'R',
      recorded: new Date().toISOString(),
      outcome: '0',
      agent: [{ who: { reference: who }, requestor: true }],
      source: { observer: { reference: who } },
      entity: [{ what: { reference: what } }],
    });
    const zoeRef = `Patient/${zoe.id}`;
    const search = await medplumCall(ctx.baseUrl, zoe.token, 'GET', `fhir/R4/AuditEvent?entity=${zoeRef}`);
    const searchRefused = search.status === 403 || ((search.body as { entry?: unknown[] })?.entry ?? []).length === 0;
    const colleague = await medplumCall(ctx.baseUrl, nw.token, 'POST', 'fhir/R4/AuditEvent', {
      body: forged(sr.profile, zoeRef),
    });
    const otherTenant = await medplumCall(ctx.baseUrl, sr.token, 'POST', 'fhir/R4/AuditEvent', {
      body: forged(sr.profile, zoeRef),
    });
    const inHerName = await medplumCall(ctx.baseUrl, bob.token, 'POST', 'fhir/R4/AuditEvent', {
      body: forged(zoeRef, zoeRef),
    });
    const youBefore = (await read(zoe, '?limit=100')).entries
      .filter((e) => e.by.kind === 'you')
      .reduce((n, e) => n + e.count, 0);
    const bobsOwn = await medplumCall(ctx.baseUrl, bob.token, 'POST', 'fhir/R4/AuditEvent', {
      body: forged(bob.profile, zoeRef),
    });
    const youAfter = (await read(zoe, '?limit=100')).entries
      .filter((e) => e.by.kind === 'you')
      .reduce((n, e) => n + e.count, 0);
    const refused = (a: { status: number }) => a.status === 403;
    row(
      steps.forged,
      searchRefused &&
        refused(colleague) &&
        refused(otherTenant) &&
        refused(inHerName) &&
        refused(bobsOwn) &&
        youAfter === youBefore
        ? 'held'
        : 'FAILED',
      `her AuditEvent search: ${describe(search)}; in a colleague's name: ${colleague.status}; the other tenant's clinician about her: ${otherTenant.status}; bob in her name: ${inHerName.status}; bob in his own name: ${bobsOwn.status}, her "you" entries ${youBefore} -> ${youAfter}`,
    );
  } catch (err) {
    row(steps.forged, 'FAILED', message(err));
  }

  try {
    const nw = people.get('northwind-clinician');
    const sr = people.get('southridge-clinician');
    if (!maya || !nw || !sr) {
      throw new Error('the journey patient or a clinician is not signed in');
    }
    const tasks = (await (
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/tasks`, { headers: { authorization: `Bearer ${maya.token}` } })
    ).json()) as { tasks: { task: string }[] };
    const about = tasks.tasks[0]?.task;
    if (!about) {
      throw new Error('the journey patient has no task');
    }
    const entry = (who: string, recorded: string): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
      subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
      action: 'R',
      recorded,
      outcome: '0',
      agent: [{ who: { reference: who }, requestor: true }],
      source: { observer: { reference: who } },
      entity: [{ what: { reference: about } }],
    });
    const post = (person: Person, body: AuditEvent) =>
      medplumCall(ctx.baseUrl, person.token, 'POST', 'fhir/R4/AuditEvent', { body });
    const ahead = await post(maya, entry(maya.profile, '2150-01-01T00:00:00Z'));
    const clinicianAhead = await post(nw, entry(nw.profile, '2199-01-01T00:00:00Z'));
    const otherTenant = await post(sr, entry(sr.profile, new Date().toISOString()));
    const back: number[] = [];
    for (let i = 0; i < 30; i++) {
      back.push((await post(maya, entry(maya.profile, '2020-01-01T00:00:00Z'))).status);
    }
    const log = kept ? await wholeLog(maya) : undefined;
    const first = kept ? (await read(maya, '?limit=10')).entries : [];
    const southridge = log?.entries.filter((e) => e.by.name?.includes('Southridge')) ?? [];
    const dated = log?.entries.filter((e) => /^(2020|2150|2199)/.test(e.at)) ?? [];
    const badBefore = await Promise.all(
      ['2026-02-30T00:00:00Z', '0000-01-01T00:00:00Z'].map(
        async (b) =>
          (
            await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/access-log?before=${b}`, {
              headers: { authorization: `Bearer ${maya.token}` },
            })
          ).status,
      ),
    );
    row(
      steps.stored,
      ahead.status === 403 &&
        clinicianAhead.status === 403 &&
        back.every((s) => s === 201) &&
        southridge.length === 0 &&
        dated.length === 0 &&
        (!kept || first.length > 0) &&
        badBefore.every((s) => s === 400)
        ? 'held'
        : 'FAILED',
      `dated 2150 by her: ${describe(ahead)}; 2199 by the Northwind clinician: ${describe(clinicianAhead)}; the Southridge clinician's own: ${describe(otherTenant)}, Southridge entries in her log ${southridge.length}; 30 dated 2020 by her: ${[...new Set(back)].join('/')}, entries dated 2020/2150/2199 in her log ${dated.length}; her first page ${kept ? `${first.length} entries` : '(no AuditEvents kept here)'}; bad before: ${badBefore.join(', ')}`,
    );
  } catch (err) {
    row(steps.stored, 'FAILED', message(err));
  }

  try {
    if (!maya || !zoe) {
      throw new Error('the journey patient or the new patient is missing');
    }
    const once = (person: Person) =>
      ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/access-log?limit=1`, {
        headers: { authorization: `Bearer ${person.token}` },
      });
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i <= ACCESS_LOG_READS_PER_MINUTE && !refused; i++) {
      const res = await once(maya);
      statuses.push(res.status);
      if (res.status === 429) {
        refused = res;
      }
    }
    const body = refused ? ((await refused.json()) as { error?: { code?: string } }) : undefined;
    const other = await once(zoe);
    row(
      steps.budget,
      refused &&
        body?.error?.code === 'rate_limited' &&
        Number(refused.headers.get('retry-after')) > 0 &&
        other.status === 200
        ? 'held'
        : 'FAILED',
      `${statuses.length} reads: ${statuses.filter((s) => s === 200).length} answered 200${refused ? `, then 429 ${body?.error?.code} Retry-After ${refused.headers.get('retry-after')}` : ', never refused'}; the new patient's read: ${other.status}`,
    );
  } catch (err) {
    row(steps.budget, 'FAILED', message(err));
  }

  try {
    if (!auditing) {
      throw new Skip();
    }
    if (!zoe) {
      throw new Error('no new patient');
    }
    const whole = (await read(zoe, '?limit=100')).entries;
    const paged: Entry[] = [];
    let before: string | undefined;
    for (let page = 0; page < 200; page++) {
      const got = await read(zoe, `?limit=1${before ? `&before=${before}` : ''}`);
      paged.push(...got.entries);
      if (!got.next) {
        break;
      }
      before = got.next;
    }
    const total = (entries: Entry[]) => entries.reduce((n, e) => n + e.count, 0);
    const firstPage = whole.length < 100;
    row(
      steps.paged,
      firstPage && whole.length >= 2 && total(paged) === total(whole) ? 'ok' : 'FAILED',
      `${paged.length} pages of 1 hold ${total(paged)} interactions; the whole log (limit 100) ${total(whole)} in ${whole.length} entries`,
    );
  } catch (err) {
    if (!(err instanceof Skip)) {
      row(steps.paged, 'FAILED', message(err));
    }
  }
}

/** A check this Medplum cannot show (its row already says why). */
class Skip extends Error {}
