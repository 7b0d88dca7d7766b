import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { matchesSearchRequest, parseSearchRequest } from '@medplum/core';
import type { Communication, DocumentReference, Patient, Resource } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchStats } from '../../src/embedded/store/search';
import { createTestStore } from '../support/store';

/**
 * Searches the store narrows through its indexes (token, reference, compartment, `_lastUpdated`)
 * answer exactly what matching every stored resource of the type answers, and read rows in
 * proportion to the answer, not to the store.
 */
const store = createTestStore();
const { repo } = store;
const SYSTEM = 'https://example.test/agreement';

function documents(n: number, offset = 0): DocumentReference[] {
  return Array.from({ length: n }, (_, i) => ({
    resourceType: 'DocumentReference',
    status: i % 3 === 0 ? 'superseded' : 'current',
    masterIdentifier: i % 7 === 0 ? { system: 'urn:master', value: `M-${offset + i}` } : undefined,
    identifier: i % 2 === 0 ? [{ system: SYSTEM, value: `Doc-${offset + i}` }] : [{ value: `plain-${offset + i}` }],
    type: {
      text: i % 5 === 0 ? 'Agreement' : 'Note',
      coding: [{ system: 'urn:type', code: `T${i % 4}`, display: 'Kind' }],
    },
    meta: { tag: i % 4 === 0 ? [{ system: 'urn:tag', code: 'Published' }] : [] },
    subject: { reference: `Patient/p${i % 10}` },
    content: [{ attachment: { url: `https://example.test/${offset + i}` } }],
  }));
}

beforeAll(async () => {
  for (const doc of documents(60)) {
    await repo.createResource(doc);
  }
  const patient: Patient = {
    resourceType: 'Patient',
    telecom: [{ system: 'phone', value: '+1 555 0100' }],
    identifier: [{ system: 'urn:mrn', value: 'MRN-1' }],
    active: true,
  };
  await repo.createResource(patient);
  const message: Communication = {
    resourceType: 'Communication',
    status: 'completed',
    category: [{ coding: [{ system: 'urn:cat', code: 'inbound-sms' }] }],
  };
  await repo.createResource(message);
});

async function stored(resourceType: string): Promise<Resource[]> {
  return (
    store.db.reader.prepare('SELECT content FROM resource WHERE type = ?').all(resourceType) as {
      content: string;
    }[]
  ).map((row) => JSON.parse(row.content) as Resource);
}

const QUERIES = [
  `DocumentReference?identifier=${SYSTEM}|`,
  `DocumentReference?identifier=${SYSTEM.toUpperCase()}|DOC-4`,
  'DocumentReference?identifier=plain-5',
  'DocumentReference?identifier=|plain-5',
  'DocumentReference?identifier=|Doc-4',
  'DocumentReference?identifier=urn:master|M-7',
  'DocumentReference?identifier=M-14,Doc-8',
  'DocumentReference?status=current',
  'DocumentReference?status=current&identifier=urn:master|',
  'DocumentReference?type=Agreement',
  'DocumentReference?type=urn:type|T1',
  'DocumentReference?type=kind',
  'DocumentReference?_tag=urn:tag|published',
  'DocumentReference?_tag:not=urn:tag|Published',
  'DocumentReference?subject=Patient/p3&status=superseded',
  'DocumentReference?_lastUpdated=ge2000-01-01',
  'DocumentReference?_lastUpdated=lt2000-01-01',
  `DocumentReference?_lastUpdated=le${new Date(Date.now() + 3600_000).toISOString()}`,
  `DocumentReference?_lastUpdated=gt${new Date(Date.now() + 3 * 86400_000).toISOString().slice(0, 10)}`,
  'Patient?phone=+1 555 0100',
  'Patient?telecom=phone|+1 555 0100',
  'Patient?identifier=urn:mrn|mrn-1',
  'Patient?active=true',
  'Communication?category=urn:cat|inbound-sms&_lastUpdated=ge2020-01-01T00:00:00Z',
];

describe('indexed searches', () => {
  it.each(QUERIES)('%s answers what matching every stored resource answers', async (query) => {
    const request = parseSearchRequest(query);
    const expected = (await stored(request.resourceType))
      .filter((r) => matchesSearchRequest(r, request))
      .map((r) => r.id)
      .sort();
    const actual = (await repo.searchResources({ ...request, count: 1000 })).map((r) => r.id).sort();
    expect(actual).toEqual(expected);
  });

  it('reads rows in proportion to the answer: identifier=<system>| among many other documents', async () => {
    const read = async (query: string) => {
      const before = searchStats.rowsRead;
      const found = await repo.searchResources({ ...parseSearchRequest(query), count: 1000 });
      return { found: found.length, read: searchStats.rowsRead - before };
    };
    const system = await read(`DocumentReference?identifier=${SYSTEM}|`);
    expect(system).toEqual({ found: 30, read: 30 });
    expect(await read('DocumentReference?identifier=urn:master|M-7')).toEqual({ found: 1, read: 1 });
    const patient = await read('Patient?identifier=urn:mrn|MRN-1');
    expect(patient).toEqual({ found: 1, read: 1 });
    expect((await read('DocumentReference?_lastUpdated=lt2000-01-01')).read).toBe(0);
  });
});

