import type { Bundle, Resource } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { createPatientCareClient } from '../../src/sdk';
import {
  type Answer,
  type AttackContext,
  answerOf,
  DAY,
  describe,
  entriesOf,
  errorOf,
  type GatewayAnswer,
  gatewayDescribe,
  message,
  type Person,
  PUBLIC_URL,
  RXNORM,
  register,
  row,
} from './common';
import { type MadeCall, N_GATEWAYS, withoutRequestIds } from './gateways';

/**
 * What the patient bots bound, on a real Medplum: the daily cap of POST /v1/requests (request-review,
 * `REQUESTS_PER_DAY`, its `authoredon`/`authored` searches) and the days view of GET /v1/availability
 * (read in start order, `inStartOrder`) against the slots view paged to its end.
 */
export async function patientBounds(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const call = async (
    person: Person,
    method: string,
    path: string,
    body?: unknown,
    through: typeof fetch = ctx.gatewayFetch,
  ): Promise<GatewayAnswer> => {
    const response = await through(`${PUBLIC_URL}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${person.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { ...(await answerOf(response)), retryAfter: response.headers.get('retry-after') };
  };

  // 1. The daily cap: bob (no request of his before) opens 10 distinct ones, the 11th is 429, the first again 200.
  // N gateways (c): his requests go through the instances in turn (the 1st through A, the 2nd through B, ...,
  // 5 each), the 11th through A, then again through B: the cap is counted in Medplum, not per instance.
  const bob = people.get('bob');
  const LIMIT = 10;
  const codes = Array.from({ length: LIMIT + 1 }, (_, i) => String(900000 + i));
  const medication = (code: string) => ({ medication: `${RXNORM}|${code}` });
  const instanceOf = (i: number) => ctx.instances[i % ctx.instances.length];
  const capRows = [
    `requests: bob (Northwind patient) opens ${LIMIT} distinct medication requests (RxNorm ${codes[0]}..${codes[LIMIT - 1]}, POST /v1/requests), each 201`,
    `requests: bob's 11th distinct request (RxNorm ${codes[LIMIT]}) is 429 rate_limited with Retry-After, details.retryAfter and details.limit ${LIMIT}`,
    `${N_GATEWAYS} (c): request caps across instances: bob's ${LIMIT} requests went through instances A and B in turn (neither saw ${LIMIT}); his 11th distinct request, refused through ${instanceOf(LIMIT).name}, made again through the other instance, ${instanceOf(LIMIT + 1).name}: refused the same (429 rate_limited, the same message, details.limit ${LIMIT}, Retry-After within 5 s of the first refusal's); his proposals, read by the admin, still ${LIMIT}`,
    `requests: bob asks again for his first (RxNorm ${codes[0]}), open: 200, the same request`,
    "requests: the refused 11th wrote nothing (bob's proposals, read by the admin)",
  ];
  const countProposals = async (person: Person) => {
    const counted = await ctx.adminGet(
      `fhir/R4/MedicationRequest?subject=${person.profile}&intent=proposal&authoredon=ge${new Date(Date.now() - DAY).toISOString()}&_summary=count`,
    );
    return { counted, total: (counted.body as Bundle | undefined)?.total };
  };
  if (!bob) {
    for (const step of capRows) {
      row(step, 'not reached', 'bob could not sign in');
    }
  } else {
    let first: GatewayAnswer | undefined;
    try {
      const answers: GatewayAnswer[] = [];
      for (const [i, code] of codes.slice(0, LIMIT).entries()) {
        answers.push(await call(bob, 'POST', '/v1/requests', medication(code), instanceOf(i).fetch));
      }
      first = answers[0];
      const wrong = answers.findIndex(
        (a) => a.status !== 201 || !/^MedicationRequest\//.test(String((a.body as { request?: string })?.request)),
      );
      const through = ctx.instances
        .map((instance) => `${answers.filter((_, i) => instanceOf(i) === instance).length} through ${instance.name}`)
        .join(', ');
      row(
        capRows[0],
        wrong === -1 ? 'ok' : 'FAILED',
        wrong === -1
          ? `10 x 201 (${through}, in turn), each a MedicationRequest and its review Task (the first ${(first.body as { request?: string }).request})`
          : `statuses ${answers.map((a) => a.status).join(', ')}; request ${wrong + 1} (RxNorm ${codes[wrong]}, through ${instanceOf(wrong).name}): ${gatewayDescribe(answers[wrong])}`,
      );
    } catch (err) {
      row(capRows[0], 'FAILED', `the call threw: ${message(err)}`);
    }
    let over: GatewayAnswer | undefined;
    try {
      over = await call(bob, 'POST', '/v1/requests', medication(codes[LIMIT]), instanceOf(LIMIT).fetch);
      const error = errorOf(over);
      const header = Number(over.retryAfter);
      const retryAfter = error.details?.retryAfter;
      const good =
        over.status === 429 &&
        error.code === 'rate_limited' &&
        Number.isInteger(header) &&
        header > 0 &&
        header <= 86_400 &&
        typeof retryAfter === 'number' &&
        retryAfter > 0 &&
        error.details?.limit === LIMIT;
      row(
        capRows[1],
        good ? 'ok' : 'FAILED',
        `expected 429 rate_limited, Retry-After 1..86400, details {retryAfter, limit: ${LIMIT}}; got ${gatewayDescribe(over)} through ${instanceOf(LIMIT).name}, Retry-After ${over.retryAfter ?? 'absent'}, error.code ${error.code ?? 'absent'}, details ${JSON.stringify(error.details ?? null)}`,
      );
    } catch (err) {
      row(capRows[1], 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const other = instanceOf(LIMIT + 1);
      const again = await call(bob, 'POST', '/v1/requests', medication(codes[LIMIT]), other.fetch);
      const [a, b] = [errorOf(over ?? again), errorOf(again)];
      const { counted, total } = await countProposals(bob);
      const secondsApart = Math.abs(Number(a.details?.retryAfter) - Number(b.details?.retryAfter));
      const good =
        over?.status === 429 &&
        again.status === 429 &&
        b.code === 'rate_limited' &&
        b.code === a.code &&
        b.message === a.message &&
        b.details?.limit === LIMIT &&
        a.details?.limit === LIMIT &&
        Number.isInteger(Number(again.retryAfter)) &&
        Number(again.retryAfter) > 0 &&
        secondsApart <= 5 &&
        counted.status === 200 &&
        total === LIMIT;
      row(
        capRows[2],
        good ? 'ok' : 'FAILED',
        `through ${instanceOf(LIMIT).name}: ${over ? `${gatewayDescribe(over)}, "${a.message ?? ''}" details ${JSON.stringify(withoutRequestIds(a.details ?? null))}` : 'no answer'}; through ${other.name}: ${gatewayDescribe(again)}, Retry-After ${again.retryAfter ?? 'absent'}, "${b.message ?? ''}" details ${JSON.stringify(withoutRequestIds(b.details ?? null))} (retryAfter ${secondsApart} s apart); his proposals authored in the last day, as the admin counts them: ${counted.status === 200 ? total : describe(counted)}`,
      );
    } catch (err) {
      row(capRows[2], 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const again = await call(bob, 'POST', '/v1/requests', medication(codes[0]));
      const was = (first?.body as { request?: string; task?: string } | undefined) ?? {};
      const now = (again.body as { request?: string; task?: string } | undefined) ?? {};
      const same =
        again.status === 200 && now.request !== undefined && now.request === was.request && now.task === was.task;
      row(
        capRows[3],
        same ? 'ok' : 'FAILED',
        `expected 200 with ${was.request ?? 'the first answer'} and ${was.task ?? 'its Task'}; got ${gatewayDescribe(again)}${again.status < 300 ? `, ${now.request} and ${now.task}` : ''}`,
      );
    } catch (err) {
      row(capRows[3], 'FAILED', `the call threw: ${message(err)}`);
    }
    const { counted, total } = await countProposals(bob);
    row(
      capRows[4],
      counted.status === 200 && total === LIMIT ? 'ok' : 'FAILED',
      `expected ${LIMIT} MedicationRequest proposals of ${bob.profile} authored in the last day; got ${counted.status === 200 ? total : describe(counted)}`,
    );
  }

  // 2. The days view against the slots view: alice (Northwind, California), the Northwind visit team, 14 days.
  const alice = people.get('alice');
  const step =
    'availability: alice (Northwind, CA), the Northwind visit team, the next 14 days: the days view (America/Los_Angeles) sums to the slots view paged to its end';
  const team = entriesOf(
    (await ctx.adminGet(`fhir/R4/CareTeam?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|visit-team-northwind`)}`))
      .body,
  )[0];
  if (!alice || !team?.id) {
    row(step, 'not reached', !alice ? 'alice could not sign in' : 'no CareTeam tagged visit-team-northwind');
    return;
  }
  try {
    const now = new Date();
    const window = {
      careTeam: `CareTeam/${team.id}`,
      start: now.toISOString(),
      end: new Date(now.getTime() + 14 * DAY).toISOString(),
    };
    const t0 = Date.now();
    const days = await call(
      alice,
      'GET',
      `/v1/availability?${new URLSearchParams({ ...window, view: 'days', timezone: 'America/Los_Angeles' })}`,
    );
    const daysMs = Date.now() - t0;
    const dayList = (days.body as { days?: { date: string; count: number }[] } | undefined)?.days ?? [];
    const daySum = dayList.reduce((sum, d) => sum + d.count, 0);
    // materialize-slots' one run at provisioning makes the soonest Slots only (SLOTS_PER_RUN): the later dates are 0.
    const withSlots = dayList.filter((d) => d.count > 0);
    const ids = new Set<string>();
    let listed = 0;
    let pages = 0;
    let inOrder = true;
    let lastStart = '';
    let cursor: string | undefined;
    let pageError: GatewayAnswer | undefined;
    const t1 = Date.now();
    do {
      const page = await call(
        alice,
        'GET',
        `/v1/availability?${new URLSearchParams({ ...window, view: 'slots', count: '200', ...(cursor ? { cursor } : {}) })}`,
      );
      pages++;
      if (page.status !== 200) {
        pageError = page;
        break;
      }
      const body = page.body as { slots?: { slot: string; start: string }[]; next?: string };
      for (const slot of body.slots ?? []) {
        listed++;
        ids.add(slot.slot);
        inOrder &&= Date.parse(slot.start) >= Date.parse(lastStart || slot.start);
        lastStart = slot.start;
      }
      cursor = body.next;
    } while (cursor && pages < 100);
    const slotsMs = Date.now() - t1;
    const good =
      days.status === 200 && !pageError && !cursor && daySum === listed && listed === ids.size && listed > 0 && inOrder;
    row(
      step,
      good ? 'ok' : 'FAILED',
      days.status !== 200
        ? `the days view: ${gatewayDescribe(days)}`
        : pageError
          ? `the slots view, page ${pages}: ${gatewayDescribe(pageError)}`
          : `days view: ${daySum} slots over ${dayList.length} dates, ${withSlots.length} of them with slots (${withSlots[0]?.date ?? '-'}..${withSlots.at(-1)?.date ?? '-'}) (${daysMs} ms); slots view: ${listed} slots (${ids.size} distinct${inOrder ? ', in start order' : ', NOT in start order'}) in ${pages} page(s) of at most 200 (${slotsMs} ms)${cursor ? ', still a next cursor after 100 pages' : ''}${daySum === listed ? '' : `; MISMATCH of ${daySum - listed}`}`,
    );
  } catch (err) {
    row(step, 'FAILED', `the call threw: ${message(err)}`);
  }
}

/**
 * What the service needs of her, an address with a country and a state, is
 * asked for; an answer that depends on it says what is missing and how to give it. A new Northwind patient,
 * homed, her Patient as Medplum's registration leaves it (a name, no address), through the in-process
 * gateway on this Medplum: GET /v1/protocols withholds the area-limited offerings and says so
 * (`incomplete`), GET /v1/availability (the availability bot) is 409 invalid_state naming the missing
 * fields; once she PUTs her address, both answer in full.
 */
export async function addressNeeded(ctx: AttackContext): Promise<void> {
  const steps = [
    "address: a new Northwind patient, registered through Northwind's app and homed, her Patient with no address (as Medplum's registration leaves it): GET /v1/protocols is 200 with incomplete {missing: [Patient.address[0].country, Patient.address[0].state], withheld > 0, fix: 'PUT /v1/fhir/Patient/<her id>'}",
    'address: her GET /v1/availability (the Northwind visit team, the next 7 days) is 409 invalid_state with details.missing (country, state) and the same fix',
    'address: once she PUTs her address (US, CA) through the gateway, GET /v1/protocols answers in full (no incomplete, the withheld offerings listed) and GET /v1/availability is 200',
  ];
  const team = entriesOf(
    (await ctx.adminGet(`fhir/R4/CareTeam?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|visit-team-northwind`)}`))
      .body,
  )[0];
  let person: Person;
  let patientId: string;
  try {
    person = await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'));
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    patientId = home.patient.split('/')[1];
  } catch (err) {
    row(steps[0], 'FAILED', `the precondition threw: ${message(err)}`);
    row(steps[1], 'not reached', 'no patient (the row above)');
    row(steps[2], 'not reached', 'no patient (the row above)');
    return;
  }
  const call = async (method: string, path: string, body?: unknown): Promise<Answer> =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${person.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const me = `/v1/fhir/Patient/${patientId}`;
  const fix = `PUT ${me}`;
  const missing = ['Patient.address[0].country', 'Patient.address[0].state'];
  const sameList = (a: unknown, b: string[]) => JSON.stringify(a) === JSON.stringify(b);
  const now = Date.now();
  const availabilityPath = `/v1/availability?${new URLSearchParams({
    careTeam: `CareTeam/${team?.id}`,
    start: new Date(now).toISOString(),
    end: new Date(now + 7 * DAY).toISOString(),
  })}`;
  type Protocols = { protocols?: unknown[]; incomplete?: { missing?: unknown; withheld?: number; fix?: string } };
  let listed = 0;
  let withheld = 0;
  try {
    const stored = (await ctx.adminGet(`fhir/R4/Patient/${patientId}`)).body as { address?: unknown[] } | undefined;
    const partial = await call('GET', '/v1/protocols');
    const body = partial.body as Protocols | undefined;
    listed = body?.protocols?.length ?? 0;
    withheld = body?.incomplete?.withheld ?? 0;
    const good =
      (stored?.address ?? []).length === 0 &&
      partial.status === 200 &&
      sameList(body?.incomplete?.missing, missing) &&
      withheld > 0 &&
      body?.incomplete?.fix === fix;
    row(
      steps[0],
      good ? 'ok' : 'FAILED',
      `Patient/${patientId}, ${(stored?.address ?? []).length} address(es) as the admin reads her; GET /v1/protocols: ${gatewayDescribe(partial)}, ${listed} offering(s), incomplete ${JSON.stringify(body?.incomplete ?? null)}`,
    );
  } catch (err) {
    row(steps[0], 'FAILED', `the call threw: ${message(err)}`);
  }
  if (!team?.id) {
    row(steps[1], 'not reached', 'no CareTeam tagged visit-team-northwind');
  } else {
    try {
      const refused = await call('GET', availabilityPath);
      const error = errorOf(refused);
      const good =
        refused.status === 409 &&
        error.code === 'invalid_state' &&
        sameList(error.details?.missing, missing) &&
        error.details?.fix === fix;
      row(
        steps[1],
        good ? 'ok' : 'FAILED',
        `expected 409 invalid_state, details {missing: ${JSON.stringify(missing)}, fix: '${fix}'}; got ${gatewayDescribe(refused)}, error ${JSON.stringify({ code: error.code, message: error.message, details: error.details })}`,
      );
    } catch (err) {
      row(steps[1], 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  try {
    const read = await call('GET', me);
    const written = await call('PUT', me, {
      ...(read.body as Resource),
      address: [{ line: ['9 Address Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const full = await call('GET', '/v1/protocols');
    const body = full.body as Protocols | undefined;
    const served = team?.id ? await call('GET', availabilityPath) : undefined;
    const slots = (served?.body as { slots?: unknown[] } | undefined)?.slots;
    const good =
      written.status === 200 &&
      full.status === 200 &&
      body?.incomplete === undefined &&
      (body?.protocols?.length ?? 0) === listed + withheld &&
      served?.status === 200;
    row(
      steps[2],
      good ? 'ok' : 'FAILED',
      `her PUT ${me}: ${gatewayDescribe(written)}; GET /v1/protocols: ${gatewayDescribe(full)}, ${body?.protocols?.length ?? 0} offering(s) (${listed} + ${withheld} withheld before), incomplete ${JSON.stringify(body?.incomplete ?? null)}; GET /v1/availability: ${served ? `${gatewayDescribe(served)}${slots ? `, ${slots.length} slot(s)` : ''}` : 'not asked (no visit team)'}`,
    );
  } catch (err) {
    row(steps[2], 'FAILED', `the call threw: ${message(err)}`);
  }
  await enrollmentRepeats(ctx, person);
}

/**
 * The new patient of `addressNeeded` (homed, with her address) enrolls in Northwind's
 * monitoring program, activates it and unenrolls, through the gateway; after each step the same call is
 * made again (`repeats`): answered from her own reads, no bot run, as the enrollment bot answers it now.
 */
export async function enrollmentRepeats(ctx: AttackContext, person: Person): Promise<void> {
  const step = 'repeat: her enrollment, activation and unenrollment, each made again';
  const made: MadeCall[] = [];
  const recording = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (new URL(request.url).pathname.startsWith('/v1/enrollments')) {
      made.length = 0;
      made.push({
        method: request.method,
        url: request.url,
        authorization: request.headers.get('authorization') ?? '',
        body: await request.clone().text(),
      });
    }
    return ctx.gatewayFetch(request);
  }) as typeof fetch;
  try {
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: recording });
    const { protocols } = await api.protocols.list();
    const program = protocols.find(
      (p) => p.type === 'program' && p.protocol.includes('programs/blood-pressure-monitoring'),
    );
    if (!program) {
      row(step, 'FAILED', 'no blood-pressure monitoring program among her offerings');
      return;
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: program.healthcareService });
    if (unmet.length > 0) {
      await api.agreements.accept(unmet);
    }
    const { carePlan } = await api.enrollments.create({ healthcareService: program.healthcareService });
    await ctx.repeat(made);
    await api.enrollments.activate(carePlan);
    await ctx.repeat(made);
    await api.enrollments.delete(carePlan);
    await ctx.repeat(made);
  } catch (err) {
    row(step, 'FAILED', `the call threw: ${message(err)}`);
  }
}
