import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { rebuildTokenIndex } from './indexing';

/**
 * The embedded backend's durable store: one SQLite file in WAL mode.
 *
 * node:sqlite is synchronous and ships with Node 24, so there is no native addon to build and no
 * install script to allow. Two connections: a writer, guarded by an async lock because a FHIR
 * transaction spans awaits (bots, batch entries) and every write must wait for it; and a reader
 * for plain reads and searches, which in WAL mode sees only committed data, so nothing reads a
 * write that may still roll back.
 */
export class Database {
  readonly writer: DatabaseSync;
  readonly reader: DatabaseSync;
  private lockTail: Promise<void> = Promise.resolve();

  constructor(readonly path: string) {
    if (path !== ':memory:') {
      mkdirSync(dirname(path), { recursive: true });
    }
    this.writer = new StatementCachingDatabase(path);
    configure(this.writer);
    createSchema(this.writer);
    // An in-memory database cannot be shared between connections: read through the writer.
    this.reader = path === ':memory:' ? this.writer : new StatementCachingDatabase(path);
    if (this.reader !== this.writer) {
      configure(this.reader);
    }
  }

  /** Runs `work` while holding the single write lock; callers queue in arrival order. */
  async withWriteLock<T>(work: () => Promise<T> | T): Promise<T> {
    const previous = this.lockTail;
    let release!: () => void;
    this.lockTail = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    try {
      return await work();
    } finally {
      release();
    }
  }

  integrityCheck(): string {
    const row = this.writer.prepare('PRAGMA integrity_check').get() as { integrity_check: string };
    return row.integrity_check;
  }

  close(): void {
    if (this.reader !== this.writer) {
      this.reader.close();
    }
    this.writer.close();
  }
}

/**
 * A connection that prepares each SQL text once: preparing is a good part of a small read's cost.
 * A statement is reset by its next use, so none may be used again while one of its iterations is
 * still being read; every search reads its rows to the end synchronously (store/search.ts).
 */
class StatementCachingDatabase extends DatabaseSync {
  private readonly statements = new Map<string, StatementSync>();

  override prepare(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = super.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

function configure(db: DatabaseSync): void {
  db.exec('PRAGMA journal_mode = WAL');
  // FULL: a commit is on disk before it is acknowledged, so SIGKILL loses no acknowledged write.
  db.exec('PRAGMA synchronous = FULL');
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA foreign_keys = ON');
}

function createSchema(db: DatabaseSync): void {
  db.exec(`
    -- Scheduled bots (src/embedded/cron.ts), as Medplum keeps its cron jobs in Redis.
    CREATE TABLE IF NOT EXISTS cron_job (bot_id TEXT PRIMARY KEY, pattern TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS resource (
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      project TEXT,
      version_id TEXT NOT NULL,
      last_updated TEXT NOT NULL,
      content TEXT NOT NULL,
      PRIMARY KEY (type, id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS resource_project_type ON resource (project, type, last_updated);

    CREATE TABLE IF NOT EXISTS history (
      seq INTEGER PRIMARY KEY,
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      version_id TEXT NOT NULL,
      last_updated TEXT NOT NULL,
      deleted INTEGER NOT NULL DEFAULT 0,
      content TEXT,
      UNIQUE (type, id, version_id)
    );

    -- meta.compartment (project, accounts, patient compartment): _compartment= and patient-scoped policies
    CREATE TABLE IF NOT EXISTS compartment (
      compartment TEXT NOT NULL,
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      PRIMARY KEY (compartment, type, id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS compartment_by_resource ON compartment (type, id);

    -- every Type/id reference a resource holds: narrows reference searches (subject=Patient/1)
    CREATE TABLE IF NOT EXISTS reference (
      target TEXT NOT NULL,
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      PRIMARY KEY (target, type, id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS reference_by_resource ON reference (type, id);

    -- token values of every token parameter (identifier, status, code, category, _tag...): narrows
    -- token searches by code, system|code and system| (keys lower-cased, see indexing.ts)
    CREATE TABLE IF NOT EXISTS token (
      type TEXT NOT NULL,
      code TEXT NOT NULL,
      key TEXT NOT NULL,
      id TEXT NOT NULL,
      PRIMARY KEY (type, code, key, id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS token_by_resource ON token (type, id);

    -- Slots of a schedule in start order (availability): an expression index SQLite keeps
    -- itself, so a page of free Slots reads the page, not the schedule (search.ts orderedSlots).
    CREATE INDEX IF NOT EXISTS slot_by_schedule_start ON resource (
      json_extract(content, '$.schedule.reference'), julianday(json_extract(content, '$.start'))
    ) WHERE type = 'Slot';
  `);
  const { user_version: version } = db.prepare('PRAGMA user_version').get() as { user_version: number };
  if (version < SCHEMA_VERSION) {
    // A store written by an older version: indexes it lacks are built from the resources, once.
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec('DROP TABLE IF EXISTS identifier');
      rebuildTokenIndex(db);
      db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
      db.exec('COMMIT');
    } catch (err) {
      db.exec('ROLLBACK');
      throw err;
    }
  }
}

/** 2: the token index replaced the identifier index. */
const SCHEMA_VERSION = 2;

export function dataPathFrom(path: string | undefined): string {
  return path ?? '.data/embedded-medplum.sqlite';
}
