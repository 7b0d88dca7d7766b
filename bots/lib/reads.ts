import type { MedplumClient } from '@medplum/core';

/** The HTTP calls through which MedplumClient writes (create, update, patch, delete, batches and transactions). */
const WRITES = new Set(['post', 'put', 'patch', 'delete']);

/**
 * One bot run's client, asking Medplum each read once (fewer round trips per run): the rules a run
 * applies read the same Patient, plan or service more than once (the gate, then the workflow), through
 * different calls (`readReference`, `readResource`, `searchOne`...) that all come down to MedplumClient's
 * `get` of a URL. So the client's own methods run with this wrapper as `this`, and a `get` of a URL the run
 * has already read answers from that read, as a copy (a caller may change what it got). Any write forgets
 * every read, so what is read after a write is fresh; a read asked `cache: 'no-cache'` is always asked; a
 * failed read is not kept. Nothing outlives the run: each run makes its own.
 */
export function readingOnce(medplum: MedplumClient): MedplumClient {
  const reads = new Map<string, Promise<unknown>>();
  const client: MedplumClient = new Proxy(medplum, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') {
        return value;
      }
      const method = value as (...args: unknown[]) => unknown;
      if (property === 'get') {
        return (url: unknown, options?: { cache?: string }) => {
          if (options?.cache === 'no-cache') {
            return method.call(client, url, options);
          }
          const key = `${String(url)} ${JSON.stringify(options ?? {})}`;
          let read = reads.get(key);
          if (!read) {
            read = Promise.resolve(method.call(client, url, options));
            reads.set(key, read);
            read.catch(() => {
              if (reads.get(key) === read) {
                reads.delete(key);
              }
            });
          }
          return read.then(copyOf);
        };
      }
      if (typeof property === 'string' && WRITES.has(property)) {
        return (...args: unknown[]) => {
          reads.clear();
          return method.apply(client, args);
        };
      }
      return (...args: unknown[]) => method.apply(client, args);
    },
  });
  return client;
}

/** A deep copy of what a read answered. */
function copyOf(value: unknown): unknown {
  return value === undefined || value === null || typeof value !== 'object'
    ? value
    : (JSON.parse(JSON.stringify(value)) as unknown);
}

/**
 * A read asked now, ahead of the code that needs it (which asks the same and, through `readingOnce`, gets
 * this one): reads a later step is sure to make go out with the first (fewer round trips). Its failure
 * is the later step's to handle, never an unhandled rejection.
 */
export function ahead<T>(read: Promise<T>): Promise<T> {
  read.catch(() => undefined);
  return read;
}
