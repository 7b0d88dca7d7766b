import type { Communication } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clinician } from '../../src/clinician';
import { direct, executeBot, fhirPath } from '../support/attack';
import { storedResources } from '../support/attack-store';
import type { DemoActor } from '../support/backend';
import { demoClinician, freshClinician, intakeQueue } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * Her messages with her care team (issue 48 item 8): threads as Medplum's Provider app writes them (a
 * header Communication with no `partOf`, messages `partOf` it), read and answered by the patient through
 * the gateway (GET /v1/messages, POST /v1/messages/{id}: bots/send-message.ts), by the clinician with plain
 * FHIR as the app does; and what neither may do, through the gateway and straight at Medplum.
 */
let gw: TestGateway;
let clinician: Clinician;
let outsider: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  outsider = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

const her = (patient: DemoActor) => ({ reference: `Patient/${patient.patient.id}` });

/** A thread the clinician opens from the app's Messages (NewTopicDialog), and her first message in it (ThreadChat). */
async function openThread(patient: DemoActor, text: string, by: Clinician = clinician): Promise<Communication> {
  const me = { reference: by.profile.reference as string, display: by.profile.display };
  const header = await by.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    subject: her(patient),
    sender: me,
    recipient: [her(patient), me],
    topic: { text: 'Your blood pressure readings' },
  });
  await say(header, text, by);
  return header;
}

/** A message in a thread as the app sends it: to the thread's participants but herself, then the header's `sent` touched. */
async function say(header: Communication, text: string, by: Clinician = clinician): Promise<Communication> {
  const sent = new Date().toISOString();
  const message = await by.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    sender: { reference: by.profile.reference as string, display: by.profile.display },
    recipient: (header.recipient ?? []).filter((r) => r.reference !== by.profile.reference),
    sent,
    payload: [{ contentString: text }],
    partOf: [{ reference: `Communication/${header.id}` }],
    subject: header.subject,
  });
  await by.medplum.patchResource('Communication', header.id as string, [{ op: 'add', path: '/sent', value: sent }]);
  return message;
}

/** What stays the clinic's: the app's timeline comment about her (to nobody), and a thread about her between clinicians. */
async function internalOnes(patient: DemoActor, text: string) {
  const me = { reference: clinician.profile.reference as string };
  const comment = await clinician.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'completed',
    subject: her(patient),
    sender: me,
    sent: new Date().toISOString(),
    payload: [{ contentString: text }],
  });
  const internal = await clinician.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    subject: her(patient),
    sender: me,
    recipient: [me],
  });
  return { comment, internal };
}

const send = (patient: DemoActor, thread: string, body: unknown, key?: string) =>
  gw.call('POST', `/v1/messages/${thread}`, {
    token: patient.token,
    body,
    headers: key ? { 'idempotency-key': key } : {},
  });

const messagesIn = (threadId: string): Communication[] =>
  (storedResources(gw.backend, 'Communication') as Communication[]).filter((c) =>
    c.partOf?.some((p) => p.reference === `Communication/${threadId}`),
  );

