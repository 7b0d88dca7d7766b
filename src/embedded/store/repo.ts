import type { Filter, Operation, SearchRequest, TypedValue, WithId } from '@medplum/core';
import {
  AccessPolicyInteraction,
  accessPolicySupportsInteraction,
  allOk,
  applyPatch,
  badRequest,
  conflict,
  deepClone,
  deepEquals,
  evalFhirPathTyped,
  forbidden,
  generateId,
  gone,
  normalizeOperationOutcome,
  notFound,
  OperationOutcomeError,
  Operator,
  preconditionFailed,
  protectedResourceTypes,
  toTypedValue,
  validateResourceType,
} from '@medplum/core';
import type {
  CreateResourceOptions,
  DeleteResourceOptions,
  ReadHistoryOptions,
  RepositoryMode,
  SearchOptions,
  TransactionOptions,
  UpdateResourceOptions,
} from '@medplum/fhir-router';
import { FhirRepository, getExtraEntries } from '@medplum/fhir-router';
import type {
  AccessPolicyResource,
  AuditEvent,
  Bundle,
  BundleEntry,
  Meta,
  OperationOutcome,
  Parameters,
  Reference,
  Resource,
  ResourceType,
} from '@medplum/fhirtypes';
import type { AttachmentUrls } from '../attachments';
import type { CallerContext } from '../context';
import { allDefinitions, DEFINITION_TYPES, filtersOf, readDefinition } from '../definitions';
import { type FhirQuota, QUOTA_POINTS } from '../quota';
import { type AuditedInteraction, type AuditWriter, restAuditEvent } from './audit';
import type { Database } from './database';
import { hiddenFieldsOf, protectedFieldsOf, removeFields, restoreFields } from './fields';
import { collectReferences, collectTokenKeys, getPatientCompartments } from './indexing';
import { entryAllows, matchingPolicyEntry } from './policy-match';
import { checkedOffset, runSearch } from './search';
import { validateWrite } from './validation';

/** One committed change, handed to subscribers after COMMIT (never for a rolled-back write). */
export interface ResourceChange {
  interaction: 'create' | 'update' | 'delete';
  resource: WithId<Resource>;
  previous?: WithId<Resource>;
}

export interface RepositoryEnvironment {
  db: Database;
  /** Base URL of the embedded server, ending in `/`, for Bundle links. */
  baseUrl: string;
  /** Attachment URLs: whatever form a write names a Binary in, it is stored as `Binary/<id>`. */
  attachments?: AttachmentUrls;
  /** Medplum's FHIR quota: every interaction of a non-system caller spends points (../quota.ts). */
  quota?: FhirQuota;
  onCommit?: (changes: ResourceChange[]) => void;
  /**
   * Set when the server saves the AuditEvents of REST interactions (Medplum's `saveAuditEvents`): each is
   * decided as a create by the caller (see `audit`) and written here, after the interaction's commit.
   */
  audits?: Pick<AuditWriter, 'write'>;
  clock?: () => Date;
  /**
   * Opt-in (tests): emulate Postgres-backed Medplum under concurrency. There a transaction with a
   * conditional entry runs SERIALIZABLE, and one that overlapped with the transaction that created what
   * its condition now finds can be answered 409 (packages/server/src/fhir/repo.ts). The single writer
   * never overlaps, so a conditional create that finds a resource another transaction created less than
   * this many milliseconds ago is treated as having overlapped with it: 409.
   */
  overlapConflictMs?: number;
}

interface TransactionState {
  changes: ResourceChange[];
  /** AuditEvents the caller's interactions in it made, written only if it commits. */
  audits: AuditEvent[];
  depth: number;
}

/**
 * A Medplum-compatible FHIR repository on SQLite, scoped to one caller, like Medplum's own
 * server Repository: it stamps meta (project, author, accounts, compartment), enforces the
 * caller's AccessPolicy on every interaction, and runs FHIR transactions as real SQLite
 * transactions (fhir-router's BatchProcessor calls withTransaction).
 */
export class SqliteRepository extends FhirRepository {
  private readonly tx: TransactionState | undefined;

  constructor(
    private readonly env: RepositoryEnvironment,
    readonly caller: CallerContext,
    tx?: TransactionState,
  ) {
    super();
    this.tx = tx;
  }

  /** The same store seen by another caller (e.g. a bot's membership). */
  withCaller(caller: CallerContext): SqliteRepository {
    return new SqliteRepository(this.env, caller);
  }

  setMode(_mode: RepositoryMode): void {
    // One SQLite file: reads already go to the reader connection outside transactions.
  }

  generateId(): string {
    return generateId();
  }

  // ---------------------------------------------------------------- reads

