import type { Reference, Resource } from '@medplum/fhirtypes';
import type { CallerContext } from '../context';
import type { Database } from '../store/database';
import type { ResourceChange, SqliteRepository } from '../store/repo';

/** The reads a caller is built from; a build records each one, and a write to any of them forgets the caller. */
export type CallerReader = Pick<SqliteRepository, 'readResource' | 'readReference'>;

/** A token whose signature, issuer and claims have been checked: it can only expire (a JWT is immutable). */
export interface VerifiedToken {
  loginId: string;
  /** `exp`, in seconds since the epoch, as jose compares it. */
  expiresAt: number;
  notBefore?: number;
}

interface CachedCaller {
  caller: CallerContext;
  /** `Type/id` of every resource the caller was built from. */
  dependsOn: Set<string>;
  /** The latest expiry of a token that named this login: no call can ask for it after that. */
  expiresAt: number;
}

/** One caller being built: what it has read so far, and whether one of those has been written since. */
export class CallerBuild {
  readonly reads = new Set<string>();
  stale = false;

  constructor(readonly storeVersion: number) {}

  /** `systemRepo`, recording each resource before it is read (a write committed after that makes the build stale). */
  reader(systemRepo: SqliteRepository): CallerReader {
    return {
      readResource: <T extends Resource>(resourceType: string, id: string) => {
        this.reads.add(`${resourceType}/${id}`);
        return systemRepo.readResource<T>(resourceType, id);
      },
      readReference: <T extends Resource>(reference: Reference<T>) => {
        this.reads.add(reference.reference ?? '');
        return systemRepo.readReference<T>(reference);
      },
    };
  }
}

const MAX_CACHED_CALLERS = 10_000;
/** How often entries whose tokens have all expired are looked for (they are unreachable, only memory). */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * Who each login is (membership, project, effective access policy), kept until its tokens expire and
 * forgotten the moment a resource it was built from is written, so revocation stays immediate: the
 * repository reports every committed write (`forget`, from its onCommit). Writes by another connection
 * to the same file (a second process, an operator's sqlite3) are not reported; SQLite's `data_version`
 * shows that one happened, and then everything is forgotten.
 *
 * Cached callers are deep-frozen: every request shares them.
 */
export class CallerCache {
  private readonly tokens = new Map<string, VerifiedToken>();
  private readonly callers = new Map<string, CachedCaller>();
  /** `Type/id` -> the logins built from it. */
  private readonly dependents = new Map<string, Set<string>>();
  private readonly building = new Set<CallerBuild>();
  private knownStoreVersion: number;
  private nextSweep = 0;

  constructor(
    private readonly storeVersion: () => number = () => 0,
    private readonly maxEntries = MAX_CACHED_CALLERS,
  ) {
    this.knownStoreVersion = storeVersion();
  }

  /** A token verified before and not expired at `now`. */
  verifiedToken(token: string, now: Date): VerifiedToken | undefined {
    const verified = this.tokens.get(token);
    if (!verified) {
      return undefined;
    }
    if (!isCurrent(verified, now)) {
      this.tokens.delete(token);
      return undefined;
    }
    return verified;
  }

  rememberToken(token: string, verified: VerifiedToken): void {
    this.tokens.set(token, verified);
    if (this.tokens.size > this.maxEntries) {
      this.tokens.delete(this.tokens.keys().next().value as string);
    }
  }

  caller(token: VerifiedToken): CallerContext | undefined {
    this.forgetForeignWrites();
    const cached = this.callers.get(token.loginId);
    if (!cached) {
      return undefined;
    }
    // Most recently used last: the oldest entry is the one dropped when the cache is full.
    this.callers.delete(token.loginId);
    this.callers.set(token.loginId, cached);
    cached.expiresAt = Math.max(cached.expiresAt, token.expiresAt);
    return cached.caller;
  }

  beginBuild(): CallerBuild {
    const build = new CallerBuild(this.storeVersion());
    this.building.add(build);
    return build;
  }

  /** Ends a build; its caller is kept only if nothing it read was written while it was being built. */
  endBuild(build: CallerBuild, token: VerifiedToken, caller: CallerContext, now: Date): CallerContext {
    this.building.delete(build);
    this.sweep(now);
    const frozen = deepFreeze(caller);
    if (build.stale || build.storeVersion !== this.storeVersion()) {
      return frozen;
    }
    this.drop(token.loginId);
    this.callers.set(token.loginId, { caller: frozen, dependsOn: build.reads, expiresAt: token.expiresAt });
    for (const key of build.reads) {
      let logins = this.dependents.get(key);
      if (!logins) {
        logins = new Set();
        this.dependents.set(key, logins);
      }
      logins.add(token.loginId);
    }
    if (this.callers.size > this.maxEntries) {
      this.drop(this.callers.keys().next().value as string);
    }
    return frozen;
  }

  abandonBuild(build: CallerBuild): void {
    this.building.delete(build);
  }

  /** Committed writes: every caller built from one of these resources is forgotten, and so is any build reading them. */
  forget(changes: readonly ResourceChange[]): void {
    for (const { resource } of changes) {
      const key = `${resource.resourceType}/${resource.id}`;
      for (const build of this.building) {
        if (build.reads.has(key)) {
          build.stale = true;
        }
      }
      const logins = this.dependents.get(key);
      if (logins) {
        for (const loginId of [...logins]) {
          this.drop(loginId);
        }
      }
    }
  }

  private sweep(now: Date): void {
    if (now.getTime() < this.nextSweep) {
      return;
    }
    this.nextSweep = now.getTime() + SWEEP_INTERVAL_MS;
    const seconds = Math.floor(now.getTime() / 1000);
    for (const [token, verified] of this.tokens) {
      if (verified.expiresAt <= seconds) {
        this.tokens.delete(token);
      }
    }
    for (const [loginId, cached] of this.callers) {
      if (cached.expiresAt <= seconds) {
        this.drop(loginId);
      }
    }
  }

  private forgetForeignWrites(): void {
    const version = this.storeVersion();
    if (version === this.knownStoreVersion) {
      return;
    }
    this.knownStoreVersion = version;
    this.callers.clear();
    this.dependents.clear();
  }

  private drop(loginId: string): void {
    const cached = this.callers.get(loginId);
    if (!cached) {
      return;
    }
    this.callers.delete(loginId);
    for (const key of cached.dependsOn) {
      const logins = this.dependents.get(key);
      logins?.delete(loginId);
      if (logins?.size === 0) {
        this.dependents.delete(key);
      }
    }
  }
}

/**
 * SQLite's `data_version` as the writer connection sees it: it changes when another connection commits
 * to the file, never for the writer's own commits (those reach `forget`). Our reader connection never writes.
 */
export function foreignCommitCounter(db: Database): () => number {
  return () => (db.writer.prepare('PRAGMA data_version').get() as { data_version: number }).data_version;
}

/** jose's checks (lib/jwt_claims_set.js): `nbf <= now < exp`, in whole seconds, no tolerance. */
function isCurrent(token: VerifiedToken, now: Date): boolean {
  const seconds = Math.floor(now.getTime() / 1000);
  return seconds < token.expiresAt && (token.notBefore === undefined || token.notBefore <= seconds);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) {
      deepFreeze(child);
    }
  }
  return value;
}