describe('messages both ways', () => {
  it('her care team writes in the Provider app; she reads it, hears of it and answers through the gateway; the clinician reads her answer', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'Your readings look high: how do you feel in the mornings?');

    const list = await gw.call('GET', '/v1/messages', { token: patient.token });
    expect(list.status).toBe(200);
    const threads = (
      list.body as {
        threads: {
          thread: string;
          status: string;
          topic?: string;
          lastMessage?: { text: string; fromMe: boolean; from: { reference: string } };
        }[];
      }
    ).threads;
    expect(threads).toHaveLength(1);
    expect(threads[0]).toMatchObject({
      thread: `Communication/${header.id}`,
      status: 'open',
      topic: 'Your blood pressure readings',
      lastMessage: {
        text: 'Your readings look high: how do you feel in the mornings?',
        fromMe: false,
        from: { reference: clinician.profile.reference },
      },
    });

    // Her feed says her care team wrote to her.
    const events = await gw.call('GET', '/v1/events', { token: patient.token });
    expect(events.status).toBe(200);
    const received = (events.body as { events: { type: string; subject: string }[] }).events.filter(
      (e) => e.type === 'message.received',
    );
    expect(received).toHaveLength(1);
    expect(received[0].subject).toMatch(/^Communication\//);

    // She answers, with an Idempotency-Key: a retry answers the same message and writes no second one.
    const answer = await send(
      patient,
      header.id as string,
      { text: 'A little dizzy, mostly before breakfast.' },
      'reply-1',
    );
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({ fromMe: true, text: 'A little dizzy, mostly before breakfast.' });
    const again = await send(
      patient,
      header.id as string,
      { text: 'A little dizzy, mostly before breakfast.' },
      'reply-1',
    );
    expect(again.status).toBe(201);
    expect(again.body).toEqual(answer.body);
    expect(messagesIn(header.id as string)).toHaveLength(2);

    // The thread, oldest first.
    const page = await gw.call('GET', `/v1/messages/${header.id}`, { token: patient.token });
    expect(page.status).toBe(200);
    expect(
      (page.body as { messages: { text: string; fromMe: boolean }[] }).messages.map((m) => [m.fromMe, m.text]),
    ).toEqual([
      [false, 'Your readings look high: how do you feel in the mornings?'],
      [true, 'A little dizzy, mostly before breakfast.'],
    ]);

    // The clinician reads it as the app does (its thread, newest first), from her patient, to her.
    const inApp = await clinician.medplum.searchResources(
      'Communication',
      { 'part-of': `Communication/${header.id}`, _sort: '-sent', 'sent:missing': 'false' },
      { cache: 'no-cache' },
    );
    expect(inApp[0]).toMatchObject({
      sender: { reference: `Patient/${patient.patient.id}` },
      recipient: [{ reference: clinician.profile.reference }],
      subject: { reference: `Patient/${patient.patient.id}` },
      payload: [{ contentString: 'A little dizzy, mostly before breakfast.' }],
    });
    expect(inApp[0].meta?.accounts).toEqual([patient.patient.managingOrganization]);
    // Her answer touched the thread (the app lists threads by when their header last changed).
    const touched = await clinician.medplum.readResource('Communication', header.id as string, { cache: 'no-cache' });
    expect(touched.sent).toBe(inApp[0].sent);
    // The app's read receipt (a thread of two): the clinician marks her message received.
    const receipt = await direct(
      gw.backend,
      clinician.medplum.getAccessToken() as string,
      'PUT',
      fhirPath(`Communication/${inApp[0].id}`),
      {
        body: { ...inApp[0], received: new Date().toISOString(), status: 'completed' },
      },
    );
    expect(receipt.status).toBe(200);
  });

  // The app's thread list is a reverse chain (`_has:Communication:part-of:_id:not=null`), which Medplum answers
  // (packages/server/src/fhir/search.ts, the `_has:` filter; packages/core/src/search/search.ts parses it)
  // and the embedded Medplum answers with the caller's own access (src/embedded/store/search.ts reverseChainIds).
  it('lists her thread in the Provider app’s Messages (its search of threads with messages), for her tenant’s clinicians only', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'Listed?');
    // A thread opened and never written in is not listed (the app's rule), nor a message itself.
    const empty = await clinician.medplum.createResource<Communication>({
      resourceType: 'Communication',
      status: 'in-progress',
      subject: her(patient),
      sender: { reference: clinician.profile.reference as string },
      recipient: [her(patient), { reference: clinician.profile.reference as string }],
    });
    const threads = (by: Clinician) =>
      by.medplum.searchResources(
        'Communication',
        `_sort=-_lastUpdated&status=in-progress&_count=100&identifier:not=http://medplum.com/ai-message|&part-of:missing=true&_has:Communication:part-of:_id:not=null&patient=Patient/${patient.patient.id}`,
        { cache: 'no-cache' },
      );
    const ids = (await threads(clinician)).map((c) => c.id);
    expect(ids).toContain(header.id);
    expect(ids).not.toContain(empty.id);
    expect((await threads(outsider)).map((c) => c.id)).toEqual([]);
  });

  // Medplum checks the author's read access before each WebSocket notification, never for a rest-hook
  // (packages/server/src/workers/subscription.ts satisfiesAccessPolicy, 5.1.29): hence websocket only.
  it('lets a clinician ask for live updates of a thread as the app does (a WebSocket Subscription), and nothing else of Subscriptions', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'Live?');
    const subscription = (criteria: string, channel: Record<string, unknown> = { type: 'websocket' }) => ({
      resourceType: 'Subscription',
      status: 'active',
      reason: 'live updates',
      criteria,
      channel,
    });
    const create = (token: string, body: unknown) =>
      direct(gw.backend, token, 'POST', fhirPath('Subscription'), { body });
    const own = clinician.medplum.getAccessToken() as string;
    // What the app's chat and its counters ask for.
    expect((await create(own, subscription(`Communication?part-of=Communication/${header.id}`))).status).toBe(201);
    expect((await create(own, subscription(`Task?owner=${clinician.profile.reference}&status=ready`))).status).toBe(
      201,
    );
    // Not a rest-hook (Medplum would post whatever matches, unchecked), not another type, not by a patient.
    for (const refused of [
      subscription('Communication?part-of=Communication/x', {
        type: 'rest-hook',
        endpoint: 'https://attacker.example/',
      }),
      subscription('Patient?_id=x'),
      subscription('Observation'),
    ]) {
      expect((await create(own, refused)).status).toBe(403);
    }
    expect((await create(patient.token, subscription(`Communication?part-of=Communication/${header.id}`))).status).toBe(
      403,
    );
  });

  it('keeps a clinician’s internal comment and a thread between clinicians internal', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const { comment, internal } = await internalOnes(patient, 'Consider a home BP cuff check at the next visit.');
    for (const id of [comment.id, internal.id]) {
      expect(
        (await direct(gw.backend, patient.token, 'GET', fhirPath(`Communication/${id}`))).status,
      ).toBeGreaterThanOrEqual(403);
      expect((await gw.call('GET', `/v1/messages/${id}`, { token: patient.token })).status).toBe(404);
      expect((await send(patient, id as string, { text: 'hello' })).status).toBe(404);
    }
    const search = await direct(
      gw.backend,
      patient.token,
      'GET',
      fhirPath(`Communication?subject=Patient/${patient.patient.id}`),
    );
    expect((search.body as { entry?: unknown[] }).entry ?? []).toHaveLength(0);
    expect(
      ((await gw.call('GET', '/v1/messages', { token: patient.token })).body as { threads: unknown[] }).threads,
    ).toEqual([]);
  });

  it('refuses another patient, both ways: no read of her thread, no answer in it, no message of his own into it', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'Private to her');
    const before = messagesIn(header.id as string).length;
    expect((await gw.call('GET', `/v1/messages/${header.id}`, { token: other.token })).status).toBe(404);
    expect((await send(other, header.id as string, { text: 'Injected' })).status).toBe(404);
    expect(
      (await direct(gw.backend, other.token, 'GET', fhirPath(`Communication/${header.id}`))).status,
    ).toBeGreaterThanOrEqual(403);
    // Straight at Medplum: the bot with another's thread, and a Communication written by himself.
    const run = await executeBot(gw.backend, other.token, 'send-message', {
      value: { thread: header.id, text: 'Injected' },
    });
    expect(run.body).toMatchObject({ ok: false, error: { status: 404 } });
    const written = await direct(gw.backend, other.token, 'POST', fhirPath('Communication'), {
      body: {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: her(other),
        sender: her(other),
        sent: new Date().toISOString(),
        partOf: [{ reference: `Communication/${header.id}` }],
        payload: [{ contentString: 'Injected' }],
      },
    });
    expect(written.status).toBe(403);
    // Nor may she write one herself, in her own thread (only the bot sends, having checked it).
    const own = await direct(gw.backend, patient.token, 'POST', fhirPath('Communication'), {
      body: { resourceType: 'Communication', status: 'in-progress', subject: her(patient), sender: her(patient) },
    });
    expect(own.status).toBe(403);
    expect(messagesIn(header.id as string)).toHaveLength(before);
  });

  it('refuses the other tenant’s clinician (read, answer) and a clinician writing in a patient’s name or changing her words', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'How are you?');
    const mine = (await send(patient, header.id as string, { text: 'Fine, thank you.' })).body as { message: string };
    const token = outsider.medplum.getAccessToken() as string;
    expect(
      (await direct(gw.backend, token, 'GET', fhirPath(`Communication/${header.id}`))).status,
    ).toBeGreaterThanOrEqual(403);
    const search = await direct(gw.backend, token, 'GET', fhirPath(`Communication?part-of=Communication/${header.id}`));
    expect((search.body as { entry?: unknown[] }).entry ?? []).toHaveLength(0);
    const intruder = await direct(gw.backend, token, 'POST', fhirPath('Communication'), {
      body: {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: her(patient),
        sender: { reference: outsider.profile.reference },
        recipient: [her(patient)],
        sent: new Date().toISOString(),
        partOf: [{ reference: `Communication/${header.id}` }],
        payload: [{ contentString: 'Sign again at https://attacker.example' }],
      },
    });
    expect(intruder.status).toBe(403);

    const own = clinician.medplum.getAccessToken() as string;
    // Her own clinician cannot write as the patient ...
    const forged = await direct(gw.backend, own, 'POST', fhirPath('Communication'), {
      body: {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: her(patient),
        sender: her(patient),
        recipient: [{ reference: clinician.profile.reference }],
        sent: new Date().toISOString(),
        partOf: [{ reference: `Communication/${header.id}` }],
        payload: [{ contentString: 'I stopped my medication' }],
      },
    });
    expect(forged.status).toBe(403);
    // ... nor change what she said.
    const stored = await clinician.medplum.readReference<Communication>({ reference: mine.message });
    const edited = await direct(gw.backend, own, 'PUT', fhirPath(mine.message), {
      body: { ...stored, payload: [{ contentString: 'I stopped my medication' }] },
    });
    expect(edited.status).toBe(403);
    expect((await gw.call('GET', `/v1/messages/${header.id}`, { token: patient.token })).body).toMatchObject({
      messages: [{ text: 'How are you?' }, { text: 'Fine, thank you.' }],
    });
    // Nor does a message written in another's name count as her care team's: the feed says nothing of it.
    const events = (await gw.call('GET', '/v1/events', { token: patient.token })).body as {
      events: { type: string }[];
    };
    expect(events.events.filter((e) => e.type === 'message.received')).toHaveLength(1);
  });

  it('refuses a colleague who would share another clinician’s internal comment or thread with the patient, or take her out of a thread; the app’s edits of a thread pass', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const colleague = await freshClinician(gw.backend, 'northwind');
    const me = { reference: clinician.profile.reference as string };
    const { comment, internal } = await internalOnes(patient, 'INTERNAL: discuss adherence at the team meeting.');
    const header = await openThread(patient, 'Shared with her');
    const [message] = messagesIn(header.id as string);
    const token = colleague.medplum.getAccessToken() as string;
    const put = (resource: Communication, change: Partial<Communication>) =>
      direct(gw.backend, token, 'PUT', fhirPath(`Communication/${resource.id}`), { body: { ...resource, ...change } });
    // Shared with her by someone else: refused.
    expect((await put(comment, { recipient: [her(patient)], status: 'in-progress' })).status).toBe(403);
    expect((await put(internal, { recipient: [her(patient), me] })).status).toBe(403);
    // Taken out of her thread, or her care team's message to her made to go elsewhere: refused.
    expect((await put(header, { recipient: [me] })).status).toBe(403);
    expect((await put(message, { recipient: [me] })).status).toBe(403);
    expect(
      (await direct(gw.backend, patient.token, 'GET', fhirPath(`Communication/${comment.id}`))).status,
    ).toBeGreaterThanOrEqual(403);
    expect(
      (
        (await gw.call('GET', '/v1/messages', { token: patient.token })).body as { threads: { thread: string }[] }
      ).threads.map((t) => t.thread),
    ).toEqual([`Communication/${header.id}`]);
    // What the app does to a colleague's thread: its topic and clinicians edited, closed.
    const current = await clinician.medplum.readResource('Communication', header.id as string, { cache: 'no-cache' });
    const edited = await put(current, {
      topic: { text: 'Blood pressure, and her new cuff' },
      recipient: [her(patient), me, { reference: colleague.profile.reference as string }],
    });
    expect(edited.status).toBe(200);
    expect((await put(edited.body as Communication, { status: 'completed' })).status).toBe(200);
  });

  it('she writes to her care team: a thread of her own in her tenant’s Messages, answered by a clinician; a retry opens none; the sixth in a day is 429; nobody else reads it', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const start = (body: unknown, key?: string) =>
      gw.call('POST', '/v1/messages', { token: patient.token, body, headers: key ? { 'idempotency-key': key } : {} });
    const opened = await start({ topic: 'My readings', text: 'Above 150 three mornings this week.' }, 'start-1');
    expect(opened.status).toBe(201);
    const view = opened.body as { thread: string; participants: { reference: string }[] };
    const queue = await intakeQueue(gw.backend, 'northwind');
    expect(opened.body).toMatchObject({
      status: 'open',
      topic: 'My readings',
      participants: [{ reference: `Patient/${patient.patient.id}` }, { reference: `CareTeam/${queue.id}` }],
      lastMessage: { text: 'Above 150 three mornings this week.', fromMe: true },
    });
    const again = await start({ topic: 'My readings', text: 'Above 150 three mornings this week.' }, 'start-1');
    expect(again.body).toEqual(opened.body);
    const threadId = view.thread.replace('Communication/', '');
    expect(messagesIn(threadId)).toHaveLength(1);
    // In her tenant's Messages (the app's thread list), not the other tenant's.
    const listed = (by: Clinician) =>
      by.medplum.searchResources(
        'Communication',
        `status=in-progress&part-of:missing=true&_has:Communication:part-of:_id:not=null&patient=Patient/${patient.patient.id}`,
        { cache: 'no-cache' },
      );
    expect((await listed(clinician)).map((c) => c.id)).toEqual([threadId]);
    expect((await listed(outsider)).map((c) => c.id)).toEqual([]);
    // A clinician answers as the app does; she reads it, and hears of it.
    const header = await clinician.medplum.readResource('Communication', threadId, { cache: 'no-cache' });
    await say(header, 'Let us look at them together at your visit.');
    const page = await gw.call('GET', `/v1/messages/${threadId}`, { token: patient.token });
    expect(
      (page.body as { messages: { fromMe: boolean; text: string }[] }).messages.map((m) => [m.fromMe, m.text]),
    ).toEqual([
      [true, 'Above 150 three mornings this week.'],
      [false, 'Let us look at them together at your visit.'],
    ]);
    const events = (await gw.call('GET', '/v1/events', { token: patient.token })).body as {
      events: { type: string }[];
    };
    expect(events.events.filter((e) => e.type === 'message.received')).toHaveLength(1);
    // Nobody else reads it.
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await gw.call('GET', `/v1/messages/${threadId}`, { token: other.token })).status).toBe(404);
    expect(
      (await direct(gw.backend, other.token, 'GET', fhirPath(`Communication/${threadId}`))).status,
    ).toBeGreaterThanOrEqual(403);
    // Bad input changes nothing; five threads a day, the sixth of a day 429.
    for (const body of [
      { text: '  ' },
      { topic: '', text: 'x' },
      { topic: 't'.repeat(121), text: 'x' },
      { text: 'x', thread: threadId },
    ]) {
      expect((await start(body)).status).toBe(400);
    }
    // A thread opened yesterday does not count, however recently it was written in (its own `sent` moves
    // with every message, as the app orders its list by it): opened 25 hours ago, answered just now.
    const opening = messagesIn(threadId).find((m) => m.sender?.reference === `Patient/${patient.patient.id}`);
    expect(opening?.payload?.[0]?.contentString).toBe('Above 150 three mornings this week.');
    const yesterday = new Date(Date.now() - 25 * 3_600_000).toISOString();
    await gw.backend.systemRepo.updateResource<Communication>({ ...(opening as Communication), sent: yesterday });
    const answered = await gw.backend.systemRepo.readResource<Communication>('Communication', threadId);
    await gw.backend.systemRepo.updateResource<Communication>({ ...answered, sent: new Date().toISOString() });
    for (let i = 2; i <= 6; i++) {
      expect((await start({ text: `Question ${i}` })).status).toBe(201);
    }
    const sixth = await start({ text: 'Question 7' });
    expect(sixth.status).toBe(429);
    expect(sixth.body).toMatchObject({ error: { code: 'rate_limited', details: { limit: 5 } } });
    expect(sixth.headers.get('retry-after')).toMatch(/^[0-9]+$/);
    const hers = (storedResources(gw.backend, 'Communication') as Communication[]).filter(
      (c) => c.sender?.reference === `Patient/${patient.patient.id}` && !c.partOf,
    );
    expect(hers).toHaveLength(6);
  });

  it('answers a closed thread 409 and bad text 400, writing nothing', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const header = await openThread(patient, 'Anything else?');
    for (const body of [
      { text: '   ' },
      { text: 'x'.repeat(4001) },
      { text: 'bell\u0007' },
      {},
      { text: 'hi', thread: 'x' },
    ]) {
      expect((await send(patient, header.id as string, body)).status).toBe(400);
    }
    expect((await send(patient, 'no-such-thread', { text: 'hi' })).status).toBe(404);
    const current = await clinician.medplum.readResource('Communication', header.id as string, { cache: 'no-cache' });
    await clinician.medplum.updateResource({ ...current, status: 'completed' });
    const closed = await send(patient, header.id as string, { text: 'One more thing' });
    expect(closed.status).toBe(409);
    expect(closed.body).toMatchObject({ error: { code: 'invalid_state' } });
    expect(messagesIn(header.id as string)).toHaveLength(1);
    expect((await gw.call('GET', '/v1/messages', { token: patient.token })).body).toMatchObject({
      threads: [{ status: 'closed' }],
    });
  });
});
