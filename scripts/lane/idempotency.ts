import { createHash, randomBytes } from 'node:crypto';
import type { Basic, Consent } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { createPatientCareClient } from '../../src/sdk';
import {
  type Answer,
  type AttackContext,
  answerOf,
  describe,
  entriesOf,
  errorOf,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  REFUSED,
  type Result,
  register,
  row,
} from './common';
import type { GatewayInstance } from './gateways';
import { visitorKit } from './visitor';

/**
 * `Idempotency-Key` on every POST of /v1 (docs/decisions.md "Idempotency-Key on every POST";
 * src/edge/idempotency.ts), on a real Medplum, across the lane's two gateway instances (each called
 * directly, its own `Bot/$execute` calls counted). Two new Northwind patients of the lane's own (registered
 * through Northwind's app, homed, living in Fresno, CA) accept their unmet agreements
 * (`POST /v1/agreements/acceptances`, what `GET /v1/agreements/requirements` lists):
 * (a) the first with key K through instance A, then the same call with K through instance B: the first
 * answer again (`Idempotent-Replayed: true`), nothing done by B; (b) K with another body: 422
 * `idempotency_key_reused`, nothing written; (c) the second, 10 calls at once with a new key K2, alternately
 * through A and B: one does the work, the others 409 `request_in_progress` or the first answer again, one
 * Consent per agreement; (d) her key's record on Medplum (a Basic of hers, identifier the key's sha-256):
 * hers to read, and neither bob nor the Northwind clinician may read or copy it, nor may she file one
 * about bob or of another code; (e) a key of 256 characters: 400 naming the header. The patients, their
 * Consents and their key records stay in the project (the reconciler deletes the records after 25 hours).
 */
