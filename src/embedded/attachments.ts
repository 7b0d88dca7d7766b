import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Binary } from '@medplum/fhirtypes';
import { type BinaryOrigins, binaryIdOf, defaultStorageBaseUrl } from '../../contracts/attachments';
import type { SqliteRepository } from './store/repo';

/** How long a presigned URL serves its Binary (Medplum: one hour, packages/server/src/storage/presign.ts). */
const PRESIGNED_LIFETIME_SECONDS = 3600;

/**
 * Attachment URLs as Medplum handles them (packages/server/src/fhir/rewrite.ts): every `url` or `path`
 * that names a Binary is stored as `Binary/<id>` whatever form it was written in, and handed to each
 * reader as a presigned `<storageBaseUrl><id>/<versionId>?Expires=…&Signature=…` when that reader may
 * read the Binary (its policy and its security context), else left as `Binary/<id>`. Nothing inside a
 * Binary is rewritten. The signature here is an HMAC with a key of this process (Medplum signs with its
 * private key); a URL outlives neither its hour nor a restart.
 */
export class AttachmentUrls {
  readonly origins: Required<BinaryOrigins>;
  private readonly key = randomBytes(32);

  constructor(
    baseUrl: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.origins = { baseUrl, storageBaseUrl: defaultStorageBaseUrl(baseUrl) };
  }

  /** What a write stores: every Binary URL as `Binary/<id>`, no access check (Medplum's REFERENCE mode). */
  toReferences<T>(value: T): T {
    return rewrite(value, (url) => {
      const id = binaryIdOf(url, this.origins);
      return id ? `Binary/${id}` : url;
    });
  }

  /** What a reader gets: presigned URLs for the Binaries `repo` may read, `Binary/<id>` for the others. */
  async presign<T>(value: T, repo: SqliteRepository): Promise<T> {
    const found = new Map<string, string>();
    collect(value, (url) => {
      const id = binaryIdOf(url, this.origins);
      if (id) {
        found.set(url, id);
      }
    });
    if (found.size === 0) {
      return value;
    }
    const signed = new Map<string, string>();
    for (const [url, id] of found) {
      const binary = await repo.readResource<Binary>('Binary', id).catch(() => undefined);
      signed.set(url, binary?.meta?.versionId ? this.sign(id, binary.meta.versionId) : `Binary/${id}`);
    }
    return rewrite(value, (url) => signed.get(url) ?? url);
  }

  private sign(id: string, versionId: string): string {
    const url = new URL(`${this.origins.storageBaseUrl}${id}/${versionId}`);
    url.searchParams.set('Expires', String(Math.floor(this.now().getTime() / 1000) + PRESIGNED_LIFETIME_SECONDS));
    url.searchParams.set('Signature', this.signature(url.toString()));
    return url.toString();
  }

  private signature(unsigned: string): string {
    return createHmac('sha256', this.key).update(unsigned).digest('base64url');
  }

  /**
   * The Binary a presigned URL serves, as Medplum's storage route checks it (packages/server/src/storage/
   * routes.ts): no signature 401, expired 410, a signature that does not match 401.
   */
  verify(url: URL): { status: 200; id: string; versionId: string } | { status: 401 | 404 | 410 } {
    const signature = url.searchParams.get('Signature');
    if (!signature) {
      return { status: 401 };
    }
    const expires = Number(url.searchParams.get('Expires'));
    if (!Number.isFinite(expires) || Math.floor(this.now().getTime() / 1000) > expires) {
      return { status: 410 };
    }
    const unsigned = new URL(url);
    unsigned.searchParams.delete('Signature');
    const expected = Buffer.from(this.signature(unsigned.toString()));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      return { status: 401 };
    }
    const [id, versionId] = url.pathname.split('/').slice(-2);
    return id && versionId ? { status: 200, id, versionId } : { status: 404 };
  }
}

/** Each `url`/`path` string outside a Binary, depth first (iterative: bodies are already depth-bounded). */
function collect(value: unknown, visit: (url: string) => void): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object' || (node as { resourceType?: string }).resourceType === 'Binary') {
      continue;
    }
    for (const [key, child] of Object.entries(node)) {
      if ((key === 'url' || key === 'path') && typeof child === 'string') {
        visit(child);
      } else if (child !== null && typeof child === 'object') {
        stack.push(child);
      }
    }
  }
}

/** A copy with every `url`/`path` string outside a Binary replaced; the value itself when none changes. */
function rewrite<T>(value: T, replace: (url: string) => string): T {
  if (value === null || typeof value !== 'object' || (value as { resourceType?: string }).resourceType === 'Binary') {
    return value;
  }
  if (Array.isArray(value)) {
    let changed = false;
    const items = value.map((item) => {
      const next = rewrite(item, replace);
      changed ||= next !== item;
      return next;
    });
    return (changed ? items : value) as T;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [key, child] of Object.entries(value)) {
    const next =
      (key === 'url' || key === 'path') && typeof child === 'string' ? replace(child) : rewrite(child, replace);
    if (next !== child) {
      copy ??= { ...(value as Record<string, unknown>) };
      copy[key] = next;
    }
  }
  return (copy ?? value) as T;
}
