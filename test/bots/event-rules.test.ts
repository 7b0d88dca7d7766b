import { createHmac } from 'node:crypto';
import type { Appointment, Communication, DocumentReference, Task } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { eventId, eventOf, isPerson, patientOf } from '../../bots/lib/events';
import { PATIENT_TASK_TAG } from '../../bots/lib/journey';
import {
  delivered,
  MAX_TRIES,
  NOT_TRIED,
  nextTry,
  pendingRecord,
  readPending,
  unanswered,
  webhookSignature,
} from '../../bots/lib/webhooks';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { WEBHOOK_RETRY_MINUTES } from '../../contracts/webhook-rules';

/**
 * What a version of her records tells (bots/lib/events.ts: her feed and her tenant's webhooks read it the
 * same way, issue 50 item 2) and how a webhook delivery is retried and kept (bots/lib/webhooks.ts), without
 * a Medplum. The events over a real store, and the attacks, are test/gateway/events.test.ts,
 * test/gateway/webhooks.test.ts and test/security/webhook-access-log-attacks.test.ts. Pure, for `npm run
 * mutation`.
 */
const HER = 'her';
const BOT = { reference: 'Bot/b' };
const task = (over: Partial<Task> = {}): Task => ({
  resourceType: 'Task',
  id: 't',
  meta: { versionId: 'v1', author: BOT, tag: [PATIENT_TASK_TAG] },
  status: 'ready',
  intent: 'order',
  for: { reference: `Patient/${HER}` },
  code: { coding: [{ system: SYSTEMS.taskKind, code: 'questionnaire' }] },
  ...over,
});

describe('her tasks', () => {
  it('a task the platform issued her, as a bot wrote this version: ready, withdrawn, completed; her offer as an offer', () => {
    expect(eventOf(task(), HER)).toEqual({ type: 'task.ready', kind: 'questionnaire' });
    expect(eventOf(task({ status: 'cancelled' }), HER)?.type).toBe('task.withdrawn');
    expect(eventOf(task({ status: 'completed' }), HER)?.type).toBe('task.completed');
    const offer = { code: { coding: [{ system: SYSTEMS.taskKind, code: 'treatment-offer' }] } };
    expect(eventOf(task({ ...offer }), HER)).toEqual({ type: 'offer.ready', kind: 'treatment-offer' });
    expect(eventOf(task({ ...offer, status: 'cancelled' }), HER)?.type).toBe('offer.revoked');
    expect(eventOf(task({ ...offer, status: 'completed' }), HER)?.type).toBe('offer.answered');
  });

  it('nothing for another’s task, one without the patient tag, one a person wrote, other states or kinds', () => {
    const none: [string, Task][] = [
      ['another patient', task({ for: { reference: 'Patient/other' } })],
      ['no tag', task({ meta: { versionId: 'v1', author: BOT } })],
      [
        'written by her',
        task({ meta: { versionId: 'v1', author: { reference: `Patient/${HER}` }, tag: [PATIENT_TASK_TAG] } }),
      ],
      ['no author', task({ meta: { versionId: 'v1', tag: [PATIENT_TASK_TAG] } })],
      ['in progress', task({ status: 'in-progress' })],
      ['no status', task({ status: undefined as unknown as Task['status'] })],
      ['no kind', task({ code: { coding: [{ system: 'https://example.org', code: 'questionnaire' }] } })],
    ];
    for (const [why, t] of none) {
      expect(eventOf(t, HER), why).toBeUndefined();
    }
  });
});

