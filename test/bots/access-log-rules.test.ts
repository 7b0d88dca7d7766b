import type { AuditEvent } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { entryOf, genuine, type Names, sameGroup } from '../../bots/access-log';

/**
 * Her access log's rules (bots/access-log.ts, issue 50 item 1), without a Medplum: which AuditEvents are
 * Medplum's own record of a member's call, whose entry is hers, and what counts as one entry. The log over
 * a real store, and the attacks on it, are test/gateway/access-log.test.ts and
 * test/security/webhook-access-log-attacks.test.ts. Pure, for `npm run mutation`.
 */
const RESTFUL = 'http://hl7.org/fhir/restful-interaction';
const HER = 'Patient/her';
const STORED = '2026-12-02T10:00:00.000Z';
const TENANT = 'Organization/northwind';

/** An entry as Medplum 5.1 writes one for a clinician's read of a record of hers. */
const entry = (over: Partial<AuditEvent> = {}): AuditEvent => ({
  resourceType: 'AuditEvent',
  id: 'e1',
  meta: { lastUpdated: STORED, author: { reference: 'Practitioner/dr' }, accounts: [{ reference: TENANT }] },
  type: { code: 'rest' },
  subtype: [{ system: RESTFUL, code: 'read' }],
  recorded: STORED,
  outcome: '0',
  agent: [
    { who: { reference: 'Practitioner/dr' }, requestor: true },
    { who: { reference: 'ClientApplication/app' }, requestor: false },
  ],
  source: { observer: { reference: 'Device/medplum' } },
  entity: [{ what: { reference: 'Observation/bp' } }],
  ...over,
});

describe('genuine: Medplum’s own record of a member’s call', () => {
  it('an entry as Medplum writes it counts; so does one without the application agent, and hers', () => {
    expect(genuine(entry(), HER)).toBe(true);
    expect(genuine(entry({ agent: [{ who: { reference: 'Practitioner/dr' }, requestor: true }] }), HER)).toBe(true);
    const own = entry({
      meta: { lastUpdated: STORED, author: { reference: HER } },
      agent: [{ who: { reference: HER }, requestor: true }],
    });
    expect(genuine(own, HER)).toBe(true);
    for (const code of ['read', 'vread', 'history', 'search', 'create', 'update', 'patch', 'delete']) {
      const e = entry({ subtype: [{ system: RESTFUL, code }] });
      expect(genuine(e, HER), code).toBe(['read', 'history', 'create', 'update', 'patch', 'delete'].includes(code));
    }
  });

  it('not written by the member it names, or naming her requestor otherwise, or another patient: left out', () => {
    const variants: [string, AuditEvent][] = [
      ['no agent', entry({ agent: [] })],
      ['an agent naming no one', entry({ agent: [{ requestor: true }] })],
      [
        'written by someone else',
        entry({ meta: { lastUpdated: STORED, author: { reference: 'Practitioner/other' } } }),
      ],
      ['no author stamp', entry({ meta: { lastUpdated: STORED } })],
      [
        'first agent not the requestor',
        entry({ agent: [{ who: { reference: 'Practitioner/dr' }, requestor: false }] }),
      ],
      [
        'a second agent a requestor',
        entry({
          agent: [
            { who: { reference: 'Practitioner/dr' }, requestor: true },
            { who: { reference: 'ClientApplication/app' }, requestor: true },
          ],
        }),
      ],
      [
        'a second agent not an application',
        entry({
          agent: [
            { who: { reference: 'Practitioner/dr' }, requestor: true },
            { who: { reference: 'Practitioner/other' }, requestor: false },
          ],
        }),
      ],
      [
        'another patient’s entry',
        entry({
          meta: { lastUpdated: STORED, author: { reference: 'Patient/other' } },
          agent: [{ who: { reference: 'Patient/other' }, requestor: true }],
        }),
      ],
    ];
    for (const [why, e] of variants) {
      expect(genuine(e, HER), why).toBe(false);
    }
  });

  it('a failed call, another kind of event, no record named, or a date someone chose: left out', () => {
    const variants: [string, AuditEvent][] = [
      ['failed', entry({ outcome: '4' })],
      ['no outcome', entry({ outcome: undefined })],
      ['no REST interaction', entry({ subtype: [{ system: 'https://example.org', code: 'read' }] })],
      ['no subtype', entry({ subtype: undefined })],
      ['an interaction she is not told', entry({ subtype: [{ system: RESTFUL, code: 'search-type' }] })],
      ['no entity', entry({ entity: [] })],
      ['an entity naming no record', entry({ entity: [{ name: 'x' }] })],
      ['recorded 60,001 ms before it was stored', entry({ recorded: '2026-12-02T09:58:59.999Z' })],
      ['recorded 60,001 ms after', entry({ recorded: '2026-12-02T10:01:00.001Z' })],
      ['recorded in 2150', entry({ recorded: '2150-01-01T00:00:00.000Z' })],
      ['not stored', entry({ meta: { author: { reference: 'Practitioner/dr' } } })],
    ];
    for (const [why, e] of variants) {
      expect(genuine(e, HER), why).toBe(false);
    }
    expect(genuine(entry({ recorded: '2026-12-02T09:59:00.000Z' }), HER)).toBe(true);
    expect(genuine(entry({ recorded: '2026-12-02T10:01:00.000Z' }), HER)).toBe(true);
    // The record named is the first entity that names one.
    expect(genuine(entry({ entity: [{ name: 'x' }, { what: { reference: 'Observation/bp' } }] }), HER)).toBe(true);
  });
});

