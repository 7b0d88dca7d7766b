import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { withBufferedBody } from '../shared/buffered-body';
import type { OriginRule } from '../shared/cors';
import { headerRecord, plainCall, requestBytes } from '../shared/fetch-init';

/**
 * `npm start`'s embedded Medplum on a thread of its own, provisioned with the demo tenants.
 *
 * Medplum's work per call (auth, access policy, SQLite, JSON) is most of a call's cost, and on one
 * thread the gateway's work queued behind it. On its own thread Medplum takes a CPU as a real
 * Medplum has its own hosts; the gateway reaches it with a fetch that passes each call as a message
 * (plain values and bytes, no HTTP). The thread has its own V8 heap, but it shares the process and
 * its files: this is not a security boundary, Medplum's access policies are.
 */
export interface MedplumThreadOptions {
  /** SQLite file, or ':memory:'. */
  dbPath: string;
  /** Medplum's base URL and issuer, ending in `/`. */
  baseUrl: string;
  /** Also serve Medplum's HTTP API on this port, as a real Medplum does (0: any free port). */
  httpPort?: number;
  /** The interface it listens on; absent: all of them (Node's default). */
  hostname?: string;
  /** Origins whose pages may call that API from a browser. */
  corsOrigins?: OriginRule[];
}

export interface MedplumThread {
  baseUrl: string;
  projectId: string;
  /** A token for each demo patient, by key (`alice`, ...). */
  demoTokens: Record<string, string>;
  /** Each demo tenant's patient app (its client id), by tenant key. */
  demoApps: Record<string, string>;
  /** Where Medplum's HTTP API listens, when asked to (`httpPort`). */
  httpPort?: number;
  /** The key the gateway signs its edge statements with (the Project secret the bots check). */
  edgeStatementKey: string;
  /** Medplum's GraphQL schema, built at start (thread-entry.ts `buildGraphqlSchema`), and how long it took. */
  graphql: { built: boolean; ms: number };
  /** Reaches Medplum on its thread: give it to the gateway (`medplum.fetch`). */
  fetch: typeof fetch;
  /** CPU time (µs, user + system) that Medplum's thread has used. */
  cpuUsage(): Promise<number>;
  /** Settles when the thread has stopped: with the error that stopped it, or undefined (`close()`, exit 0). */
  stopped: Promise<Error | undefined>;
  close(): Promise<void>;
  /**
   * Stops the thread at once, as a crash would: calls in flight fail as unreachable and `stopped` settles
   * with an error (a supervisor then restarts it). For a stuck thread, and for the failure tests.
   */
  kill(): Promise<void>;
}

/** Gateway -> Medplum thread. */
export type ThreadRequest =
  | {
      kind: 'fetch';
      id: number;
      method: string;
      url: string;
      headers: Record<string, string>;
      body?: Uint8Array<ArrayBuffer>;
    }
  | { kind: 'cpu'; id: number };

/** Medplum thread -> gateway. */
export type ThreadReply =
  | {
      kind: 'ready';
      projectId: string;
      demoTokens: Record<string, string>;
      demoApps: Record<string, string>;
      edgeStatementKey: string;
      httpPort?: number;
      /** Medplum's GraphQL schema, built at start (thread-entry.ts `buildGraphqlSchema`), and how long it took. */
      graphql: { built: boolean; ms: number };
    }
  | { kind: 'startFailed'; message: string }
  | {
      kind: 'response';
      id: number;
      status: number;
      statusText: string;
      headers: [string, string][];
      body: Uint8Array<ArrayBuffer>;
    }
  | { kind: 'failed'; id: number }
  | { kind: 'cpu'; id: number; micros: number };

interface Pending {
  resolve(reply: ThreadReply): void;
  reject(err: Error): void;
}

/** Statuses whose Response must have no body (101 never comes back from a fetch). */
const NULL_BODY = new Set([204, 205, 304]);

/** How fetch fails when the other side is not there: TypeError, which callers read as "unreachable". */
const unreachable = (why: string, cause?: unknown) => new TypeError(`fetch failed: ${why}`, { cause });

/**
 * The Medplum thread's old-generation heap limit: well above what admission lets it hold live (GraphQL's
 * schema, about 500 MB once built, plus at most 128 bot runs and 2 GraphQL queries at once), and low
 * enough that V8 sizes its heap modestly; the GC pacer (gc-pacer.ts) collects the garbage bot runs leave.
 */
const MEDPLUM_THREAD_HEAP_MB = 1024;