describe('her visits', () => {
  const visit = (over: Partial<Appointment> = {}): Appointment => ({
    resourceType: 'Appointment',
    id: 'a',
    meta: { versionId: 'v1', author: BOT },
    status: 'booked',
    participant: [{ actor: { reference: `Patient/${HER}` }, status: 'accepted' }],
    ...over,
  });
  it('as the platform decided: booked, started, fulfilled with its mark, cancelled or moved', () => {
    expect(eventOf(visit(), HER)).toEqual({ type: 'visit.booked' });
    expect(eventOf(visit({ status: 'arrived' }), HER)).toEqual({ type: 'visit.started' });
    expect(
      eventOf(visit({ status: 'fulfilled', extension: [{ url: EXTENSIONS.visitFulfilled, valueBoolean: true }] }), HER),
    ).toEqual({ type: 'visit.fulfilled' });
    expect(eventOf(visit({ status: 'cancelled' }), HER)).toEqual({ type: 'visit.cancelled' });
    const moved = { coding: [{ system: SYSTEMS.cancelReason, code: 'rescheduled' }] };
    expect(eventOf(visit({ status: 'cancelled', cancelationReason: moved }), HER)).toEqual({ type: 'visit.moved' });
    const other = { coding: [{ system: 'https://example.org', code: 'rescheduled' }] };
    expect(eventOf(visit({ status: 'cancelled', cancelationReason: other }), HER)).toEqual({ type: 'visit.cancelled' });
  });
  it('nothing for a practitioner’s own mark of fulfilled, a person’s version, another’s visit, other states', () => {
    expect(eventOf(visit({ status: 'fulfilled' }), HER)).toBeUndefined();
    expect(eventOf(visit({ meta: { versionId: 'v1', author: { reference: 'Practitioner/p' } } }), HER)).toBeUndefined();
    expect(eventOf(visit({ meta: { versionId: 'v1' } }), HER)).toBeUndefined();
    expect(eventOf(visit({ participant: [{ actor: { reference: 'Patient/other' }, status: 'accepted' }] }), HER)).toBe(
      undefined,
    );
    expect(eventOf(visit({ status: 'proposed' }), HER)).toBeUndefined();
  });
});

describe('messages to her', () => {
  const message = (over: Partial<Communication> = {}): Communication => ({
    resourceType: 'Communication',
    id: 'm',
    meta: { versionId: 'v1', author: { reference: 'Practitioner/p' } },
    status: 'in-progress',
    partOf: [{ reference: 'Communication/thread' }],
    sent: '2026-12-02T10:00:00.000Z',
    subject: { reference: `Patient/${HER}` },
    recipient: [{ reference: `Patient/${HER}` }],
    sender: { reference: 'Practitioner/p' },
    ...over,
  });
  it('a clinician’s message in a thread, sent, to her, written by its sender, not yet received', () => {
    expect(eventOf(message(), HER)).toEqual({ type: 'message.received' });
    const none: [string, Communication][] = [
      ['no thread', message({ partOf: [] })],
      ['not sent', message({ sent: undefined })],
      ['about another', message({ subject: { reference: 'Patient/other' } })],
      ['not to her', message({ recipient: [{ reference: 'Practitioner/q' }] })],
      [
        'from a patient',
        message({ sender: { reference: `Patient/${HER}` }, meta: { author: { reference: `Patient/${HER}` } } }),
      ],
      ['written by another', message({ meta: { versionId: 'v1', author: { reference: 'Practitioner/q' } } })],
      ['received', message({ received: '2026-12-02T10:01:00.000Z' })],
    ];
    for (const [why, m] of none) {
      expect(eventOf(m, HER), why).toBeUndefined();
    }
  });
});