describe('entryOf: whose entry, said how', () => {
  const names: Names = new Map([
    ['Practitioner/dr', { kind: 'clinician', name: 'Dr. Demo', ofHerTenant: true }],
    ['Practitioner/far', { kind: 'clinician', name: 'Dr. Far', ofHerTenant: false }],
    ['Practitioner/anon', { kind: 'clinician', ofHerTenant: true }],
    ['Bot/b', { kind: 'platform', purpose: 'Books visits' }],
    ['ClientApplication/app', { kind: 'application', name: 'Northwind app' }],
  ]);
  const as = (who: string, over: Partial<AuditEvent> = {}) =>
    entryOf(entry({ agent: [{ who: { reference: who }, requestor: true }], ...over }), HER, names, [TENANT]);

  it('a clinician of her care provider by name, what she did and to which kind of record, when Medplum stored it', () => {
    expect(as('Practitioner/dr')).toEqual({
      at: STORED,
      action: 'viewed',
      resourceType: 'Observation',
      by: { kind: 'clinician', name: 'Dr. Demo' },
      count: 1,
    });
    expect(as('Practitioner/anon')?.by).toEqual({ kind: 'clinician' });
    expect(as('Bot/b')?.by).toEqual({ kind: 'platform', purpose: 'Books visits' });
    expect(as('ClientApplication/app')?.by).toEqual({ kind: 'application', name: 'Northwind app' });
    expect(as(HER)?.by).toEqual({ kind: 'you' });
    for (const [code, action] of [
      ['history', 'viewed'],
      ['create', 'created'],
      ['update', 'changed'],
      ['patch', 'changed'],
      ['delete', 'deleted'],
    ]) {
      expect(as('Practitioner/dr', { subtype: [{ system: RESTFUL, code }] })?.action, code).toBe(action);
    }
  });

  it('another tenant’s clinician: only when the entry is filed in her tenant; someone unknown: none', () => {
    expect(as('Practitioner/far', { meta: { lastUpdated: STORED, accounts: [{ reference: 'Organization/x' }] } })).toBe(
      undefined,
    );
    expect(as('Practitioner/far', { meta: { lastUpdated: STORED } })).toBeUndefined();
    expect(as('Practitioner/far')?.by).toEqual({ kind: 'clinician', name: 'Dr. Far' });
    expect(as('Practitioner/unknown')).toBeUndefined();
  });
});

describe('sameGroup: one entry for the same person doing the same to the same kind of record in a minute', () => {
  const base = {
    at: '2026-12-02T10:00:05.000Z',
    action: 'viewed' as const,
    resourceType: 'Observation',
    by: { kind: 'clinician' as const, name: 'Dr. Demo' },
    count: 1,
  };
  it('groups within the clock minute, and nothing that differs', () => {
    expect(sameGroup(base, { ...base, at: '2026-12-02T10:00:59.999Z' })).toBe(true);
    expect(sameGroup(base, { ...base, at: '2026-12-02T10:01:00.000Z' })).toBe(false);
    expect(sameGroup(base, { ...base, at: '2026-12-02T09:59:59.999Z' })).toBe(false);
    expect(sameGroup(base, { ...base, action: 'changed' })).toBe(false);
    expect(sameGroup(base, { ...base, resourceType: 'Condition' })).toBe(false);
    expect(sameGroup(base, { ...base, by: { kind: 'clinician', name: 'Dr. Other' } })).toBe(false);
    expect(sameGroup(base, { ...base, by: { kind: 'you' } })).toBe(false);
  });
});
