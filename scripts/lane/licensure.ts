import type { Encounter, Location, Practitioner, PractitionerRole, Resource, Slot } from '@medplum/fhirtypes';
import { canonicalJson } from '../../bots/lib/canonical';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { type AttackContext, DAY, describe, entriesOf, errorOf, medplumCall, message, row } from './common';
import { type NewVisitor, visitorKit } from './visitor';

/**
 * Licensure at the time of care (docs/decisions.md "Licensure at the time of
 * care"): booking, rescheduling and starting a live visit's segment each check that the practitioner is
 * licensed where she lives at that moment (her record's address, `Patient.address[0]`). Through the
 * in-process gateway on this Medplum, with two new Northwind patients of the lane's own, each registered
 * through Northwind's app (`register`), homed, living in Fresno, CA, enrolled in the monitoring program
 * and activated (as `enrollmentRepeats` enrolls), so that she has a video-visit schedule-visit task:
 * - the first books a CA practitioner's slot, moves to NY (her address, `PUT /v1/fhir/Patient/{id}`) and
 *   accepts what her plan asks there; availability then lists no slot of a CA practitioner, only of
 *   practitioners licensed in NY (their roles' jurisdictions, as the admin reads them); a reschedule onto
 *   another slot of her CA practitioner is 409 `not_licensed` with nothing changed (the admin reads the
 *   Appointment, both Slots and the segments at the same versions); onto a NY practitioner's slot, 201;
 * - the second books a free Slot the admin writes on a CA practitioner's Schedule starting in 5 minutes
 *   (a visit opens 30 minutes before its start: the materialised slots are too far off to start); moved to
 *   NY, its start is 409 `not_licensed` through the gateway, and the appointments bot's own answer to the
 *   same call (`$execute` with her token) is the same refusal as data (200, `ok: false`), nothing changed
 *   each time; moved back to CA it starts (200) and the started Encounter records `US-CA` (extension
 *   `patient-jurisdiction`); moved to NY again, starting it again is 200 `resumed`.
 * The patients, their visits and the admin's Slot stay in the project.
 */
