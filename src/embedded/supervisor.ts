import { type MedplumThread, type MedplumThreadOptions, startMedplumThread } from './thread';

/** Restarts allowed within RESTART_WINDOW_MS before the supervisor gives up (a thread that keeps dying). */
export const MAX_RESTARTS = 3;
export const RESTART_WINDOW_MS = 10 * 60_000;

export type SupervisorEvent =
  | { kind: 'stopped'; reason: string }
  | { kind: 'restarted'; restarts: number; afterMs: number }
  | { kind: 'gave-up'; reason: string };

export interface SupervisorOptions {
  /** What happened, for the operator's log: reasons are codes (ERR_WORKER_OUT_OF_MEMORY...), never data. */
  onEvent?(event: SupervisorEvent): void;
  /** Tests: how a thread is started (default: startMedplumThread). */
  start?(options: MedplumThreadOptions): Promise<MedplumThread>;
}

/**
 * The embedded Medplum thread, restarted on its store when it dies. While it is down, calls
 * fail as unreachable, which the gateway answers 503; the restarted thread serves the same store, project
 * and signing keys, so patients' tokens and every acknowledged write (WAL, synchronous=FULL) are still
 * there, and a transaction cut off by the death was never committed.
 *
 * It is not restarted where that would lose data or hide a fault: an in-memory store (a restart would be
 * an empty Medplum), more than MAX_RESTARTS deaths in RESTART_WINDOW_MS, or a restart that fails. Then
 * `stopped` settles and the process should exit for its own supervisor (`npm start` exits 1).
 */
export async function superviseMedplumThread(
  options: MedplumThreadOptions,
  { onEvent = () => undefined, start = startMedplumThread }: SupervisorOptions = {},
): Promise<MedplumThread> {
  let current: MedplumThread | undefined = await start(options);
  const first = current;
  // Back on the same address, whatever port the first one was given.
  const again: MedplumThreadOptions = { ...options, httpPort: first.httpPort ?? options.httpPort };
  const deaths: number[] = [];
  let closing = false;
  let restarts = 0;
  let giveUp: (err: Error | undefined) => void = () => undefined;
  const stopped = new Promise<Error | undefined>((resolve) => {
    giveUp = resolve;
  });

  const watch = (thread: MedplumThread) => {
    thread.stopped.then(async (err) => {
      current = undefined;
      if (closing || !err) {
        giveUp(err);
        return;
      }
      const reason = reasonOf(err);
      onEvent({ kind: 'stopped', reason });
      const now = Date.now();
      deaths.push(now);
      const recent = deaths.filter((at) => now - at < RESTART_WINDOW_MS).length;
      const refusal =
        options.dbPath === ':memory:'
          ? 'in-memory store: a restart would be an empty Medplum'
          : recent > MAX_RESTARTS
            ? `${recent} deaths in ${RESTART_WINDOW_MS / 60_000} minutes`
            : undefined;
      if (refusal) {
        onEvent({ kind: 'gave-up', reason: `${reason}; ${refusal}` });
        giveUp(err);
        return;
      }
      try {
        const next = await start(again);
        if (next.projectId !== first.projectId || next.edgeStatementKey !== first.edgeStatementKey) {
          await next.close();
          throw new Error('the restarted Medplum is not the same project');
        }
        if (closing) {
          await next.close();
          return;
        }
        restarts++;
        current = next;
        onEvent({ kind: 'restarted', restarts, afterMs: Date.now() - now });
        watch(next);
      } catch (failed) {
        onEvent({ kind: 'gave-up', reason: `restart failed (${reasonOf(failed)})` });
        giveUp(failed instanceof Error ? failed : err);
      }
    });
  };
  watch(first);

  const down = () => new TypeError('fetch failed: the embedded Medplum is restarting');
  return {
    baseUrl: first.baseUrl,
    projectId: first.projectId,
    edgeStatementKey: first.edgeStatementKey,
    httpPort: first.httpPort,
    get demoTokens() {
      return (current ?? first).demoTokens;
    },
    get demoApps() {
      return (current ?? first).demoApps;
    },
    get graphql() {
      return (current ?? first).graphql;
    },
    fetch: ((input: RequestInfo | URL, init?: RequestInit) =>
      current ? current.fetch(input, init) : Promise.reject(down())) as typeof fetch,
    cpuUsage: () => (current ? current.cpuUsage() : Promise.resolve(Number.NaN)),
    stopped,
    async close() {
      closing = true;
      await current?.close();
      giveUp(undefined);
    },
    async kill() {
      await current?.kill();
    },
  };
}

/** An error's code or name: never its message, which may hold data. */
export function reasonOf(err: unknown): string {
  const { code, name } = (err ?? {}) as { code?: unknown; name?: unknown };
  return typeof code === 'string' ? code : typeof name === 'string' ? name : 'exit';
}