describe('agreements', () => {
  const agreement = (author?: string): DocumentReference => ({
    resourceType: 'DocumentReference',
    status: 'current',
    content: [],
    identifier: [{ system: SYSTEMS.agreement, value: 'terms' }],
    meta: author ? { author: { reference: author } } : {},
  });
  it('an agreement the platform wrote (its client, a bot) is told; one a person wrote, or no author, is not', () => {
    expect(eventOf(agreement('ClientApplication/c'), HER)).toEqual({ type: 'agreements.changed' });
    expect(eventOf(agreement('Bot/b'), HER)).toEqual({ type: 'agreements.changed' });
    for (const person of ['Practitioner/p', 'Patient/x', 'RelatedPerson/r', undefined]) {
      expect(eventOf(agreement(person), HER), String(person)).toBeUndefined();
    }
    expect(eventOf({ ...agreement('Bot/b'), identifier: [{ system: 'https://example.org', value: 'x' }] }, HER)).toBe(
      undefined,
    );
    expect(eventOf({ resourceType: 'Observation', status: 'final', code: {} }, HER)).toBeUndefined();
  });
  it('a person is a patient, a practitioner or a related person, named by a reference', () => {
    expect(['Patient/a', 'Practitioner/b', 'RelatedPerson/c'].map(isPerson)).toEqual([true, true, true]);
    expect(['Bot/a', 'ClientApplication/b', undefined, 'xPatient/a', 'Organization/o'].map(isPerson)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('ids and patients', () => {
  it('an event’s id is its version; the patient is a task’s subject, a visit’s patient, a message’s subject', () => {
    expect(eventId({ ...task(), id: 't', meta: { versionId: 'v9' } })).toBe('Task/t/_history/v9');
    expect(patientOf(task())).toBe(HER);
    expect(patientOf(task({ for: { reference: 'Group/g' } }))).toBeUndefined();
    expect(
      patientOf({
        resourceType: 'Appointment',
        status: 'booked',
        participant: [
          { actor: { reference: 'Practitioner/p' }, status: 'accepted' },
          { actor: { reference: `Patient/${HER}` }, status: 'accepted' },
        ],
      }),
    ).toBe(HER);
    expect(
      patientOf({ resourceType: 'Communication', status: 'completed', subject: { reference: `Patient/${HER}` } }),
    ).toBe(HER);
    expect(
      patientOf({ resourceType: 'Observation', status: 'final', code: {}, subject: { reference: 'Patient/x' } }),
    ).toBe(undefined);
  });
});

describe('webhook deliveries', () => {
  it('delivered on a 2xx only; unanswered when unreachable, too slow, or kept untried', () => {
    expect([199, 200, 204, 299, 300, 404, 500].map((s) => delivered(s))).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
    expect(delivered('unreachable')).toBe(false);
    expect(delivered('timeout')).toBe(false);
    expect(['unreachable', 'timeout', NOT_TRIED, '500', '404', ''].map(unanswered)).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it('tried again after each retry interval, then no more: as many tries as intervals, plus the first', () => {
    const now = new Date('2026-12-02T10:00:00.000Z');
    WEBHOOK_RETRY_MINUTES.forEach((minutes, i) => {
      expect(nextTry(i + 1, now)).toBe(new Date(now.getTime() + minutes * 60_000).toISOString());
    });
    expect(nextTry(WEBHOOK_RETRY_MINUTES.length + 1, now)).toBeUndefined();
    expect(MAX_TRIES).toBe(WEBHOOK_RETRY_MINUTES.length + 1);
  });

  it('a kept delivery reads back as it was kept; a record that is not one is none', () => {
    const pending = {
      eventId: 'Task/t/_history/v1',
      tenant: 'Organization/o',
      payload: '{}',
      attempts: 2,
      next: '2026-12-02T10:05:00.000Z',
      last: '500',
    };
    const record = pendingRecord(pending, 'pending');
    expect(record.code?.coding?.[0]).toEqual({ system: SYSTEMS.webhookDelivery, code: 'pending' });
    expect(pendingRecord(pending, 'failed').code?.coding?.[0]?.code).toBe('failed');
    expect(readPending(record)).toEqual(pending);
    expect(readPending({ ...record, subject: { reference: 'Patient/her' } })).toBeUndefined();
    expect(readPending({ ...record, identifier: [] })).toBeUndefined();
    const without = (url: string) => ({
      ...record,
      extension: [
        {
          url: EXTENSIONS.webhookDelivery,
          extension: record.extension?.[0]?.extension?.filter((e) => e.url !== url),
        },
      ],
    });
    for (const url of ['tenant', 'payload', 'attempts', 'next']) {
      expect(readPending(without(url)), url).toBeUndefined();
    }
    expect(readPending(without('last'))?.last).toBe('');
    expect(readPending({ ...record, extension: [] })).toBeUndefined();
    const patientTenant = pendingRecord({ ...pending, tenant: 'Patient/her' }, 'pending');
    expect(readPending(patientTenant)).toBeUndefined();
  });

  it('signed as Standard Webhooks: v1 and the HMAC of id.timestamp.body with each secret, space separated', () => {
    const key = Buffer.from('a secret key of the tenant').toString('base64');
    const other = Buffer.from('the next secret').toString('base64');
    const mac = (k: string) =>
      `v1,${createHmac('sha256', Buffer.from(k, 'base64')).update('msg_1.1700000000.{"a":1}').digest('base64')}`;
    expect(webhookSignature([`whsec_${key}`], 'msg_1', 1700000000, '{"a":1}')).toBe(mac(key));
    expect(webhookSignature([`whsec_${key}`, `whsec_${other}`], 'msg_1', 1700000000, '{"a":1}')).toBe(
      `${mac(key)} ${mac(other)}`,
    );
  });
});