describe('a store written before the token index', () => {
  let dir: string;
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is indexed when it is opened, once', async () => {
    dir = mkdtempSync(join(tmpdir(), 'pc-index-'));
    const path = join(dir, 'store.sqlite');
    const old = createTestStore(path);
    for (const doc of documents(5, 100)) {
      await old.repo.createResource(doc);
    }
    // The layout of schema version 1: an identifier table, no token table.
    old.db.writer.exec(
      'DROP TABLE token; CREATE TABLE identifier (type TEXT, value TEXT, id TEXT); PRAGMA user_version = 1',
    );
    old.db.close();

    const reopened = createTestStore(path);
    try {
      const found = await reopened.repo.searchResources(parseSearchRequest(`DocumentReference?identifier=${SYSTEM}|`));
      expect(found.map((d) => (d as DocumentReference).identifier?.[0]?.value).sort()).toEqual([
        'Doc-100',
        'Doc-102',
        'Doc-104',
      ]);
      const version = reopened.db.reader.prepare('PRAGMA user_version').get() as { user_version: number };
      expect(version.user_version).toBe(2);
      const tables = reopened.db.reader
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'identifier'")
        .all();
      expect(tables).toEqual([]);
    } finally {
      reopened.db.close();
    }
  });
});

describe('Slots in start order (availability, issue 27)', () => {
  const slotStore = createTestStore();
  const SCHEDULES = ['Schedule/a', 'Schedule/b', 'Schedule/c'];
  /** 3 schedules × 200 slots, 30 minutes apart, the same instants on every schedule (ties); some busy; a few written with a +02:00 offset. */
  beforeAll(async () => {
    const base = Date.parse('2027-01-04T08:00:00Z');
    for (const [s, schedule] of SCHEDULES.entries()) {
      for (let i = 0; i < 200; i++) {
        const at = new Date(base + i * 30 * 60_000);
        const start =
          i % 50 === 7
            ? at
                .toISOString()
                .replace('Z', '+00:00')
                .replace(/T(\d\d)/, (_, h) => `T${String((Number(h) + 2) % 24).padStart(2, '0')}`)
                .replace('+00:00', '+02:00')
            : at.toISOString();
        await slotStore.repo.createResource({
          resourceType: 'Slot',
          schedule: { reference: schedule },
          status: (i + s) % 9 === 0 ? 'busy' : 'free',
          start,
          end: new Date(at.getTime() + 30 * 60_000).toISOString(),
        });
      }
    }
  });

  const page = (query: string) => slotStore.repo.search(parseSearchRequest(`Slot?${query}`));
  const ids = (bundle: Awaited<ReturnType<typeof page>>) => (bundle.entry ?? []).map((e) => e.resource?.id);

  it('a page reads about a page of rows, and answers exactly what the full search answers, ties and offsets included', async () => {
    const window = 'start=ge2027-01-04T10:00:00Z&start=lt2027-01-06T00:00:00Z';
    const query = `schedule=${SCHEDULES.slice(0, 2).join(',')}&status=free&${window}&_sort=start,_id`;
    for (const [offset, count] of [
      [0, 10],
      [10, 10],
      [37, 25],
      [0, 1],
      [150, 20],
    ]) {
      const before = searchStats.rowsRead;
      const fast = await page(`${query}&_count=${count}&_offset=${offset}`);
      const read = searchStats.rowsRead - before;
      // The full path: the same search asking for a total (the start-ordered path never counts).
      const full = await page(`${query}&_count=${count}&_offset=${offset}&_total=accurate`);
      expect(ids(fast), `${offset}+${count}`).toEqual(ids(full));
      expect(fast.link?.some((l) => l.relation === 'next')).toBe(full.link?.some((l) => l.relation === 'next'));
      // A few more than the page: busy ones skipped and the instant's ties finished.
      expect(read, `${offset}+${count}`).toBeLessThanOrEqual(Math.ceil((offset + count + 1) * 1.2) + 3);
    }
    // In instant order, the +02:00 ones where their instant is.
    const all = await page(`${query}&_count=1000`);
    const instants = (all.entry ?? []).map((e) => Date.parse((e.resource as { start: string }).start));
    expect(instants).toEqual([...instants].sort((a, b) => a - b));
    expect((all.entry ?? []).some((e) => (e.resource as { start: string }).start.endsWith('+02:00'))).toBe(true);
  });
});
