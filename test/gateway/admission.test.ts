import type { Consent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { DEFAULT_LIMITS } from '../../src/app';
import { createCaller, startTestGateway, type TestGateway, testApp } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * Admission before work (issue 24, src/edge/admission.ts): a caller's calls in flight are bounded, and
 * so are everyone's; past her own limit the answer is immediate (429 with Retry-After), past everyone's
 * a call waits for a place (issue 50; a wait that finds none in time is 503), never an outage.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ limits: { ...DEFAULT_LIMITS, inFlightPerCaller: 8, inFlightTotal: 24 } });
});
afterAll(() => gw?.close());

describe('admission', () => {
  it('1,000 concurrent acceptances from one token: the flood gets 429s, exactly one effect, other patients keep being served', async () => {
    const flooder = await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' });
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: flooder.token });
    const unmet = (requirements.body as { unmet: { url: string; version: string }[] }).unmet;
    const coordinates = unmet.map((u) => `${u.url}|${u.version}`);
    const flood = Array.from({ length: 1000 }, () =>
      gw.call('POST', '/v1/agreements/acceptances', {
        token: flooder.token,
        body: { agreements: coordinates },
        headers: { 'content-type': 'application/json' },
      }),
    );
    // While the flood is in flight, another patient reads her profile and her requirements.
    const others = await Promise.all(
      ['alice', 'carol'].flatMap((key) => [
        gw.call('GET', '/v1/patient/profile', { token: gw.backend.patients[key].token }),
        gw.call('GET', '/v1/agreements/requirements', { token: gw.backend.patients[key].token }),
      ]),
    );
    const answers = await Promise.all(flood);
    expect(others.map((o) => o.status)).toEqual([200, 200, 200, 200]);
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(new Set(statuses)).toEqual(new Set([200, 429]));
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(1000 - 900);
    const refused = answers.find((a) => a.status === 429);
    expect(refused?.body).toMatchObject({ error: { code: 'rate_limited', details: { inFlightLimit: 8 } } });
    expect(refused?.headers.get('retry-after')).toBe('1');
    expect(refused?.headers.get('ratelimit')).toBe('"inflight-caller";r=0;t=1');
    // Exactly one effect: one acceptance of each agreement, whatever got through.
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${flooder.patient.id}` }],
    });
    expect(consents).toHaveLength(unmet.length);
    // And once the flood has passed, she is served again.
    const after = await gw.call('GET', '/v1/agreements/requirements', { token: flooder.token });
    expect(after.status).toBe(200);
    expect((after.body as { satisfied: boolean }).satisfied).toBe(true);
  });

  it('beyond the instance’s capacity calls wait for a place instead of failing (none 503); past her limit, 429 at once with Retry-After', async () => {
    const patients = await Promise.all(
      Array.from({ length: 6 }, () => freshPatient(gw.backend, { tenant: 'southridge', state: 'TX' })),
    );
    // Six callers, nine calls each, against 24 places: every caller's first eight are served (in flight
    // or waiting for a place), a ninth sent while eight are still in flight is over her limit.
    const answers = await Promise.all(
      patients.flatMap((p) =>
        Array.from({ length: 9 }, () => gw.call('GET', '/v1/agreements/requirements', { token: p.token })),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(6 * 8);
    for (const refused of answers.filter((a) => a.status !== 200)) {
      expect(refused.body).toMatchObject({ error: { code: 'rate_limited', details: { inFlightLimit: 8 } } });
      expect(refused.headers.get('retry-after')).toBe('1');
    }
  });
});

describe('around the gateway', () => {
  it('1,000 concurrent acceptances straight at the embedded Medplum ($execute): answered or 429 at once, one effect, the server goes on', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' });
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    const unmet = (requirements.body as { unmet: { url: string; version: string }[] }).unmet;
    const agreements = unmet.map((u) => `${u.url}|${u.version}`);
    const execute = () =>
      gw.backend.fetch(
        new URL(`fhir/R4/Bot/$execute?identifier=${SYSTEMS.bots}|accept-agreements`, gw.backend.baseUrl),
        {
          method: 'POST',
          headers: { authorization: `Bearer ${patient.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ agreements }),
        },
      );
    const answers = await Promise.all(Array.from({ length: 1000 }, execute));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(consents).toHaveLength(unmet.length);
    const after = await gw.call('GET', '/v1/patient/profile', { token: gw.backend.patients.alice.token });
    expect(after.status).toBe(200);
  });
});

describe('calls in flight at Medplum (issue 50 item 4)', () => {
  it('an instance bounded to two calls at Medplum: a crowd keeping dozens of calls going never has more there, every call is answered, and her one read goes before the crowd’s waiting calls', async () => {
    // Medplum held shut until the test opens it: the crowd's first two calls take the two places and the
    // rest of theirs queue behind them; nothing is freed while she joins the queue (no timing to win).
    let inFlight = 0;
    let most = 0;
    const sent: string[] = [];
    let open: () => void = () => {};
    let opened: Promise<void> = Promise.resolve();
    const shut = () => {
      opened = new Promise<void>((resolve) => {
        open = resolve;
      });
    };
    const held = (async (input: RequestInfo | URL, init?: RequestInit) => {
      inFlight++;
      most = Math.max(most, inFlight);
      const url = input instanceof Request ? input.url : input.toString();
      sent.push(url);
      try {
        await opened;
        await new Promise((r) => setTimeout(r, 2));
        return await gw.backend.fetch(input, init);
      } finally {
        inFlight--;
      }
    }) as typeof fetch;
    const app = testApp(gw.backend, {
      medplum: { baseUrl: gw.backend.baseUrl, fetch: held },
      limits: { ...DEFAULT_LIMITS, medplumInFlight: 2 },
    });
    const call = createCaller(app, gw.doc, () => gw.backend.patients.alice.token);
    const crowd = await Promise.all(
      Array.from({ length: 4 }, () => freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' })),
    );
    const her = gw.backend.patients.carol;
    // What every caller's call shares (the catalog, read once for all) is read before Medplum is shut.
    expect((await call('GET', '/v1/agreements/requirements', { token: crowd[0].token })).status).toBe(200);
    sent.length = 0;
    most = 0;
    shut();
    const flood = crowd.flatMap((p) =>
      Array.from({ length: 8 }, () => call('GET', '/v1/agreements/requirements', { token: p.token })),
    );
    while (sent.length < 2) {
      await new Promise((r) => setTimeout(r, 1));
    }
    // The two places taken, she reads her profile; a second is ample for her call to reach the queue
    // (it waits there however long it takes: the assertion is on order, never on time).
    const reading = call('GET', '/v1/patient/profile', { token: her.token });
    await new Promise((r) => setTimeout(r, 1000));
    const before = sent.length;
    expect(before).toBe(2);
    open();
    const profile = await reading;
    const answers = await Promise.all(flood);
    expect(profile.status).toBe(200);
    expect(answers.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
    expect(most).toBe(2);
    // Her read was sent within the next two places freed, not after the crowd's 30 waiting calls.
    const hers = sent.findIndex((url) => url.includes(`/Patient/${her.patient.id}`));
    expect(hers).toBeGreaterThanOrEqual(before);
    expect(hers - before).toBeLessThanOrEqual(1);
    expect(sent.length - hers).toBeGreaterThan(20);
  });
});