export async function licensureAtCare(ctx: AttackContext): Promise<void> {
  const family = 'licensure at the time of care';
  const steps = {
    first: `${family}: precondition: a new Northwind patient, registered through Northwind's app, homed, living in Fresno, CA, enrolled in the monitoring program and activated: her video-visit schedule-visit task, and her visit team's slots offered in CA`,
    book: `${family}: she books a slot of a CA practitioner of her visit team (the first she is offered): 201`,
    move: `${family}: she moves to NY (her address through the gateway, PUT /v1/fhir/Patient/{id}: 200) and accepts what her plan asks there`,
    availability: `${family}: availability (her visit team, the next 7 days) lists no slot of a CA practitioner, only of practitioners licensed in NY (their roles' jurisdictions, read by the admin)`,
    refusedReschedule: `${family}: rescheduling onto another slot of her CA practitioner is 409 not_licensed {state: 'US-NY', practitioner: hers, use: 'GET /v1/availability'}, nothing changed (the admin reads the Appointment, both Slots and the segments at the same versions)`,
    reschedule: `${family}: rescheduling onto a NY practitioner's slot: 201`,
    second: `${family}: precondition: a second new Northwind patient the same way (Fresno, CA; enrolled, activated); the admin writes a free Slot on a CA practitioner's Schedule starting in 5 minutes (201); she books it (201)`,
    refusedStart: `${family}: moved to NY (what her plan asks there accepted), starting the visit through the gateway is 409 not_licensed {state: 'US-NY', practitioner: the slot's, use: 'POST /v1/appointments/{id}/reschedule'}, nothing changed (the Appointment, the Slot and the segments at the same versions)`,
    refusedByBot: `${family}: the same start directly on Medplum ($execute of the appointments bot with her token, {operation: 'encounter', appointment}): 200 {ok: false, error: {status: 409, code: 'not_licensed', the gateway's details but its requestId}}, nothing changed`,
    started: `${family}: moved back to CA, the start is 200 (in-progress, not resumed) and the started Encounter carries the patient-jurisdiction extension US-CA (read by the admin)`,
    resumed: `${family}: moved to NY again, starting it again is 200 resumed, the same segment (care begun lawfully is not cut off)`,
  };
  type Step = keyof typeof steps;
  const skip = (keys: Step[], why: string) => {
    for (const key of keys) {
      row(steps[key], 'not reached', why);
    }
  };
  const idOf = (reference: string) => reference.split('/')[1] ?? '';
  const { call, said, moveTo, acceptWhatIsAsked, newVisitor, FRESNO, ALBANY } = visitorKit(ctx);
  type Visitor = NewVisitor;
  type Offered = { slot: string; start: string; practitioner: string };
  /** Her visit team's free slots over the next 7 days (from 10 minutes on), every page. */
  const offered = async (v: Visitor): Promise<Offered[]> => {
    const now = Date.now();
    const window = {
      careTeam: v.careTeam,
      start: new Date(now + 10 * 60_000).toISOString(),
      end: new Date(now + 7 * DAY).toISOString(),
      count: '200',
    };
    const slots: Offered[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await call(
        v.person,
        'GET',
        `/v1/availability?${new URLSearchParams({ ...window, ...(cursor ? { cursor } : {}) })}`,
      );
      if (page.status !== 200) {
        throw new Error(`GET /v1/availability (page ${pages + 1}): ${said(page)}`);
      }
      const body = page.body as { slots?: Offered[]; next?: string };
      slots.push(...(body.slots ?? []));
      cursor = body.next;
      pages++;
    } while (cursor && pages < 20);
    return slots;
  };
  const practitionersOf = (slots: Offered[]) => [...new Set(slots.map((s) => s.practitioner))];
  /** A practitioner's name and the jurisdictions (`US-NY`) of her active roles, as the admin reads them. */
  const licencesOf = async (practitioner: string): Promise<{ name: string; jurisdictions: string[] }> => {
    const found = entriesOf(
      (
        await ctx.adminGet(
          `fhir/R4/PractitionerRole?practitioner=${practitioner}&_include=PractitionerRole:location&_include=PractitionerRole:practitioner`,
        )
      ).body,
    );
    const roles = found.filter((r) => r.resourceType === 'PractitionerRole') as PractitionerRole[];
    const addresses = new Map(
      (found.filter((r) => r.resourceType === 'Location') as Location[]).map((l) => [`Location/${l.id}`, l.address]),
    );
    const name = (found.find((r) => r.resourceType === 'Practitioner') as Practitioner | undefined)?.name?.[0];
    const jurisdictions = roles
      .filter((r) => r.active !== false)
      .flatMap((r) => r.location ?? [])
      .map((l) => addresses.get(l.reference ?? ''))
      .filter((a) => a?.state)
      .map((a) => `${a?.country}-${a?.state}`);
    return {
      name: name
        ? [...(name.prefix ?? []), ...(name.given ?? []), name.family].filter(Boolean).join(' ')
        : practitioner,
      jurisdictions: [...new Set(jurisdictions)].sort(),
    };
  };
  const licensed = async (practitioners: string[]) =>
    Promise.all(practitioners.map(async (p) => ({ practitioner: p, ...(await licencesOf(p)) })));
  const licenceList = (list: { practitioner: string; name: string; jurisdictions: string[] }[]) =>
    list.map((l) => `${l.practitioner} (${l.name}: ${l.jurisdictions.join(', ') || 'no licence'})`).join(', ');
  /** The versions (and statuses) of what a refusal must leave alone, as the admin reads them. */
  const versions = async (references: string[], appointment: string): Promise<string> => {
    const parts: string[] = [];
    for (const reference of references) {
      const read = await ctx.adminGet(`fhir/R4/${reference}`);
      const resource = read.body as (Resource & { status?: string }) | undefined;
      parts.push(
        read.status === 200
          ? `${reference}@${resource?.meta?.versionId} (${resource?.status})`
          : `${reference}: ${read.status}`,
      );
    }
    const segments = entriesOf(
      (await ctx.adminGet(`fhir/R4/Encounter?appointment=${appointment}&_count=50`)).body,
    ) as Encounter[];
    parts.push(...segments.map((e) => `Encounter/${e.id}@${e.meta?.versionId} (${e.status})`).sort());
    return parts.join(', ');
  };
  /** An error's details as the bot gave them: the gateway's envelope adds its `requestId` to every error. */
  const botDetails = (details: Record<string, unknown> | undefined) => {
    const { requestId: _requestId, ...rest } = details ?? {};
    return details === undefined ? undefined : rest;
  };
  const sameDetails = (details: Record<string, unknown> | undefined, expected: Record<string, string | undefined>) =>
    canonicalJson(botDetails(details) ?? null) === canonicalJson(expected);
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;

  /** 1. Booked in CA, moved to NY: what availability offers, a refused reschedule, a licensed one. */
  const rescheduling = async (): Promise<void> => {
    const rest: Step[] = ['book', 'move', 'availability', 'refusedReschedule', 'reschedule'];
    let v: Visitor;
    let inCa: Offered[];
    try {
      v = await newVisitor('a new Northwind patient of the licensure rows');
      inCa = await offered(v);
    } catch (err) {
      row(steps.first, 'FAILED', `the precondition threw: ${message(err)}`);
      skip(rest, 'no patient (the precondition above)');
      return;
    }
    const caLicences = await licensed(practitionersOf(inCa));
    const chosen = inCa[0];
    const other = chosen && inCa.find((s) => s.practitioner === chosen.practitioner && s.slot !== chosen.slot);
    row(
      steps.first,
      chosen && other ? 'ok' : 'FAILED',
      `${v.patient}, ${v.task} (visit team ${v.careTeam}), plan ${v.carePlan}; offered ${inCa.length} slot(s) in CA, of ${licenceList(caLicences) || 'nobody'}${chosen && !other ? `; NO second slot of ${chosen.practitioner}` : ''}`,
    );
    if (!chosen || !other) {
      skip(rest, 'no two slots of one CA practitioner (the precondition above)');
      return;
    }
    const practitioner = chosen.practitioner;
    let appointment: string;
    try {
      const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task, slot: chosen.slot });
      appointment = (booked.body as { appointment?: string } | undefined)?.appointment ?? '';
      const by = (booked.body as { practitioner?: string } | undefined)?.practitioner;
      row(
        steps.book,
        (booked.status === 201 || booked.status === 200) && appointment && by === practitioner ? 'ok' : 'FAILED',
        `${chosen.slot} (${chosen.start}, ${practitioner}): ${said(booked)}${appointment ? `, ${appointment} with ${by}` : ''}`,
      );
      if (!appointment) {
        skip(rest.slice(1), 'no booking (the row above)');
        return;
      }
    } catch (err) {
      row(steps.book, 'FAILED', `the call threw: ${message(err)}`);
      skip(rest.slice(1), 'no booking (the row above)');
      return;
    }
    try {
      const moved = await moveTo(v, ALBANY);
      row(steps.move, 'ok', `${moved}; ${await acceptWhatIsAsked(v)}`);
    } catch (err) {
      row(steps.move, 'FAILED', `the call threw: ${message(err)}`);
      skip(rest.slice(2), 'she did not move (the row above)');
      return;
    }
    let inNy: Offered[] = [];
    try {
      inNy = await offered(v);
      const nyLicences = await licensed(practitionersOf(inNy));
      const caPractitioners = new Set(
        caLicences.filter((l) => l.jurisdictions.includes('US-CA')).map((l) => l.practitioner),
      );
      const ofCa = inNy.filter((s) => caPractitioners.has(s.practitioner) || s.practitioner === practitioner);
      const unlicensed = nyLicences.filter((l) => !l.jurisdictions.includes('US-NY'));
      row(
        steps.availability,
        inNy.length > 0 && ofCa.length === 0 && unlicensed.length === 0 ? 'ok' : 'FAILED',
        `offered ${inNy.length} slot(s) in NY, of ${licenceList(nyLicences) || 'nobody'}; ${ofCa.length} of a CA practitioner (${[...caPractitioners].join(', ')})${
          ofCa.length
            ? `: ${ofCa
                .slice(0, 3)
                .map((s) => s.slot)
                .join(', ')}`
            : ''
        }${unlicensed.length ? `; NOT licensed in NY: ${unlicensed.map((l) => l.practitioner).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(steps.availability, 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const before = await versions([appointment, chosen.slot, other.slot], appointment);
      const refused = await call(v.person, 'POST', `/v1/appointments/${idOf(appointment)}/reschedule`, {
        slot: other.slot,
      });
      const after = await versions([appointment, chosen.slot, other.slot], appointment);
      const error = errorOf(refused);
      const expected = { state: 'US-NY', practitioner, use: 'GET /v1/availability' };
      const good =
        refused.status === 409 &&
        error.code === 'not_licensed' &&
        sameDetails(error.details, expected) &&
        before === after;
      row(
        steps.refusedReschedule,
        good ? 'held' : 'FAILED',
        `onto ${other.slot} (${other.start}, ${other.practitioner}): expected 409 not_licensed ${JSON.stringify(expected)}; got ${said(refused)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedReschedule, 'FAILED', `the call threw: ${message(err)}`);
    }
    const target = inNy[0];
    if (!target) {
      skip(['reschedule'], 'no NY slot offered (the availability row)');
      return;
    }
    try {
      const moved = await call(v.person, 'POST', `/v1/appointments/${idOf(appointment)}/reschedule`, {
        slot: target.slot,
      });
      const body = moved.body as { appointment?: string; replaces?: string; practitioner?: string } | undefined;
      row(
        steps.reschedule,
        moved.status === 201 && body?.replaces === appointment && body?.practitioner === target.practitioner
          ? 'ok'
          : 'FAILED',
        `onto ${target.slot} (${target.start}, ${target.practitioner}): ${said(moved)}${moved.status < 300 ? `, ${body?.appointment} replacing ${body?.replaces}, with ${body?.practitioner}` : ''}`,
      );
    } catch (err) {
      row(steps.reschedule, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /** 2. A visit open now, booked in CA: its start in NY refused (gateway and bot), back in CA started, resumed in NY. */
  const starting = async (): Promise<void> => {
    const rest: Step[] = ['refusedStart', 'refusedByBot', 'started', 'resumed'];
    let v: Visitor;
    let appointment: string;
    let slot: string;
    let practitioner: string;
    const said2: string[] = [];
    try {
      v = await newVisitor('a second new Northwind patient of the licensure rows');
      said2.push(`${v.patient}, ${v.task}`);
      const [template] = await offered(v);
      if (!template) {
        throw new Error('no slot of her visit team offered in CA');
      }
      const model = (await ctx.adminGet(`fhir/R4/${template.slot}`)).body as Slot | undefined;
      if (!model?.schedule) {
        throw new Error(`the admin could not read ${template.slot}`);
      }
      const start = new Date(Date.now() + 5 * 60_000);
      start.setUTCMilliseconds(0);
      const written = await medplumCall(ctx.baseUrl, ctx.adminToken, 'POST', 'fhir/R4/Slot', {
        waitOutQuota: true,
        extended: true,
        body: {
          resourceType: 'Slot',
          ...(model.meta?.accounts?.length ? { meta: { accounts: model.meta.accounts } } : {}),
          schedule: model.schedule,
          serviceType: model.serviceType,
          status: 'free',
          start: start.toISOString(),
          end: new Date(start.getTime() + 30 * 60_000).toISOString(),
        },
      });
      const made = written.body as Slot | undefined;
      said2.push(
        `the admin's Slot on ${model.schedule.reference} (${template.practitioner}'s, as ${template.slot}), ${start.toISOString()}: ${describe(written)}${made?.meta?.accounts ? ` in ${made.meta.accounts.map((a) => a.reference).join(', ')}` : ''}`,
      );
      if (written.status !== 201 || !made?.id) {
        throw new Error(said2.join('; '));
      }
      slot = `Slot/${made.id}`;
      const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task, slot });
      const body = booked.body as { appointment?: string; practitioner?: string } | undefined;
      said2.push(
        `she books it: ${said(booked)}${body?.appointment ? `, ${body.appointment} with ${body.practitioner}` : ''}`,
      );
      if (booked.status !== 201 || !body?.appointment || !body.practitioner) {
        throw new Error(said2.join('; '));
      }
      appointment = body.appointment;
      practitioner = body.practitioner;
      row(steps.second, 'ok', said2.join('; '));
    } catch (err) {
      row(steps.second, 'FAILED', `the precondition threw: ${message(err)}`);
      skip(rest, 'no visit open now (the precondition above)');
      return;
    }
    const start = `/v1/appointments/${idOf(appointment)}/encounter`;
    const watched = [appointment, slot];
    let refusal: Record<string, unknown> | undefined;
    try {
      const moved = await moveTo(v, ALBANY);
      const accepted = await acceptWhatIsAsked(v);
      const before = await versions(watched, appointment);
      const refused = await call(v.person, 'POST', start, {});
      const after = await versions(watched, appointment);
      const error = errorOf(refused);
      refusal = botDetails(error.details);
      const expected = {
        state: 'US-NY',
        practitioner,
        use: `POST /v1/appointments/${idOf(appointment)}/reschedule`,
      };
      const good =
        refused.status === 409 &&
        error.code === 'not_licensed' &&
        sameDetails(error.details, expected) &&
        before === after;
      row(
        steps.refusedStart,
        good ? 'held' : 'FAILED',
        `${moved}; ${accepted}; POST ${start}: expected 409 not_licensed ${JSON.stringify(expected)}; got ${said(refused)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedStart, 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const before = await versions(watched, appointment);
      const input = { operation: 'encounter', appointment: idOf(appointment) };
      const bot = await medplumCall(
        ctx.baseUrl,
        v.person.token,
        'POST',
        `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|appointments`)}`,
        { body: input },
      );
      const after = await versions(watched, appointment);
      const answer = bot.body as
        | { ok?: boolean; error?: { status?: number; code?: string; details?: Record<string, unknown> } }
        | undefined;
      const same = refusal !== undefined && canonicalJson(answer?.error?.details ?? null) === canonicalJson(refusal);
      const good =
        bot.status === 200 &&
        answer?.ok === false &&
        answer.error?.status === 409 &&
        answer.error.code === 'not_licensed' &&
        same &&
        before === after;
      row(
        steps.refusedByBot,
        good ? 'held' : 'FAILED',
        `$execute ${JSON.stringify(input)}: ${bot.status}, ${bot.text.slice(0, 300)}; details ${same ? "the gateway's (its requestId aside)" : `NOT the gateway's (${JSON.stringify(refusal ?? null)})`}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedByBot, 'FAILED', `the call threw: ${message(err)}`);
    }
    let segment: string | undefined;
    try {
      const moved = await moveTo(v, FRESNO);
      const started = await call(v.person, 'POST', start, {});
      const body = started.body as
        | { resumed?: boolean; segment?: { encounter?: string; position?: number; status?: string } }
        | undefined;
      segment = body?.segment?.encounter;
      const encounter = segment
        ? ((await ctx.adminGet(`fhir/R4/${segment}`)).body as Encounter | undefined)
        : undefined;
      const recorded = encounter?.extension?.filter((e) => e.url === EXTENSIONS.patientJurisdiction) ?? [];
      const codings = recorded.flatMap((e) => e.valueCodeableConcept?.coding ?? []);
      const good =
        started.status === 200 &&
        body?.resumed === false &&
        body.segment?.status === 'in-progress' &&
        encounter?.status === 'in-progress' &&
        recorded.length === 1 &&
        codings.length === 1 &&
        codings[0].system === SYSTEMS.jurisdiction &&
        codings[0].code === 'US-CA';
      row(
        steps.started,
        good ? 'ok' : 'FAILED',
        `${moved}; POST ${start}: ${said(started)}${started.status < 300 ? `, ${segment} (position ${body?.segment?.position}) ${body?.segment?.status}, resumed ${body?.resumed}` : ''}; the admin reads ${segment ?? 'no segment'}: ${encounter?.status ?? 'absent'}, patient-jurisdiction ${JSON.stringify(recorded.map((e) => e.valueCodeableConcept)) || 'none'}`,
      );
    } catch (err) {
      row(steps.started, 'FAILED', `the call threw: ${message(err)}`);
    }
    if (!segment) {
      skip(['resumed'], 'no segment started (the row above)');
      return;
    }
    try {
      const moved = await moveTo(v, ALBANY);
      const again = await call(v.person, 'POST', start, {});
      const body = again.body as { resumed?: boolean; segment?: { encounter?: string; status?: string } } | undefined;
      row(
        steps.resumed,
        again.status === 200 && body?.resumed === true && body.segment?.encounter === segment ? 'ok' : 'FAILED',
        `${moved}; POST ${start}: ${said(again)}${again.status < 300 ? `, ${body?.segment?.encounter} ${body?.segment?.status}, resumed ${body?.resumed}` : ''}`,
      );
    } catch (err) {
      row(steps.resumed, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  await rescheduling();
  await starting();
}