export async function startMedplumThread(options: MedplumThreadOptions): Promise<MedplumThread> {
  // The entry is TypeScript run through tsx, as the rest of `npm start`. Under tsx the thread inherits
  // the process's options (Node's default, which keeps --inspect, --cpu-prof...); elsewhere (the test
  // runner) it is given tsx alone, found from here, so that any working directory will do.
  const underTsx = process.execArgv.some((arg) => arg.includes('tsx'));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const worker = new Worker(new URL('./thread-entry.ts', import.meta.url), {
    workerData: options,
    ...(underTsx ? {} : { execArgv: ['--import', tsx] }),
    resourceLimits: { maxOldGenerationSizeMb: MEDPLUM_THREAD_HEAP_MB },
  });
  const pending = new Map<number, Pending>();
  let nextId = 0;
  let stoppedWith: Error | undefined;
  let running = true;
  let closing = false;

  const stopped = new Promise<Error | undefined>((resolve) => {
    worker.once('error', (err) => {
      stoppedWith = err;
    });
    worker.once('exit', (code) => {
      running = false;
      if (!closing && code !== 0) {
        stoppedWith ??= new Error(`the embedded Medplum thread exited with code ${code}`);
      }
      for (const call of pending.values()) {
        call.reject(unreachable('the embedded Medplum has stopped'));
      }
      pending.clear();
      resolve(stoppedWith);
    });
  });

  const ready = new Promise<Extract<ThreadReply, { kind: 'ready' }>>((resolve, reject) => {
    worker.on('message', (reply: ThreadReply) => {
      if (reply.kind === 'ready') {
        resolve(reply);
        return;
      }
      if (reply.kind === 'startFailed') {
        reject(new Error(reply.message));
        return;
      }
      const call = pending.get(reply.id);
      pending.delete(reply.id);
      call?.resolve(reply);
    });
    stopped.then((err) => reject(err ?? new Error('the embedded Medplum thread stopped while starting')));
  });

  const send = (request: Omit<ThreadRequest, 'id'>, transfer: ArrayBuffer[], signal?: AbortSignal | null) =>
    new Promise<ThreadReply>((resolve, reject) => {
      if (!running) {
        reject(unreachable('the embedded Medplum has stopped'));
        return;
      }
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const id = nextId++;
      const onAbort = () => {
        // Medplum may still finish the call; its reply is then dropped.
        pending.delete(id);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle =
        <T>(done: (value: T) => void) =>
        (value: T) => {
          signal?.removeEventListener('abort', onAbort);
          done(value);
        };
      pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      try {
        worker.postMessage({ ...request, id } as ThreadRequest, transfer);
      } catch (err) {
        pending.delete(id);
        settle(reject)(unreachable('the call could not be passed to the embedded Medplum', err));
      }
    });

  const threadFetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const { call, transfer } = await describe(input, init);
    // As fetch: the init's signal (null: none) over the Request's own.
    const signal = init && 'signal' in init ? init.signal : input instanceof Request ? input.signal : undefined;
    const reply = await send(call, transfer, signal);
    if (reply.kind !== 'response') {
      throw unreachable('the embedded Medplum could not answer');
    }
    const noBody = NULL_BODY.has(reply.status) || call.method === 'HEAD';
    const response = new Response(noBody ? null : reply.body, {
      status: reply.status,
      statusText: reply.statusText,
      headers: reply.headers,
    });
    return withBufferedBody(response, reply.body);
  }) as typeof fetch;

  const started = await ready;
  return {
    baseUrl: options.baseUrl,
    projectId: started.projectId,
    demoTokens: started.demoTokens,
    demoApps: started.demoApps,
    httpPort: started.httpPort,
    edgeStatementKey: started.edgeStatementKey,
    graphql: started.graphql,
    fetch: threadFetch,
    async cpuUsage() {
      const reply = await send({ kind: 'cpu' }, []);
      return reply.kind === 'cpu' ? reply.micros : Number.NaN;
    },
    stopped,
    async close() {
      closing = true;
      await worker.terminate();
    },
    async kill() {
      stoppedWith ??= Object.assign(new Error('the embedded Medplum thread was killed'), { code: 'KILLED' });
      await worker.terminate();
    },
  };
}

/**
 * A fetch call as a message: as it is when it is a `plainCall`, otherwise through Request, so that fetch's
 * own rules decide its bytes and its Content-Type. The bytes sent are always our own, handed over:
 * a caller's buffer stays the caller's, and a view is not posted as is (that would copy its whole
 * backing buffer, such as a Buffer pool slab holding other requests' bytes, to the other thread).
 */
async function describe(
  input: RequestInfo | URL,
  init: RequestInit | undefined,
): Promise<{ call: Omit<Extract<ThreadRequest, { kind: 'fetch' }>, 'id'>; transfer: ArrayBuffer[] }> {
  const plain = plainCall(input, init);
  if (plain) {
    const bytes = await requestBytes(plain.body);
    const own = typeof plain.body === 'string' ? bytes : bytes?.slice();
    return {
      call: { kind: 'fetch', method: plain.method, url: plain.url.href, headers: plain.headers, body: own },
      transfer: own ? [own.buffer] : [],
    };
  }
  const request = new Request(input, init);
  const bytes = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
  return {
    call: {
      kind: 'fetch',
      method: request.method,
      url: request.url,
      headers: headerRecord(request.headers),
      body: bytes,
    },
    transfer: bytes ? [bytes.buffer] : [],
  };
}
