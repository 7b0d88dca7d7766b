import type { Organization, Patient, RequestGroup, Task } from '@medplum/fhirtypes';
import { EXTENSIONS, FULFILMENT_METHODS, SYSTEMS } from '../../contracts/systems';
import type { PatientTask } from '../../contracts/tasks';
import {
  type Answer,
  type AttackContext,
  answerOf,
  describe,
  entriesOf,
  errorOf,
  gatewayDescribe,
  message,
  type Person,
  PUBLIC_URL,
  REFUSED,
  row,
  sameSet,
} from './common';

/** What the lane saw of the journey's order just before the journey decided it (`probeOrder`). */
export interface OrderProbe {
  /** `RequestGroup/<id>`. */
  order: string;
  /** The journey's decisions, as it sent them: every item of the order. */
  items: { item: string; decision?: string; fulfilment?: string }[];
  /** Her GET /v1/tasks then. */
  tasks?: Answer;
  /** Each item accepted with a method her task does not allow, and its answer. */
  sent?: { item: string; fulfilment: string }[];
  refused?: Answer;
  error?: string;
}

/**
 * Before the journey's own decision: her open tasks through the gateway (her
 * token, from the journey's call), and a decision of the same order accepting each item with a method not
 * among those her task allows, which decide-order refuses (422) before it writes anything. Never throws.
 */
