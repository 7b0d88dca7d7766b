import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Database } from '../../src/embedded/store/database';
import { createTestStore } from '../support/store';

describe('durability', () => {
  it('keeps every acknowledged write after SIGKILL mid-stream, and reopens consistent', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'pc-crash-')), 'store.sqlite');
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/embedded/fixtures/write-stream.ts', path], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const acknowledged: string[] = [];
    let buffer = '';
    await new Promise<void>((resolve, reject) => {
      child.on('error', reject);
      child.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8');
        const lines = buffer.split('\n');
        buffer = lines.pop() ?? '';
        acknowledged.push(...lines.filter(Boolean));
        if (acknowledged.length >= 300 && !child.killed) {
          child.kill('SIGKILL');
        }
      });
      child.on('exit', (_code, signal) =>
        signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited: ${signal}`)),
      );
    });
    expect(acknowledged.length).toBeGreaterThanOrEqual(300);

    const { db, repo } = createTestStore(path);
    try {
      expect(db.integrityCheck()).toBe('ok');
      const stored = new Set(
        (db.reader.prepare("SELECT id FROM resource WHERE type = 'Observation'").all() as { id: string }[]).map(
          (r) => r.id,
        ),
      );
      const missing = acknowledged.filter((id) => !stored.has(id));
      expect(missing).toEqual([]);
      // Indexes agree with the rows: a compartment search finds what a table scan finds.
      const scoped = await repo.searchResources({
        resourceType: 'Observation',
        filters: [{ code: 'subject', operator: 'eq', value: 'Patient/p3' }],
        count: 1000,
      });
      const expected = (
        db.reader.prepare("SELECT content FROM resource WHERE type = 'Observation'").all() as { content: string }[]
      )
        .map((r) => JSON.parse(r.content) as { subject: { reference: string } })
        .filter((o) => o.subject.reference === 'Patient/p3').length;
      expect(scoped).toHaveLength(expected);
    } finally {
      db.close();
    }
  });

  it('every connection to the file runs WAL with synchronous=FULL', () => {
    // A SIGKILL cannot tell FULL from NORMAL or OFF (the OS still holds the written pages); only a power
    // loss can, so the setting itself is what is checked. FULL: WAL is synced at every commit.
    const db = new Database(join(mkdtempSync(join(tmpdir(), 'pc-pragma-')), 'store.sqlite'));
    try {
      expect(db.reader).not.toBe(db.writer);
      for (const [name, connection] of [
        ['writer', db.writer],
        ['reader', db.reader],
      ] as const) {
        expect(connection.prepare('PRAGMA journal_mode').get(), name).toEqual({ journal_mode: 'wal' });
        // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
        expect(connection.prepare('PRAGMA synchronous').get(), name).toEqual({ synchronous: 2 });
      }
    } finally {
      db.close();
    }
  });
});
