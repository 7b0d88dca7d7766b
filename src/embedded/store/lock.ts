import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/**
 * One running Medplum per store file. Two processes on one file would each provision the demo data
 * at start, each run the cron bots, and each keep caches the other's writes do not reach; rather than
 * make all of that safe, the second one refuses to start.
 *
 * The lock is an exclusive SQLite lock on a file beside the store (`<store>.lock`), held by an open
 * transaction for as long as the Medplum runs. The operating system drops it when the process ends,
 * however it ends, so a crash leaves no stale lock; and SQLite applies it between connections of one
 * process too.
 */
export class StoreInUseError extends Error {
  constructor(readonly path: string) {
    super(
      `The store ${path} is in use by another embedded Medplum (npm start or npm run embedded). ` +
        'Stop that one, or give this one another file with EMBEDDED_MEDPLUM_DB.',
    );
    this.name = 'StoreInUseError';
  }
}

export interface StoreLock {
  release(): void;
}

/** Takes the store's lock, or throws StoreInUseError at once. `:memory:` stores need none. */
export function lockStore(path: string): StoreLock {
  if (path === ':memory:') {
    return { release: () => undefined };
  }
  mkdirSync(dirname(path), { recursive: true });
  ownerOnly(path, `${path}.lock`);
  const lock = new DatabaseSync(`${path}.lock`, { timeout: 0 });
  try {
    lock.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    lock.close();
    if ((err as { errcode?: number }).errcode === SQLITE_BUSY) {
      throw new StoreInUseError(path);
    }
    throw err;
  }
  let held = true;
  return {
    release() {
      if (held) {
        held = false;
        lock.exec('ROLLBACK');
        lock.close();
      }
    },
  };
}

const SQLITE_BUSY = 5;

/**
 * The store holds patients' records: its file, its lock and SQLite's journal files beside it are the
 * owner's alone (mode 600), made so before SQLite opens them (SQLite gives its journal files the store's
 * mode) and put right (by path, never opened) on a store made before this rule. A file of another owner is
 * left as it is.
 */
function ownerOnly(store: string, lock: string): void {
  for (const file of [store, lock]) {
    // Only a file that is not there yet is opened: closing a descriptor of a file drops every POSIX lock
    // this process holds on it, the lock of a Medplum already running on the store among them.
    if (!existsSync(file)) {
      try {
        closeSync(openSync(file, 'wx', 0o600));
      } catch {
        // Made meanwhile by another process: its mode is put right below.
      }
    }
  }
  for (const file of [store, lock, `${store}-wal`, `${store}-shm`, `${lock}-wal`, `${lock}-shm`]) {
    try {
      if (existsSync(file)) {
        chmodSync(file, 0o600);
      }
    } catch {
      // Not ours to change (EPERM): the operator's choice.
    }
  }
}