export async function probeOrder(gatewayFetch: typeof fetch, request: Request, order: string): Promise<OrderProbe> {
  const probe: OrderProbe = { order, items: [] };
  try {
    probe.items = ((await request.json()) as { items?: OrderProbe['items'] }).items ?? [];
    const headers = new Headers(request.headers);
    headers.delete('content-length');
    // The journey's call carries the SDK's Idempotency-Key: the probe is another request, so never with
    // that key (the gateway would answer the journey's own call 422 idempotency_key_reused); a key of its own.
    headers.delete('idempotency-key');
    probe.tasks = await answerOf(await gatewayFetch(`${PUBLIC_URL}/v1/tasks`, { headers }));
    const view = ((probe.tasks.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? []).find(
      (t) => t.kind === 'order-decisions' && t.offer === order,
    );
    probe.sent = probe.items.map(({ item }) => {
      const allowed = view?.items?.find((i) => i.item === item)?.allowed ?? ['delivery', 'pickup'];
      return { item, fulfilment: FULFILMENT_METHODS.find((m) => !allowed.includes(m)) ?? 'at-home-kit' };
    });
    headers.set('content-type', 'application/json');
    headers.set('idempotency-key', crypto.randomUUID());
    probe.refused = await answerOf(
      await gatewayFetch(`${PUBLIC_URL}/v1/orders/${order.split('/')[1]}/decisions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ items: probe.sent.map((s) => ({ ...s, decision: 'accept' })) }),
      }),
    );
  } catch (err) {
    probe.error = message(err);
  }
  return probe;
}

/**
 * Her open tasks and the order-decisions task (GET /v1/tasks): the
 * complete-task bot names each item of the order she accepted with the methods her tenant's policy allows
 * where she lives, as decide-order accepts them; GET /v1/tasks lists her open tasks, each with the call
 * that completes it, and nobody else's.
 */
export async function orderTasks(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const { progress, orderProbe: probe } = ctx;
  const maya = people.get('maya');
  const methods = (extensions: { url?: string; valueCode?: string }[] | undefined) =>
    (extensions ?? []).filter((e) => e.url === EXTENSIONS.fulfilmentMethod).map((e) => e.valueCode as string);
  const list = (allowed: Record<string, readonly string[]>) =>
    Object.entries(allowed)
      .map(([item, m]) => `${item}: ${m.join(', ') || 'none'}`)
      .join('; ');

  // 1. Before she decided: the task view (items[].allowed) and decide-order's refusal agree.
  const viewStep =
    'control: before the journey decides its order, her GET /v1/tasks (gateway) lists its order-decisions task naming each item of the order with allowed methods (items[].allowed, delivery among them), and a decision accepting each item with a method not allowed is 422 invalid_fulfilment whose details.allowed is the same, item for item';
  if (!probe) {
    row(viewStep, 'not reached', 'the journey decided no order');
  } else if (probe.error || !probe.tasks || !probe.refused) {
    row(viewStep, 'FAILED', `the calls threw: ${probe.error ?? 'no answer'}`);
  } else {
    const views = (probe.tasks.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [];
    const view = views.find((t) => t.kind === 'order-decisions' && t.offer === probe.order);
    const viewed: Record<string, string[]> = Object.fromEntries((view?.items ?? []).map((i) => [i.item, i.allowed]));
    const refusal = errorOf(probe.refused);
    const refusedAllowed = (refusal.details?.allowed ?? {}) as Record<string, string[]>;
    const orderItems = probe.items.map((i) => i.item);
    const good =
      probe.tasks.status === 200 &&
      view !== undefined &&
      view.status === 'ready' &&
      view.complete.startsWith(`POST /v1/orders/${probe.order.split('/')[1]}/decisions`) &&
      sameSet(Object.keys(viewed), orderItems) &&
      orderItems.length > 0 &&
      probe.items.every((i) => (viewed[i.item] ?? []).includes(i.fulfilment ?? '')) &&
      probe.refused.status === 422 &&
      refusal.code === 'invalid_fulfilment' &&
      sameSet(Object.keys(refusedAllowed), orderItems) &&
      orderItems.every((item) => sameSet(refusedAllowed[item] ?? [], viewed[item] ?? []));
    row(
      viewStep,
      good ? 'ok' : 'FAILED',
      `her GET /v1/tasks: ${gatewayDescribe(probe.tasks)}, ${views.length} open task(s)${
        view
          ? `, ${view.task} (${view.status}, complete "${view.complete}"): ${list(viewed) || 'no items'}`
          : `, none of kind order-decisions for ${probe.order}`
      }; the journey decides ${probe.items.map((i) => `${i.item} ${i.fulfilment ?? i.decision}`).join(', ')}; accepting ${
        probe.sent?.map((s) => `${s.item} ${s.fulfilment}`).join(', ') ?? 'nothing'
      }: ${gatewayDescribe(probe.refused)}, details.allowed ${list(refusedAllowed) || 'absent'}`,
    );
  }

  // 2. The Task as the bot wrote it (the admin reads it after she decided): one order-item input per item
  // of the order, its methods her tenant Organization's fulfilment-policy for her country and the item's kind.
  const taskStep =
    "control: the journey's order-decisions Task (admin, after she decided): one input per item of the order (type order-item under SYSTEMS.taskKind, valueReference MedicationRequest/<id>), its fulfilment-method extensions her tenant Organization's fulfilment-policy for her country and MedicationRequest (delivery, pickup for the US)";
  const order = probe?.order;
  if (!progress.patient || !order) {
    row(taskStep, 'not reached', !progress.patient ? 'the journey did not make it' : 'the journey decided no order');
  } else {
    try {
      const found = await ctx.adminGet(
        `fhir/R4/Task?${new URLSearchParams({ code: `${SYSTEMS.taskKind}|order-decisions`, focus: order, subject: progress.patient })}`,
      );
      const tasks = entriesOf(found.body) as Task[];
      const task = tasks[0];
      const group = (await ctx.adminGet(`fhir/R4/${order}`)).body as RequestGroup | undefined;
      const orderItems = (group?.action ?? []).map((a) => a.resource?.reference ?? 'no resource');
      const patient = (await ctx.adminGet(`fhir/R4/${progress.patient}`)).body as Patient | undefined;
      const country = patient?.address?.[0]?.country;
      const tenantRef = patient?.managingOrganization?.reference;
      const tenant = tenantRef
        ? ((await ctx.adminGet(`fhir/R4/${tenantRef}`)).body as Organization | undefined)
        : undefined;
      const policy = (kind: string) =>
        (tenant?.extension ?? [])
          .filter((e) => e.url === EXTENSIONS.fulfilmentPolicy)
          .filter(
            (e) =>
              e.extension?.find((p) => p.url === 'country')?.valueCode === country &&
              e.extension?.find((p) => p.url === 'kind')?.valueCode === kind,
          )
          .flatMap((e) => (e.extension ?? []).filter((p) => p.url === 'method').map((p) => p.valueCode as string));
      const inputs = (task?.input ?? []).filter((i) =>
        i.type?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'order-item'),
      );
      const named = Object.fromEntries(
        inputs.map((i) => [i.valueReference?.reference ?? 'no valueReference', methods(i.extension)]),
      );
      const expected = policy('MedicationRequest');
      const good =
        found.status === 200 &&
        tasks.length === 1 &&
        inputs.length === orderItems.length &&
        orderItems.length > 0 &&
        sameSet(Object.keys(named), orderItems) &&
        orderItems.every((item) => item.startsWith('MedicationRequest/') && sameSet(named[item] ?? [], expected)) &&
        (country !== 'US' || sameSet(expected, ['delivery', 'pickup']));
      row(
        taskStep,
        good ? 'ok' : 'FAILED',
        `${describe(found)}, ${tasks.length} order-decisions Task(s)${task ? ` (Task/${task.id} ${task.status})` : ''}: ${list(named) || 'no order-item input'}; ${order}'s items ${orderItems.join(', ') || 'none'}; her country ${country ?? 'none'}, ${tenantRef ?? 'no tenant'}'s policy for MedicationRequest there: ${expected.join(', ') || 'none'}`,
      );
    } catch (err) {
      row(taskStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 3. Her open tasks through the gateway after the journey: each with `complete`, each hers; and the lists
  // of bob (Northwind) and carol (Southridge) hold none of hers (nor hers any of theirs).
  const listOf = async (person: Person) => {
    const answer = await answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/tasks`, { headers: { authorization: `Bearer ${person.token}` } }),
    );
    return { answer, tasks: (answer.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [] };
  };
  const listStep =
    'control: the journey patient lists her open tasks through the gateway (GET /v1/tasks, her token): 200, each task with its kind and `complete` (the call that completes it), each a Task whose `for` is her Patient (the admin reads them)';
  const hers = new Set<string>();
  const earlier = (probe?.tasks?.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [];
  for (const t of earlier) {
    hers.add(t.task);
  }
  if (!maya || !progress.patient) {
    row(listStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const { answer, tasks } = await listOf(maya);
      for (const t of tasks) {
        hers.add(t.task);
      }
      const ids = tasks.map((t) => t.task.split('/')[1]);
      const stored = ids.length
        ? (entriesOf((await ctx.adminGet(`fhir/R4/Task?_id=${ids.join(',')}&_count=${ids.length}`)).body) as Task[])
        : [];
      const notHers = ids.filter((id) => stored.find((t) => t.id === id)?.for?.reference !== progress.patient);
      const uncompletable = tasks.filter((t) => !t.complete?.startsWith('POST /v1/'));
      const kinds = [...new Set(tasks.map((t) => t.kind))];
      const good =
        answer.status === 200 &&
        tasks.length > 0 &&
        uncompletable.length === 0 &&
        notHers.length === 0 &&
        tasks.every((t) => t.status === 'ready');
      row(
        listStep,
        good ? 'ok' : 'FAILED',
        `expected 200 with open tasks, each with complete and hers; got ${gatewayDescribe(answer)}, ${tasks.length} task(s) (${kinds.map((k) => `${k} ${tasks.filter((t) => t.kind === k).length}`).join(', ') || 'none'}; statuses ${[...new Set(tasks.map((t) => t.status))].join(', ') || 'none'}), e.g. "${tasks[0]?.complete ?? 'none'}"${uncompletable.length ? `; WITHOUT complete: ${uncompletable.map((t) => t.task).join(', ')}` : ''}${notHers.length ? `; NOT HERS: ${notHers.map((id) => `Task/${id}`).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(listStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const key of ['bob', 'carol'] as const) {
    const other = people.get(key);
    const step = `attack: ${other?.who ?? key} lists his or her open tasks through the gateway (GET /v1/tasks): none of the journey patient's tasks (those her lists before and after the journey's order named)`;
    if (!other || hers.size === 0) {
      row(step, 'not reached', !other ? 'the attacker could not sign in' : 'her lists named no task');
      continue;
    }
    try {
      const { answer, tasks } = await listOf(other);
      const leaked = tasks.filter((t) => hers.has(t.task));
      const held = REFUSED.includes(answer.status) || (answer.status === 200 && leaked.length === 0);
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected 200 (or 403/404) without her ${hers.size} task(s); got ${gatewayDescribe(answer)}, ${tasks.length} task(s) of his or her own${leaked.length ? `, HERS: ${leaked.map((t) => t.task).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}