  async readResource<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    const resource = await this.readUnaudited<T>(resourceType, id);
    this.audit('read', resource);
    return resource;
  }

  /** A read by id, as the caller, that is part of another interaction (Medplum's readResourceImpl): not audited. */
  private async readUnaudited<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    this.spend(QUOTA_POINTS.read);
    this.checkTypeInteraction(resourceType, AccessPolicyInteraction.READ);
    const resource = await this.read(() => this.loadCurrent<T>(resourceType, id));
    if (!resource) {
      const definition = readDefinition(resourceType, id) as WithId<T> | undefined;
      if (definition) {
        // Every project's: only the caller's policy decides (no project to compare).
        const policy = this.policy;
        const entry = policy && matchingPolicyEntry(definition, AccessPolicyInteraction.READ, policy);
        if (policy && !entry) {
          throw new OperationOutcomeError(notFound);
        }
        return this.present(definition, entry);
      }
      throw new OperationOutcomeError(this.isDeleted(resourceType, id) ? gone : notFound);
    }
    const policy = this.matchPolicy(resource, AccessPolicyInteraction.READ);
    await this.checkBinarySecurityContext(resource);
    return this.present(resource, policy);
  }

  /**
   * A Binary is readable only to whoever can read its `securityContext` (Medplum >= 5.1.18:
   * packages/server/src/fhir/repo.ts authorizeBinarySecurityContext, on read, vread and readReferences; a
   * context naming another Binary is not found): policy criteria do not apply to Binary (@medplum/core's
   * satisfiedAccessPolicy matches any Binary entry), so the context is what ties it to a record. Here every
   * read of a Binary checks it (batch, vread, history too: stricter than Medplum's history).
   */
  private async checkBinarySecurityContext(resource: Resource): Promise<void> {
    if (resource.resourceType === 'Binary' && resource.securityContext && !this.caller.system) {
      if (resource.securityContext.reference?.startsWith('Binary/')) {
        throw new OperationOutcomeError(notFound);
      }
      const [type, id] = referenceParts(resource.securityContext);
      await this.readUnaudited(type, id);
    }
  }

  /**
   * `resource` as this caller would read it, or undefined where she may not read it: the check Medplum
   * makes before each WebSocket notification (packages/server/src/workers/subscription.ts,
   * satisfiesAccessPolicy with her membership's current policy), with her hidden fields removed as a read
   * removes them. Not an interaction of hers: no quota spent, nothing audited. A Binary is never handed
   * over this way (its security context would need a read).
   */
  readableCopy<T extends Resource>(resource: WithId<T>): WithId<T> | undefined {
    if (resource.resourceType === 'Binary' && !this.caller.system) {
      return undefined;
    }
    try {
      this.checkTypeInteraction(resource.resourceType, AccessPolicyInteraction.READ);
      return this.present(deepClone(resource), this.matchPolicy(resource, AccessPolicyInteraction.READ));
    } catch (err) {
      if (err instanceof OperationOutcomeError) {
        return undefined;
      }
      throw err;
    }
  }

  async readReference<T extends Resource>(reference: Reference<T>): Promise<WithId<T>> {
    const [type, id] = referenceParts(reference);
    return this.readResource<T>(type, id);
  }

  async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(T | Error)[]> {
    return Promise.all(
      references.map((r) =>
        this.readReference<T>(r).catch((err: unknown) =>
          err instanceof OperationOutcomeError ? err : new OperationOutcomeError(normalizeOperationOutcome(err)),
        ),
      ),
    );
  }

  async readVersion<T extends Resource>(resourceType: string, id: string, vid: string): Promise<WithId<T>> {
    this.checkTypeInteraction(resourceType, AccessPolicyInteraction.VREAD);
    await this.readUnaudited(resourceType, id);
    const row = this.connection()
      .prepare('SELECT content FROM history WHERE type = ? AND id = ? AND version_id = ? AND deleted = 0')
      .get(resourceType, id, vid) as { content: string } | undefined;
    if (!row) {
      throw new OperationOutcomeError(notFound);
    }
    const resource = JSON.parse(row.content) as WithId<T>;
    return this.present(resource, this.matchPolicy(resource, AccessPolicyInteraction.VREAD));
  }

  async readHistory<T extends Resource>(
    resourceType: string,
    id: string,
    options?: ReadHistoryOptions,
  ): Promise<Bundle<WithId<T>>> {
    this.spend(QUOTA_POINTS.history);
    this.checkTypeInteraction(resourceType, AccessPolicyInteraction.HISTORY);
    const latest = this.connection()
      .prepare('SELECT content FROM history WHERE type = ? AND id = ? AND deleted = 0 ORDER BY seq DESC LIMIT 1')
      .get(resourceType, id) as { content: string } | undefined;
    if (!latest) {
      throw new OperationOutcomeError(notFound);
    }
    // History stays readable after a delete, to whoever could read the last version.
    const last = JSON.parse(latest.content) as Resource;
    this.matchPolicy(last, AccessPolicyInteraction.HISTORY);
    await this.checkBinarySecurityContext(last);
    const limit = Math.min(Math.max(options?.limit ?? 100, 1), 1000);
    const offset = Math.max(options?.offset ?? 0, 0);
    const rows = this.connection()
      .prepare('SELECT deleted, content FROM history WHERE type = ? AND id = ? ORDER BY seq DESC LIMIT ? OFFSET ?')
      .all(resourceType, id, limit, offset) as { deleted: number; content: string | null }[];
    const entry: BundleEntry<WithId<T>>[] = rows.map((row) =>
      row.deleted
        ? { request: { method: 'DELETE', url: `${resourceType}/${id}` }, response: { status: '410' } }
        : { resource: this.presentUnchecked(JSON.parse(row.content as string) as WithId<T>) },
    );
    // Medplum audits the history of a resource that still exists (with its current version).
    const current = this.env.audits && this.loadCurrent(resourceType, id);
    if (current) {
      this.audit('history', current);
    }
    return { resourceType: 'Bundle', type: 'history', entry };
  }

  async search<T extends Resource>(
    searchRequest: SearchRequest<T>,
    _options?: SearchOptions,
  ): Promise<Bundle<WithId<T>>> {
    this.spend(QUOTA_POINTS.search);
    if (searchRequest.types?.length) {
      return this.searchTypes(searchRequest);
    }
    validateResourceType(searchRequest.resourceType);
    this.checkTypeInteraction(searchRequest.resourceType, AccessPolicyInteraction.SEARCH);
    // FHIR's own definitions are every project's (../definitions.ts), asked for with `_filter` too.
    const definitions = DEFINITION_TYPES.has(searchRequest.resourceType);
    // A page of definitions is bounded (each StructureDefinition is tens of KB: a thousand were 31 MB).
    const request = definitions
      ? {
          ...searchRequest,
          filters: filtersOf(searchRequest.filters ?? []),
          count: Math.min(searchRequest.count ?? MAX_DEFINITIONS_PAGE, MAX_DEFINITIONS_PAGE),
        }
      : searchRequest;
    const bundle = await this.read(() =>
      runSearch<T>(this.connection(), request, {
        project: this.caller.system ? undefined : this.caller.project.id,
        policies: this.policiesFor(searchRequest.resourceType, AccessPolicyInteraction.SEARCH),
        policiesOf: (resourceType) => this.policiesFor(resourceType, AccessPolicyInteraction.SEARCH),
        baseUrl: this.env.baseUrl,
        builtIn: definitions ? allDefinitions(searchRequest.resourceType) : undefined,
      }),
    );
    for (const entry of bundle.entry ?? []) {
      entry.resource = entry.resource && this.metaShown(entry.resource);
    }
    if ((searchRequest.include || searchRequest.revInclude) && bundle.entry?.length) {
      const entries = bundle.entry as BundleEntry[];
      await getExtraEntries(
        this,
        searchRequest,
        entries.map((e) => e.resource as WithId<T>),
        entries,
      );
    }
    return bundle;
  }

  /**
   * A search of several types at once (`GET /fhir/R4?_type=A,B&...`, Medplum's searchMultipleTypes): one
   * search of the caller's quota, each type checked as a search of its own (a type she may not search is
   * 403, Binary 400) and filtered by her policy, the same filters on each; the matches together, in
   * `lastUpdated` order when sorted by it (the only order Medplum's union of types is asked for here), a
   * page of them by `_offset` and `_count`.
   */
  private async searchTypes<T extends Resource>(searchRequest: SearchRequest<T>): Promise<Bundle<WithId<T>>> {
    const types = searchRequest.types as string[];
    for (const resourceType of types) {
      validateResourceType(resourceType);
      if (resourceType === 'Binary') {
        throw new OperationOutcomeError(badRequest('Cannot search on Binary resource type'));
      }
      this.checkTypeInteraction(resourceType, AccessPolicyInteraction.SEARCH);
    }
    const sort = searchRequest.sortRules ?? [];
    if (sort.some((rule) => rule.code !== '_lastUpdated') || searchRequest.include || searchRequest.revInclude) {
      throw new OperationOutcomeError(
        badRequest('A search of several types sorts by _lastUpdated only, and includes nothing'),
      );
    }
    const count = Math.min(Math.max(searchRequest.count ?? 20, 0), 1000);
    const offset = checkedOffset(searchRequest.offset);
    const found: WithId<T>[] = [];
    for (const resourceType of types) {
      const page = await this.read(() =>
        runSearch<T>(
          this.connection(),
          {
            ...searchRequest,
            resourceType: resourceType as T['resourceType'],
            types: undefined,
            count: offset + count,
            offset: 0,
            total: undefined,
          },
          {
            project: this.caller.system ? undefined : this.caller.project.id,
            policies: this.policiesFor(resourceType, AccessPolicyInteraction.SEARCH),
            baseUrl: this.env.baseUrl,
          },
        ),
      );
      found.push(...(page.entry ?? []).map((e) => this.metaShown(e.resource as WithId<T>)));
    }
    if (sort.length > 0) {
      const descending = sort[0].descending ? -1 : 1;
      found.sort(
        (a, b) =>
          descending *
          ((a.meta?.lastUpdated ?? '') < (b.meta?.lastUpdated ?? '')
            ? -1
            : (a.meta?.lastUpdated ?? '') > (b.meta?.lastUpdated ?? '')
              ? 1
              : 0),
      );
    }
    return {
      resourceType: 'Bundle',
      type: 'searchset',
      entry: found.slice(offset, offset + count).map((resource) => ({
        fullUrl: `${this.env.baseUrl}fhir/R4/${resource.resourceType}/${resource.id}`,
        search: { mode: 'match' },
        resource,
      })),
    };
  }

  async searchByReference<T extends Resource>(
    searchRequest: SearchRequest<T>,
    referenceField: string,
    references: string[],
  ): Promise<Record<string, WithId<T>[]>> {
    const results: Record<string, WithId<T>[]> = {};
    for (const reference of references) {
      const filters: Filter[] = [
        ...(searchRequest.filters ?? []),
        { code: referenceField, operator: Operator.EQUALS, value: reference },
      ];
      const bundle = await this.search<T>({ ...searchRequest, filters });
      results[reference] = (bundle.entry ?? []).map((e) => e.resource as WithId<T>);
    }
    return results;
  }

  // ---------------------------------------------------------------- writes

  async createResource<T extends Resource>(resource: T, options?: CreateResourceOptions): Promise<WithId<T>> {
    validateResourceType(resource.resourceType);
    this.checkTypeInteraction(resource.resourceType, AccessPolicyInteraction.CREATE);
    if (!this.tx) {
      return this.withTransaction((repo) => repo.createResource(resource, options));
    }
    this.spend(QUOTA_POINTS.write);
    const id = resource.id && (options?.assignedId || this.caller.system) ? resource.id : generateId();
    if (this.loadCurrent(resource.resourceType, id)) {
      throw new OperationOutcomeError(badRequest('Assigned ID is already in use'));
    }
    const { stored, policy } = this.storedCreate(resource, id);
    this.persist(stored, undefined);
    this.recordChange({ interaction: 'create', resource: stored });
    const created = this.present(deepClone(stored), policy);
    this.audit('create', created);
    return created;
  }

  /**
   * What a create of `resource` by this caller stores, as her policy shapes and allows it: its
   * readonly fields dropped, server meta stamped, then checked whole (criteria, writeConstraint). Throws
   * what the create would answer.
   */
  private storedCreate<T extends Resource>(
    resource: T,
    id: string,
  ): { stored: WithId<T>; policy: AccessPolicyResource | undefined } {
    const incoming = this.storedForm(resource);
    const policy = this.writePolicy(incoming, AccessPolicyInteraction.CREATE);
    removeFields(incoming, protectedFieldsOf(policy));
    this.bindToProject(incoming);
    const stored = this.stamp({ ...incoming, id }, undefined);
    validateWrite(stored);
    this.assertWritable(stored, AccessPolicyInteraction.CREATE);
    return { stored, policy };
  }

  /**
   * Points off the caller's FHIR quota, before the work (Medplum's repo.ts charges at each interaction's
   * start: read 1, history 10, search 20, write 100). Writes are charged once each, inside their
   * transaction, whether they came alone or in a Bundle.
   */
  private spend(points: number): void {
    this.env.quota?.consume(this.caller, points);
  }

  /** A copy of what is written, its attachment URLs as references (packages/server/src/fhir/repo.ts). */
  private storedForm<T extends Resource>(resource: T): T {
    const copy = deepClone(resource);
    return this.env.attachments ? this.env.attachments.toReferences(copy) : copy;
  }

  /** Memberships and project users can only ever belong to the caller's own project. */
  private bindToProject(resource: Resource): void {
    if (this.caller.system) {
      return;
    }
    if (resource.resourceType === 'ProjectMembership' || resource.resourceType === 'User') {
      resource.project = { reference: `Project/${this.caller.project.id}` };
    }
  }

  async updateResource<T extends Resource>(resource: T, options?: UpdateResourceOptions): Promise<WithId<T>> {
    return this.update(resource, options, 'update');
  }

  /** An update, audited as what the caller asked for: an update, or the patch it carries out. */
  private async update<T extends Resource>(
    resource: T,
    options: UpdateResourceOptions | undefined,
    interaction: 'update' | 'patch',
  ): Promise<WithId<T>> {
    if (!resource.id) {
      throw new OperationOutcomeError(badRequest('Missing id'));
    }
    validateResourceType(resource.resourceType);
    this.checkTypeInteraction(resource.resourceType, AccessPolicyInteraction.UPDATE);
    const id = resource.id;
    if (!this.tx) {
      return this.withTransaction((repo) => repo.update(resource, options, interaction));
    }
    this.spend(QUOTA_POINTS.write);
    const existing = this.loadCurrent<T>(resource.resourceType, id);
    if (!existing) {
      if (this.isDeleted(resource.resourceType, id)) {
        throw new OperationOutcomeError(gone);
      }
      // Medplum creates by a client-chosen id only for a super admin (the system here); everyone else
      // gets not-found (packages/server/src/fhir/repo.ts, checkExistingResource and canSetId).
      if (options?.ifMatch !== undefined || !this.caller.system) {
        throw new OperationOutcomeError(notFound);
      }
      const stored = this.stamp({ ...deepClone(resource), id }, undefined);
      validateWrite(stored);
      this.persist(stored, undefined);
      this.recordChange({ interaction: 'create', resource: stored });
      return deepClone(stored);
    }
    // Invisible to this caller: same answer as for a resource that does not exist.
    this.matchPolicy(existing, AccessPolicyInteraction.READ);
    const existingPolicy = this.writePolicy(existing, AccessPolicyInteraction.UPDATE);
    if (options?.ifMatch !== undefined && options.ifMatch !== existing.meta?.versionId) {
      throw new OperationOutcomeError(preconditionFailed);
    }
    const incoming = this.storedForm(resource);
    restoreFields(incoming, existing, protectedFieldsOf(existingPolicy));
    const stored = this.stamp({ ...incoming, id }, existing);
    validateWrite(stored);
    this.assertWritable(stored, AccessPolicyInteraction.UPDATE, existing);
    // Medplum does not create a new version for a no-op update (and audits it all the same).
    const unchanged = sameContent(stored, existing);
    if (!unchanged) {
      this.persist(stored, existing);
      this.recordChange({ interaction: 'update', resource: stored, previous: existing });
    }
    const updated = this.present(deepClone(unchanged ? existing : stored), existingPolicy);
    this.audit(interaction, updated);
    return updated;
  }

  async patchResource<T extends Resource>(
    resourceType: T['resourceType'],
    id: string,
    patch: Operation[] | Parameters,
    options?: UpdateResourceOptions,
  ): Promise<WithId<T>> {
    if (!Array.isArray(patch)) {
      throw new OperationOutcomeError(badRequest('Only JSON Patch is supported'));
    }
    if (!this.tx) {
      return this.withTransaction((repo) => repo.patchResource(resourceType, id, patch, options));
    }
    const resource = await this.readUnaudited<T>(resourceType, id);
    const errors = applyPatch(resource, patch).filter(Boolean);
    if (errors.length > 0) {
      throw new OperationOutcomeError(badRequest(errors.map((e) => (e as Error).message).join('\n')));
    }
    return this.update(resource, options, 'patch');
  }

  async deleteResource(resourceType: string, id: string, options?: DeleteResourceOptions): Promise<void> {
    validateResourceType(resourceType);
    this.checkTypeInteraction(resourceType, AccessPolicyInteraction.DELETE);
    if (!this.tx) {
      return this.withTransaction((repo) => repo.deleteResource(resourceType, id, options));
    }
    this.spend(QUOTA_POINTS.write);
    const existing = this.loadCurrent(resourceType, id);
    if (!existing) {
      throw new OperationOutcomeError(this.isDeleted(resourceType, id) ? gone : notFound);
    }
    this.matchPolicy(existing, AccessPolicyInteraction.READ);
    this.writePolicy(existing, AccessPolicyInteraction.DELETE);
    if (options?.ifMatch !== undefined && options.ifMatch !== existing.meta?.versionId) {
      throw new OperationOutcomeError(preconditionFailed);
    }
    const db = this.env.db.writer;
    const now = this.now();
    db.prepare('DELETE FROM resource WHERE type = ? AND id = ?').run(resourceType, id);
    this.unindex(resourceType, id);
    db.prepare(
      'INSERT INTO history (type, id, version_id, last_updated, deleted, content) VALUES (?, ?, ?, ?, 1, NULL)',
    ).run(resourceType, id, generateId(), now);
    this.recordChange({ interaction: 'delete', resource: existing, previous: existing });
    this.audit('delete', existing);
  }

  override async conditionalCreate<T extends Resource>(
    resource: T,
    search: SearchRequest<T>,
    options?: CreateResourceOptions,
  ): Promise<{ resource: WithId<T>; outcome: OperationOutcome }> {
    const result = await super.conditionalCreate(resource, search, options);
    const window = this.env.overlapConflictMs;
    const found = result.outcome.id === allOk.id;
    if (window !== undefined && found) {
      const createdAt = Date.parse(result.resource.meta?.lastUpdated ?? '');
      const mine = this.tx?.changes.some((c) => c.resource.id === result.resource.id) ?? false;
      if (!mine && Date.parse(this.now()) - createdAt < window) {
        throw new OperationOutcomeError(conflict('Concurrent transaction conflict'));
      }
    }
    return result;
  }

  /**
   * Runs `callback` in ONE SQLite transaction: every write in it commits together or not at all.
   * Holds the write lock for the whole callback, so no other write can slip into it.
   */
  async withTransaction<TResult>(
    callback: (txRepo: this) => Promise<TResult>,
    _options?: TransactionOptions,
  ): Promise<TResult> {
    if (this.tx) {
      return this.savepoint(callback);
    }
    return this.env.db.withWriteLock(async () => {
      const db = this.env.db.writer;
      const state: TransactionState = { changes: [], audits: [], depth: 0 };
      const txRepo = new SqliteRepository(this.env, this.caller, state) as this;
      db.exec('BEGIN IMMEDIATE');
      let result: TResult;
      try {
        result = await callback(txRepo);
        db.exec('COMMIT');
      } catch (err) {
        db.exec('ROLLBACK');
        throw err;
      }
      this.env.onCommit?.(state.changes);
      for (const audit of state.audits) {
        void this.env.audits?.write(audit);
      }
      return result;
    });
  }

  private async savepoint<TResult>(callback: (txRepo: this) => Promise<TResult>): Promise<TResult> {
    const state = this.tx as TransactionState;
    const name = `sp${++state.depth}`;
    const db = this.env.db.writer;
    const changesBefore = state.changes.length;
    const auditsBefore = state.audits.length;
    db.exec(`SAVEPOINT ${name}`);
    try {
      const result = await callback(this);
      db.exec(`RELEASE ${name}`);
      return result;
    } catch (err) {
      db.exec(`ROLLBACK TO ${name}`);
      db.exec(`RELEASE ${name}`);
      state.changes.length = changesBefore;
      state.audits.length = auditsBefore;
      throw err;
    } finally {
      state.depth--;
    }
  }

  // ---------------------------------------------------------------- internals

  private now(): string {
    return (this.env.clock?.() ?? new Date()).toISOString();
  }

  private connection() {
    return this.tx ? this.env.db.writer : this.env.db.reader;
  }

  /**
   * Reads outside a transaction. With a file store the reader connection only sees committed data;
   * an in-memory store has a single connection, so plain reads wait for any open transaction.
   */
  private async read<T>(work: () => T): Promise<T> {
    if (this.tx || this.env.db.reader !== this.env.db.writer) {
      return work();
    }
    return this.env.db.withWriteLock(work);
  }

  private loadCurrent<T extends Resource>(resourceType: string, id: string): WithId<T> | undefined {
    const row = this.connection()
      .prepare('SELECT content FROM resource WHERE type = ? AND id = ?')
      .get(resourceType, id) as { content: string } | undefined;
    return row ? (JSON.parse(row.content) as WithId<T>) : undefined;
  }

  private isDeleted(resourceType: string, id: string): boolean {
    return Boolean(
      this.connection()
        .prepare('SELECT 1 FROM history WHERE type = ? AND id = ? AND deleted = 1 LIMIT 1')
        .get(resourceType, id),
    );
  }

  private recordChange(change: ResourceChange): void {
    (this.tx as TransactionState).changes.push({
      ...change,
      resource: deepClone(change.resource),
    });
  }

  /** Sets server-owned meta exactly as Medplum does: the caller cannot forge version, time, author or project. */
  private stamp<T extends Resource>(resource: WithId<T>, existing: WithId<T> | undefined): WithId<T> {
    const incomingMeta: Meta = resource.meta ?? {};
    const caller = this.caller;
    const project = caller.system
      ? (incomingMeta.project ?? existing?.meta?.project ?? caller.project.id)
      : caller.project.id;
    const author: Reference =
      caller.system && incomingMeta.author ? incomingMeta.author : (caller.profile as Reference);
    const patients = getPatientCompartments(resource);
    const accounts = this.accountsFor(resource, existing, patients);
    const meta: Meta = {
      ...incomingMeta,
      versionId: generateId(),
      lastUpdated: this.now(),
      project,
      author,
    };
    delete meta.account;
    delete meta.compartment;
    delete meta.accounts;
    if (accounts.length > 0) {
      meta.accounts = accounts;
    }
    const stamped = { ...resource, meta } as WithId<T>;
    const compartments = new Set<string>();
    if (project) {
      compartments.add(`Project/${project}`);
    }
    for (const account of accounts) {
      if (account.reference) {
        compartments.add(account.reference);
      }
    }
    for (const patient of patients) {
      compartments.add(patient);
    }
    stamped.meta = { ...meta, compartment: [...compartments].map((reference) => ({ reference })) };
    return stamped;
  }

  /**
   * meta.accounts as Medplum computes them (packages/server/src/fhir/repo.ts, getAccounts): a project admin
   * in extended mode (`X-Medplum: extended`), or the system, who sends `meta` gets exactly the accounts
   * sent, nothing added. Anyone else's are derived: the writer's policy compartment on create only (an
   * edit never pulls a resource into the editor's account), then a Patient keeps its own accounts and any
   * other resource takes the accounts of the patients it names; what it had before does not carry over.
   * When that derives nothing, the accounts sent stand (Medplum's result meta starts as the one sent).
   */
  private accountsFor(resource: Resource, existing: Resource | undefined, patients: string[]): Reference[] {
    const privileged =
      this.caller.system || (this.caller.membership.admin === true && this.caller.extendedMode === true);
    const accounts = new Map<string, Reference>();
    const add = (ref: Reference | undefined): void => {
      if (ref?.reference) {
        accounts.set(ref.reference, { reference: ref.reference });
      }
    };
    if (privileged && resource.meta) {
      add(resource.meta.account);
      for (const account of resource.meta.accounts ?? []) {
        add(account);
      }
      return [...accounts.values()];
    }
    if (!existing) {
      add(this.caller.accessPolicy?.compartment);
    }
    if (resource.resourceType === 'Patient') {
      add(existing?.meta?.account);
      for (const account of existing?.meta?.accounts ?? []) {
        add(account);
      }
    }
    for (const patientRef of resource.resourceType === 'Patient' ? [] : patients) {
      const [, patientId] = patientRef.split('/');
      const patient = this.loadCurrent('Patient', patientId);
      add(patient?.meta?.account);
      for (const account of patient?.meta?.accounts ?? []) {
        add(account);
      }
    }
    if (accounts.size === 0) {
      // Nothing derived: Medplum then keeps what the writer sent (its result's meta starts as the one
      // sent, and getAccounts overrides it only with something). Policies must refuse what they do not
      // allow (src/provision/definition.ts, ONLY_OWN_TENANT).
      add(resource.meta?.account);
      for (const account of resource.meta?.accounts ?? []) {
        add(account);
      }
    }
    return [...accounts.values()];
  }

  private persist(resource: WithId<Resource>, existing: WithId<Resource> | undefined): void {
    const db = this.env.db.writer;
    const content = JSON.stringify(resource);
    const { resourceType, id } = resource;
    const versionId = resource.meta?.versionId as string;
    const lastUpdated = resource.meta?.lastUpdated as string;
    if (existing) {
      db.prepare(
        'UPDATE resource SET project = ?, version_id = ?, last_updated = ?, content = ? WHERE type = ? AND id = ?',
      ).run(resource.meta?.project ?? null, versionId, lastUpdated, content, resourceType, id);
      this.unindex(resourceType, id);
    } else {
      db.prepare(
        'INSERT INTO resource (type, id, project, version_id, last_updated, content) VALUES (?, ?, ?, ?, ?, ?)',
      ).run(resourceType, id, resource.meta?.project ?? null, versionId, lastUpdated, content);
    }
    db.prepare(
      'INSERT INTO history (type, id, version_id, last_updated, deleted, content) VALUES (?, ?, ?, ?, 0, ?)',
    ).run(resourceType, id, versionId, lastUpdated, content);
    const insertCompartment = db.prepare('INSERT OR IGNORE INTO compartment (compartment, type, id) VALUES (?, ?, ?)');
    for (const compartment of resource.meta?.compartment ?? []) {
      if (compartment.reference) {
        insertCompartment.run(compartment.reference, resourceType, id);
      }
    }
    const insertReference = db.prepare('INSERT OR IGNORE INTO reference (target, type, id) VALUES (?, ?, ?)');
    for (const target of collectReferences(resource)) {
      insertReference.run(target, resourceType, id);
    }
    const insertToken = db.prepare('INSERT OR IGNORE INTO token (type, code, key, id) VALUES (?, ?, ?, ?)');
    for (const [code, key] of collectTokenKeys(resource)) {
      insertToken.run(resourceType, code, key, id);
    }
  }

  private unindex(resourceType: string, id: string): void {
    const db = this.env.db.writer;
    db.prepare('DELETE FROM compartment WHERE type = ? AND id = ?').run(resourceType, id);
    db.prepare('DELETE FROM reference WHERE type = ? AND id = ?').run(resourceType, id);
    db.prepare('DELETE FROM token WHERE type = ? AND id = ?').run(resourceType, id);
  }

  // ---------------------------------------------------------------- audit

  /**
   * Medplum's save of a REST AuditEvent (packages/server/src/fhir/repo.ts Repository.logEvent, with
   * `saveAuditEvents`): for a successful interaction that names a resource, never for the system's own
   * work nor for an AuditEvent. The save is a create by the caller herself: her policy must allow
   * AuditEvent `create`, and the event, stamped as hers, must meet that entry's criteria and
   * writeConstraint; otherwise it is dropped without a word, as Medplum drops a refused save. Inside a
   * transaction it is written only once that commits (Medplum saves writes' events after the commit).
   */
  private audit(interaction: AuditedInteraction, resource: WithId<Resource>): void {
    const audits = this.env.audits;
    if (!audits || this.caller.system || resource.resourceType === 'AuditEvent') {
      return;
    }
    const event = restAuditEvent({
      interaction,
      resource,
      who: this.caller.profile,
      address: this.caller.login?.remoteAddress,
      client: this.caller.login?.client,
      baseUrl: this.env.baseUrl,
      project: this.caller.project.id as string,
      recorded: this.now(),
    });
    if (this.tx) {
      const allowed = this.allowedAudit(event);
      if (allowed) {
        this.tx.audits.push(allowed);
      }
      return;
    }
    // Not awaited, as on Medplum: the interaction's answer does not wait for its AuditEvent.
    void this.read(() => this.allowedAudit(event))
      .then((allowed) => allowed && audits.write(allowed))
      .catch(() => undefined);
  }

  /** The event as the caller's own create of it would store it, or undefined if her policy refuses that. */
  private allowedAudit(event: AuditEvent): AuditEvent | undefined {
    try {
      this.checkTypeInteraction('AuditEvent', AccessPolicyInteraction.CREATE);
      return this.storedCreate(event, generateId()).stored;
    } catch {
      return undefined;
    }
  }

  // ---------------------------------------------------------------- access policy

  private get policy() {
    return this.caller.system ? undefined : this.caller.accessPolicy;
  }

  /** Type-level check, Medplum's order: a type the policy never grants is 403 before any lookup. */
  private checkTypeInteraction(resourceType: string, interaction: AccessPolicyInteraction): void {
    if (this.caller.system) {
      return;
    }
    if (protectedResourceTypes.includes(resourceType)) {
      throw new OperationOutcomeError(forbidden);
    }
    const policy = this.policy;
    if (policy && !accessPolicySupportsInteraction(policy, interaction, resourceType as ResourceType)) {
      throw new OperationOutcomeError(forbidden);
    }
  }

  /** Instance-level read check: outside every matching entry means "not found" (no existence leak). */
  private matchPolicy(resource: Resource, interaction: AccessPolicyInteraction): AccessPolicyResource | undefined {
    if (!this.caller.system && resource.meta?.project !== this.caller.project.id) {
      throw new OperationOutcomeError(notFound);
    }
    const policy = this.policy;
    if (!policy) {
      return undefined;
    }
    const match = matchingPolicyEntry(resource, interaction, policy);
    if (!match) {
      throw new OperationOutcomeError(notFound);
    }
    return match;
  }

  /** Instance-level write check on the current state: visible but not writable is 403. */
  private writePolicy(resource: Resource, interaction: AccessPolicyInteraction): AccessPolicyResource | undefined {
    const policy = this.policy;
    if (!policy) {
      return undefined;
    }
    const match = matchingPolicyEntry(resource, interaction, policy);
    if (!match && interaction !== AccessPolicyInteraction.CREATE) {
      throw new OperationOutcomeError(forbidden);
    }
    // A create its criteria cannot match yet (no compartments before it is stored): the first entry of
    // its type that grants creating, whose protected fields are dropped (Medplum drops none then: stricter).
    return match ?? policy.resource?.find((entry) => entryAllows(entry, resource.resourceType, interaction));
  }

  /**
   * The stored result of a write must itself satisfy the policy (criteria such as patient=%patient),
   * and every `writeConstraint` FHIRPath of the matching entry must hold, with `%before` (the current
   * version; an empty value on create, as Medplum binds it) and `%after` bound.
   */
  private assertWritable(resource: Resource, interaction: AccessPolicyInteraction, before?: Resource): void {
    const policy = this.policy;
    if (!policy) {
      return;
    }
    const entry = matchingPolicyEntry(resource, interaction, policy);
    if (!entry) {
      throw new OperationOutcomeError(forbidden);
    }
    for (const constraint of entry.writeConstraint ?? []) {
      const expression = constraint.expression ?? '';
      const after = toTypedValue(resource);
      // As Medplum's isResourceWriteable (packages/server/src/fhir/repo.ts): on create `%before` is bound
      // to an empty value, and every constraint is evaluated (none is skipped).
      const variables: Record<string, TypedValue> = {
        '%after': after,
        '%before': before ? toTypedValue(before) : { type: 'undefined', value: undefined },
      };
      const result = evalFhirPathTyped(expression, [after], variables);
      if (result.length !== 1 || result[0].value !== true) {
        throw new OperationOutcomeError(forbidden);
      }
    }
  }

  private policiesFor(resourceType: string, interaction: AccessPolicyInteraction): AccessPolicyResource[] | undefined {
    const policy = this.policy;
    if (!policy) {
      return undefined;
    }
    return (policy.resource ?? []).filter(
      (entry) =>
        (entry.resourceType === resourceType || entry.resourceType === '*') &&
        (entry.interaction ? entry.interaction.includes(interaction) : true),
    );
  }

  /**
   * A resource as this caller is shown it (packages/server/src/fhir/repo.ts removeHiddenFields): without her
   * policy's hidden fields, and, unless the request said `X-Medplum: extended` (MedplumClient always does; a
   * plain `fetch` does not), without the meta Medplum stamps (author, project, accounts, compartments): what
   * such a client reads and writes back then carries no accounts, as on Medplum.
   */
  private present<T extends Resource>(resource: WithId<T>, policy: AccessPolicyResource | undefined): WithId<T> {
    return this.metaShown(removeFields(resource, hiddenFieldsOf(policy)));
  }

  private metaShown<T extends Resource>(resource: WithId<T>): WithId<T> {
    if (this.caller.extendedMode !== false || this.caller.system || !resource.meta) {
      return resource;
    }
    const { author, project, account, accounts, compartment, deleted, ...shown } = resource.meta;
    return { ...resource, meta: shown } as WithId<T>;
  }

  private presentUnchecked<T extends Resource>(resource: WithId<T>): WithId<T> {
    const policy = this.policy;
    if (!policy) {
      return resource;
    }
    return this.present(resource, matchingPolicyEntry(resource, AccessPolicyInteraction.HISTORY, policy));
  }
}

/**
 * An update that changes nothing, as Medplum decides it (packages/server/src/fhir/repo.ts isNotModified:
 * core's `deepEquals` of the stored and the written resource, which ignores `meta.versionId`,
 * `meta.lastUpdated` and `meta.author`, and the order of keys): no new version, no subscription. So a
 * bot that writes back what a clinician already wrote leaves her the last author, as on Medplum.
 */
/** The most definitions one search answers (its `next` link pages on). */
export const MAX_DEFINITIONS_PAGE = 20;

/** `Type/id` of a reference to read; anything else is 400. */
function referenceParts(reference: Reference): [string, string] {
  const [type, id, extra] = (reference.reference ?? '').split('/');
  if (!type || !id || extra !== undefined) {
    throw new OperationOutcomeError(badRequest('Invalid reference'));
  }
  return [type, id];
}

function sameContent(a: Resource, b: Resource): boolean {
  return deepEquals(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
}