export async function idempotencyKeys(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'Idempotency-Key';
  const code = `${SYSTEMS.idempotency}|request`;
  const steps = {
    replay: `${family}: (a) a new Northwind patient (registered through Northwind's app, homed, living in Fresno, CA) accepts her unmet agreements (GET /v1/agreements/requirements) with key K through instance A (POST /v1/agreements/acceptances): 200, not replayed, one Consent per agreement; the same call with K through instance B (after Retry-After while A still stores its answer: 409 request_in_progress): 200, the same body, Idempotent-Replayed: true, no new Consent (her Consents as the admin reads them, at the same versions) and no Bot/$execute by B`,
    retries: `${family}: (a2) K sent again 100 times, each as soon as the one before was answered, alternately through instances B and A: every answer 200, the first body, replayed; none 409 request_in_progress`,
    reused: `${family}: (b) K again with another body (one agreement only), through instance A: 422 idempotency_key_reused naming the header, nothing written (her Consents and her key's record at the same versions, no Bot/$execute by A)`,
    together: `${family}: (c) 10 concurrent calls with a new key K2 (a second new Northwind patient, her unmet agreements), alternately through instances A and B: exactly one answered 200 without Idempotent-Replayed, each other either 409 request_in_progress with Retry-After or 200 with the same body and Idempotent-Replayed: true; exactly one Consent of hers per agreement (as the admin reads them)`,
    record: `${family}: (d) her key's record on Medplum: as the admin, Basic?subject=Patient/<her id> holds one Basic with code ${code} and identifier ${SYSTEMS.idempotency}|<the sha-256 of K> (its stored answer 200); she reads it directly on Medplum with her token: 200`,
    bob: `${family}: (d) attack: bob (Northwind demo patient) reads her key's record directly on Medplum (403/404) and creates a copy of it (POST Basic, the record as the admin read it without id and meta: 403), nothing written`,
    clinician: `${family}: (d) attack: the Northwind demo clinician reads her key's record directly on Medplum (403/404) and creates a copy of it (POST Basic: 403), nothing written`,
    aboutBob: `${family}: (d) attack: she creates a Basic about bob directly on Medplum (her record's copy with subject bob's Patient, her token): 403, nothing written`,
    otherCode: `${family}: (d) attack: she creates a Basic of another code about herself directly on Medplum (code https://example.org/lane|note, her token): 403, nothing written`,
    upload: `${family}: (f) her upload (POST /v1/documents?filename=first.png, PNG bytes) with key K3: 201; K3 with ?filename=second.png, with no filename, and with the same bytes as application/pdf: 422 idempotency_key_reused each, no Binary written; K3 with the query and the type as first sent (IMAGE/PNG): the first answer again, Idempotent-Replayed: true (issue 50: the fingerprint covers the query string and the Content-Type)`,
    invalid: `${family}: (e) her call with an invalid key (256 visible characters) through instance B: 400 invalid_request with details.header Idempotency-Key, nothing written (her Consents and key records as before, no Bot/$execute by B)`,
  };
  type Step = keyof typeof steps;
  const reported = new Set<Step>();
  const report = (key: Step, result: Result, detail: string) => {
    reported.add(key);
    row(steps[key], result, detail);
  };
  const skip = (keys: Step[], why: string) => {
    for (const key of keys.filter((k) => !reported.has(k))) {
      report(key, 'not reached', why);
    }
  };
  const { call, said, moveTo, FRESNO } = visitorKit(ctx);
  const instanceA = ctx.instances.find((i) => i.name === 'A');
  const instanceB = ctx.instances.find((i) => i.name === 'B');
  if (!instanceA || !instanceB) {
    skip(
      Object.keys(steps) as Step[],
      `the lane has no instances A and B (${ctx.instances.map((i) => i.name).join(', ')})`,
    );
    return;
  }
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');
  type Unmet = { url: string; version: string };

  /** A new Northwind patient living in Fresno, CA, and what she has not accepted yet. */
  const newcomer = async (who: string) => {
    const registered = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who };
    const api = createPatientCareClient({
      baseUrl: PUBLIC_URL,
      accessToken: registered.token,
      fetch: ctx.gatewayFetch,
    });
    const { patient } = await api.patient.home();
    const person = { ...registered, profile: patient };
    await moveTo({ person, patient }, FRESNO);
    const asked = await call(person, 'GET', '/v1/agreements/requirements');
    const unmet = (asked.body as { unmet?: Unmet[] } | undefined)?.unmet ?? [];
    if (asked.status !== 200 || unmet.length === 0) {
      throw new Error(`${patient}: GET /v1/agreements/requirements: ${said(asked)}, ${unmet.length} unmet`);
    }
    return { person, patient, unmet };
  };
  interface Sent {
    instance: string;
    answer: Answer;
    replayed: string | null;
    retryAfter: string | null;
    /** The instance's `Bot/$execute` calls while this one ran (exact only when nothing else ran on it). */
    runs: number;
  }
  /** Her acceptance through one instance, with an Idempotency-Key. */
  const accept = async (instance: GatewayInstance, person: Person, body: unknown, key: string): Promise<Sent> => {
    const before = instance.executes.count;
    const response = await instance.fetch(
      new Request(`${PUBLIC_URL}/v1/agreements/acceptances`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${person.token}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
      }),
    );
    const replayed = response.headers.get('idempotent-replayed');
    const retryAfter = response.headers.get('retry-after');
    const answer = await answerOf(response);
    return { instance: instance.name, answer, replayed, retryAfter, runs: instance.executes.count - before };
  };
  const sentSaid = (s: Sent, runs = true) =>
    `${s.instance}: ${said(s.answer)}, Idempotent-Replayed ${s.replayed ?? 'absent'}${s.retryAfter ? `, Retry-After ${s.retryAfter}` : ''}${runs ? `, ${s.runs} Bot/$execute` : ''}`;
  /** Her Consents, as the admin reads them: id@version, status, policy. */
  const consentsOf = async (patient: string) =>
    (entriesOf((await ctx.adminGet(`fhir/R4/Consent?patient=${patient}&_count=100`)).body) as Consent[]).sort((x, y) =>
      (x.id ?? '').localeCompare(y.id ?? ''),
    );
  const consentsSaid = (consents: Consent[]) =>
    consents.map((c) => `Consent/${c.id}@${c.meta?.versionId} ${c.status} ${c.policy?.[0]?.uri}`).join(', ') || 'none';
  /** The Basic records about a patient, as the admin reads them. */
  const basicsOf = async (patient: string) =>
    (entriesOf((await ctx.adminGet(`fhir/R4/Basic?subject=${patient}&_count=100`)).body) as Basic[]).sort((x, y) =>
      (x.id ?? '').localeCompare(y.id ?? ''),
    );
  const basicsSaid = (basics: Basic[]) => basics.map((b) => `Basic/${b.id}@${b.meta?.versionId}`).join(', ') || 'none';
  const keyRecordOf = (basics: Basic[], key: string) =>
    basics.find((b) => (b.identifier ?? []).some((i) => i.system === SYSTEMS.idempotency && i.value === sha256(key)));
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;
  const sameText = (x: Sent, y: Sent) => x.answer.text === y.answer.text;

  // (a) The first patient: key K through A, then through B.
  const K = `lane-${randomBytes(12).toString('hex')}`;
  let first: Awaited<ReturnType<typeof newcomer>> | undefined;
  let record: Basic | undefined;
  try {
    first = await newcomer('the Idempotency-Key patient');
    const body = { agreements: first.unmet };
    const consents0 = await consentsOf(first.patient);
    const viaA = await accept(instanceA, first.person, body, K);
    const consentsA = await consentsOf(first.patient);
    // A's answer is stored just after it is sent (src/edge/idempotency.ts): a retry at another instance in
    // those milliseconds is 409 request_in_progress with Retry-After, and a client waits and sends it again.
    let viaB = await accept(instanceB, first.person, body, K);
    for (let retry = 0; retry < 3 && errorOf(viaB.answer).code === 'request_in_progress'; retry++) {
      await new Promise((resolve) => setTimeout(resolve, Number(viaB.retryAfter ?? '1') * 1000));
      viaB = await accept(instanceB, first.person, body, K);
    }
    const consentsB = await consentsOf(first.patient);
    const perAgreement = first.unmet.every(
      (u) =>
        consentsA.filter((c) => c.status === 'active' && c.policy?.[0]?.uri === `${u.url}|${u.version}`).length === 1,
    );
    const good =
      viaA.answer.status === 200 &&
      viaA.replayed === null &&
      consentsA.length === consents0.length + first.unmet.length &&
      perAgreement &&
      viaB.answer.status === 200 &&
      sameText(viaA, viaB) &&
      viaB.replayed === 'true' &&
      consentsSaid(consentsB) === consentsSaid(consentsA) &&
      viaB.runs === 0;
    report(
      'replay',
      good ? 'ok' : 'FAILED',
      `${first.patient}, unmet ${first.unmet.map((u) => `${u.url}|${u.version}`).join(', ')}; K ${K}; her Consents before: ${consents0.length}; ${sentSaid(viaA)}; her Consents after A: ${consentsSaid(consentsA)}; ${sentSaid(viaB)}; ${sameText(viaA, viaB) ? `the same body (${viaB.answer.text.length} characters: ${viaB.answer.text.slice(0, 200)})` : `bodies differ: A ${viaA.answer.text.slice(0, 200)} vs B ${viaB.answer.text.slice(0, 200)}`}; her Consents after B: ${unchanged(consentsSaid(consentsA), consentsSaid(consentsB))}`,
    );
  } catch (err) {
    report('replay', 'FAILED', `the call threw: ${message(err)}`);
  }
  if (first) {
    try {
      const body = { agreements: first.unmet };
      const firstAnswer = await accept(instanceA, first.person, body, K);
      const tally = new Map<string, number>();
      let differing = 0;
      for (let i = 0; i < 100; i++) {
        const sent = await accept(i % 2 === 0 ? instanceB : instanceA, first.person, body, K);
        const said = `${sent.answer.status}${sent.replayed === 'true' ? ' replayed' : ''}`;
        tally.set(said, (tally.get(said) ?? 0) + 1);
        differing += sameText(sent, firstAnswer) ? 0 : 1;
      }
      const counts = [...tally].map(([said, n]) => `${n} x ${said}`).join(', ');
      report(
        'retries',
        tally.get('200 replayed') === 100 && differing === 0 ? 'ok' : 'FAILED',
        `${counts}; ${differing} bodies differing from the first`,
      );
    } catch (err) {
      report('retries', 'FAILED', `the call threw: ${message(err)}`);
    }
  } else {
    skip(['retries'], 'no first patient (the row above)');
  }

  // (b) K with another body.
  if (!first) {
    skip(['reused'], 'no first patient (the row above)');
  } else {
    try {
      const other =
        first.unmet.length > 1
          ? { agreements: first.unmet.slice(0, 1) }
          : { agreements: first.unmet.map((u) => `${u.url}|${u.version}`) };
      const before = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const sent = await accept(instanceA, first.person, other, K);
      const after = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const error = errorOf(sent.answer);
      const good =
        sent.answer.status === 422 &&
        error.code === 'idempotency_key_reused' &&
        error.details?.header === 'Idempotency-Key' &&
        sent.replayed === null &&
        sent.runs === 0 &&
        before === after;
      report(
        'reused',
        good ? 'ok' : 'FAILED',
        `body ${JSON.stringify(other).slice(0, 200)}; ${sentSaid(sent)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      report('reused', 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // (c) Ten at once with K2, a second patient.
  try {
    const second = await newcomer('the second Idempotency-Key patient');
    const K2 = `lane-${randomBytes(12).toString('hex')}`;
    const body = { agreements: second.unmet };
    const runsBefore = { A: instanceA.executes.count, B: instanceB.executes.count };
    const sent = await Promise.all(
      Array.from({ length: 10 }, (_, i) => accept(i % 2 === 0 ? instanceA : instanceB, second.person, body, K2)),
    );
    const runs = { A: instanceA.executes.count - runsBefore.A, B: instanceB.executes.count - runsBefore.B };
    const fresh = sent.filter((s) => s.answer.status === 200 && s.replayed === null);
    const winner = fresh.length === 1 ? fresh[0] : undefined;
    const othersGood = sent
      .filter((s) => s !== winner)
      .every(
        (s) =>
          (s.answer.status === 409 &&
            errorOf(s.answer).code === 'request_in_progress' &&
            s.retryAfter !== null &&
            s.replayed === null) ||
          (s.answer.status === 200 && s.replayed === 'true' && winner !== undefined && sameText(s, winner)),
      );
    const consents = await consentsOf(second.patient);
    const perAgreement = second.unmet.map(
      (u) =>
        [
          `${u.url}|${u.version}`,
          consents.filter((c) => c.status === 'active' && c.policy?.[0]?.uri === `${u.url}|${u.version}`).length,
        ] as const,
    );
    const good = winner !== undefined && othersGood && perAgreement.every(([, n]) => n === 1);
    const tally = new Map<string, number>();
    for (const s of sent) {
      const kind =
        s.answer.status === 200
          ? s.replayed === 'true'
            ? '200 replayed'
            : '200 fresh'
          : `${s.answer.status} ${errorOf(s.answer).code ?? ''}`;
      tally.set(kind, (tally.get(kind) ?? 0) + 1);
    }
    report(
      'together',
      good ? 'ok' : 'FAILED',
      `${second.patient}, unmet ${second.unmet.length}; ${[...tally.entries()].map(([k, n]) => `${k} x${n}`).join(', ')}; Bot/$execute during the burst: A ${runs.A}, B ${runs.B}; the calls in order: ${sent.map((s, i) => `${i + 1}. ${sentSaid(s, false)}${s.answer.status !== 200 || s.replayed === 'true' ? '' : ` ${s.answer.text.slice(0, 120)}`}`).join('; ')}; her Consents per agreement: ${perAgreement.map(([a, n]) => `${a} x${n}`).join(', ')} (${consentsSaid(consents)})`,
    );
  } catch (err) {
    report('together', 'FAILED', `the call threw: ${message(err)}`);
  }

  // (d) Her key's record on Medplum.
  if (!first) {
    skip(['record', 'bob', 'clinician', 'aboutBob', 'otherCode'], 'no first patient (row (a))');
  } else {
    try {
      const basics = await basicsOf(first.patient);
      record = keyRecordOf(basics, K);
      const answer = record?.extension?.find((e) => e.url === EXTENSIONS.idempotencyAnswer)?.valueString;
      const stored = answer ? (JSON.parse(answer) as { status?: number }) : undefined;
      const coded = record?.code?.coding?.some((c) => `${c.system}|${c.code}` === code) === true;
      const read = record?.id ? await direct(first.person, 'GET', `Basic/${record.id}`) : undefined;
      const good =
        record !== undefined &&
        coded &&
        record.subject?.reference === first.patient &&
        stored?.status === 200 &&
        read?.status === 200 &&
        (read.body as Basic | undefined)?.id === record.id;
      report(
        'record',
        good ? 'ok' : 'FAILED',
        `${basics.length} Basic about ${first.patient} (${basicsSaid(basics)}; the SDK's own POSTs carry keys too); sha-256 of K ${sha256(K)}: ${record ? `Basic/${record.id}@${record.meta?.versionId}, code ${record.code?.coding?.map((c) => `${c.system}|${c.code}`).join(', ')}, subject ${record.subject?.reference}, stored answer ${stored ? `status ${stored.status}` : 'none'}` : 'NO record with that identifier'}; her GET Basic/{id} directly: ${read ? describe(read) : 'not made'}`,
      );
    } catch (err) {
      report('record', 'FAILED', `the call threw: ${message(err)}`);
    }
    const bob = people.get('bob');
    if (!record?.id) {
      skip(['bob', 'clinician', 'aboutBob', 'otherCode'], 'no key record of hers (the row above)');
    } else {
      const target = record;
      const copy = { ...target, id: undefined, meta: undefined };
      const state = async () =>
        `hers ${basicsSaid(await basicsOf(first.patient))}${bob ? `; bob's ${basicsSaid(await basicsOf(bob.profile))}` : ''}`;
      for (const [key, attacker] of [
        ['bob', bob],
        ['clinician', people.get('northwind-clinician')],
      ] as const) {
        if (!attacker) {
          report(key, 'not reached', 'the attacker could not sign in');
          continue;
        }
        try {
          const before = await state();
          const read = await direct(attacker, 'GET', `Basic/${target.id}`);
          const forged = await direct(attacker, 'POST', 'Basic', copy);
          const after = await state();
          const held = REFUSED.includes(read.status) && forged.status === 403 && before === after;
          report(
            key,
            held ? 'held' : 'FAILED',
            `GET Basic/${target.id}: ${describe(read)}${read.status < 300 ? ` ${read.text.slice(0, 160)}` : ''}; POST Basic (the copy): ${describe(forged)}; ${unchanged(before, after)}`,
          );
        } catch (err) {
          report(key, 'FAILED', `the call threw: ${message(err)}`);
        }
      }
      if (!bob) {
        skip(['aboutBob'], 'bob could not sign in');
      } else {
        try {
          const before = await state();
          const forged = await direct(first.person, 'POST', 'Basic', { ...copy, subject: { reference: bob.profile } });
          const after = await state();
          report(
            'aboutBob',
            forged.status === 403 && before === after ? 'held' : 'FAILED',
            `POST Basic about ${bob.profile}: ${describe(forged)}; ${unchanged(before, after)}`,
          );
        } catch (err) {
          report('aboutBob', 'FAILED', `the call threw: ${message(err)}`);
        }
      }
      try {
        const before = await state();
        const forged = await direct(first.person, 'POST', 'Basic', {
          resourceType: 'Basic',
          code: { coding: [{ system: 'https://example.org/lane', code: 'note' }] },
          subject: { reference: first.patient },
        });
        const after = await state();
        report(
          'otherCode',
          forged.status === 403 && before === after ? 'held' : 'FAILED',
          `POST Basic (https://example.org/lane|note, about ${first.patient}): ${describe(forged)}; ${unchanged(before, after)}`,
        );
      } catch (err) {
        report('otherCode', 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  }

  // (e) A key that is not a key.
  if (!first) {
    skip(['invalid'], 'no first patient (row (a))');
  } else {
    try {
      const before = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const sent = await accept(instanceB, first.person, { agreements: first.unmet }, 'k'.repeat(256));
      const after = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const error = errorOf(sent.answer);
      const good =
        sent.answer.status === 400 &&
        error.code === 'invalid_request' &&
        error.details?.header === 'Idempotency-Key' &&
        sent.runs === 0 &&
        before === after;
      report(
        'invalid',
        good ? 'ok' : 'FAILED',
        `${sentSaid(sent)} ${JSON.stringify(error).slice(0, 200)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      report('invalid', 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // (f) The same key on an upload: the query string and the Content-Type are the request too.
  if (!first) {
    skip(['upload'], 'no first patient (row (a))');
  } else {
    try {
      const person = first.person;
      const K3 = `lane-${randomBytes(12).toString('hex')}`;
      const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...randomBytes(64)]);
      const upload = async (query: string, type: string) => {
        const response = await instanceA.fetch(
          new Request(`${PUBLIC_URL}/v1/documents${query}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${person.token}`, 'content-type': type, 'idempotency-key': K3 },
            body: png,
          }),
        );
        return { answer: await answerOf(response), replayed: response.headers.get('idempotent-replayed') };
      };
      const binaries = async () =>
        entriesOf(
          (
            await ctx.adminGet(
              `fhir/R4/Binary?_count=1000&_lastUpdated=gt${new Date(Date.now() - 600_000).toISOString()}`,
            )
          ).body,
        ).length;
      const firstSent = await upload('?filename=first.png', 'image/png');
      const stored = await binaries();
      const others = [
        await upload('?filename=second.png', 'image/png'),
        await upload('', 'image/png'),
        await upload('?filename=first.png', 'application/pdf'),
      ];
      const again = await upload('?filename=first.png', 'IMAGE/PNG');
      const after = await binaries();
      const good =
        firstSent.answer.status === 201 &&
        others.every((o) => o.answer.status === 422 && errorOf(o.answer).code === 'idempotency_key_reused') &&
        again.answer.status === 201 &&
        again.replayed === 'true' &&
        again.answer.text === firstSent.answer.text &&
        after === stored;
      report(
        'upload',
        good ? 'held' : 'FAILED',
        `first: ${said(firstSent.answer)}; another filename, none, as a PDF: ${others.map((o) => said(o.answer)).join(', ')}; as first sent: ${said(again.answer)}, Idempotent-Replayed ${again.replayed ?? 'absent'}; Binaries of the last 10 minutes ${stored} -> ${after}`,
      );
    } catch (err) {
      report('upload', 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}
