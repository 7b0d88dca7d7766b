import { createRequire } from 'node:module';
import vm from 'node:vm';
import type { BotEvent } from '@medplum/core';
import { ContentType, Hl7Message, MedplumClient } from '@medplum/core';

export interface VmBotRequest {
  /** The deployed single-file CommonJS bundle (sets `exports.handler`). */
  code: string;
  /** What the bot's MedplumClient talks to, signed in as the bot's own membership. */
  baseUrl: string;
  accessToken: string;
  /** The `fetch` global of the sandbox: the in-process embedded server, or the network. */
  fetch: typeof fetch;
  event: Omit<BotEvent, 'bot'> & { bot: BotEvent['bot'] };
  timeoutMs: number;
  console?: Pick<Console, 'log' | 'error' | 'warn' | 'info' | 'debug'>;
}

const hostRequire = createRequire(import.meta.url);

/**
 * Runs a bot exactly as Medplum's `vmcontext` runtime does (packages/server/src/bots/vmcontext.ts):
 * a fresh `node:vm` context whose only globals are console, fetch, require, ContentType, Hl7Message,
 * MedplumClient, the text/stream codecs, URL, URLSearchParams, Headers, Request and Response (no
 * process, Buffer or timers); the bundle defines `exports.handler`, which gets a MedplumClient made
 * inside the sandbox from the base URL and the bot's token. `timeoutMs` bounds synchronous work (vm
 * timeout) and the whole run (the returned promise is raced against a timer outside the sandbox).
 *
 * Warm, not shared: a bundle is compiled once (V8 then reuses its code in every context it runs in),
 * and each run takes a context of its own, never used before, from a small pool refilled after the
 * run is under way. What the contexts would share is not shared: the classes among the globals
 * above are subclassed in each context, `fetch` is wrapped per run, and the modules `require`
 * hands out are frozen copies, so that no run can leave anything there for the next one
 * (test/embedded/bot-runtime.test.ts). node:vm is not a security boundary (nor is Medplum's
 * vmcontext): the isolation is against state leaking between runs of our own bots, not against a
 * hostile bundle.
 */
export async function runBotBundle(request: VmBotRequest): Promise<unknown> {
  const context = contexts.take();
  // A function of this run's own: a property set on it cannot reach the next run.
  context.fetch = (input: RequestInfo | URL, init?: RequestInit) => request.fetch(input, init);
  context.console = request.console ?? silentConsole;
  context.event = Object.freeze({ ...request.event, baseUrl: request.baseUrl, accessToken: request.accessToken });
  const running = scriptFor(request.code).runInContext(context, { timeout: request.timeoutMs }) as Promise<unknown>;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Bot timed out after ${request.timeoutMs} ms`)), request.timeoutMs);
  });
  try {
    return await Promise.race([running, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Loads a bundle in a fresh vmcontext sandbox without calling it: what `typeof exports.handler` is. */
export function loadBotBundle(code: string): string {
  const wrapped = `const exports = {};\nconst module = { exports };\n${code}\n;typeof exports.handler;`;
  return vm.runInContext(wrapped, createBotContext(), { timeout: 1000 }) as string;
}

/** Compiled bundles by their code, most recently used last; a redeployed bundle is new code. */
const compiled = new Map<string, vm.Script>();
const MAX_COMPILED = 32;

function scriptFor(code: string): vm.Script {
  let script = compiled.get(code);
  if (script) {
    compiled.delete(code);
  } else {
    script = new vm.Script(wrap(code), { filename: 'bot.js' });
    if (compiled.size >= MAX_COMPILED) {
      compiled.delete(compiled.keys().next().value as string);
    }
  }
  compiled.set(code, script);
  return script;
}

function wrap(code: string): string {
  return `
const exports = {};
const module = { exports };
${code}
;(async () => {
  const { bot, baseUrl, accessToken, requester, input, contentType, secrets, traceId, headers } = event;
  const medplum = new MedplumClient({ baseUrl, fetch, cacheTime: 0 });
  medplum.setAccessToken(accessToken);
  if (typeof exports.handler !== 'function') {
    throw new Error('Bot bundle does not export a handler');
  }
  return exports.handler(medplum, { bot, requester, input, contentType, secrets, traceId, headers });
})();
`;
}

/**
 * Contexts made ahead of the runs that take them (each is used once): making one is most of what a
 * run costs the thread, so it is done after the run that emptied the pool has started.
 */
class ContextPool {
  private readonly ready: vm.Context[] = [];
  private refilling = false;

  constructor(private readonly size: number) {}

  take(): vm.Context {
    const context = this.ready.pop() ?? createBotContext();
    if (!this.refilling) {
      this.refilling = true;
      setImmediate(() => {
        this.refilling = false;
        while (this.ready.length < this.size) {
          this.ready.push(createBotContext());
        }
      });
    }
    return context;
  }
}

const contexts = new ContextPool(4);

/** The globals of Medplum's vmcontext sandbox, nothing else (no process, Buffer or timers). */
function createBotContext(): vm.Context {
  const context = vm.createContext({
    ...HOST_CLASSES,
    ContentType: CONTENT_TYPE,
    require: botRequire,
    fetch: undefined,
    console: silentConsole,
  });
  OWN_CLASSES.runInContext(context);
  return context;
}

/**
 * The classes among the globals are the host's; each context gets subclasses of its own, so that
 * what a run does to `URL.prototype` or `MedplumClient.prototype` stays in its context (the host's
 * own classes are left as they are: freezing them would break whatever else patches them, such as
 * msw, and Node's own code that assigns to their instances).
 */
const HOST_CLASSES = {
  Hl7Message,
  MedplumClient,
  TextDecoder,
  TextEncoder,
  TextDecoderStream,
  TextEncoderStream,
  ReadableStream,
  WritableStream,
  TransformStream,
  URL,
  URLSearchParams,
  Headers,
  Request,
  Response,
};

const OWN_CLASSES = new vm.Script(
  `for (const name of ${JSON.stringify(Object.keys(HOST_CLASSES))}) {
    const Host = globalThis[name];
    globalThis[name] = { [name]: class extends Host {} }[name];
  }`,
  { filename: 'bot-globals.js' },
);

const CONTENT_TYPE = Object.freeze({ ...ContentType });

/** Modules as a bot gets them: the host's, as frozen copies (a bot cannot replace what another run calls). */
const modules = new Map<string, unknown>();

const botRequire = Object.freeze(function require(id: string): unknown {
  let module = modules.get(id);
  if (!module) {
    const loaded = hostRequire(id) as unknown;
    module =
      typeof loaded === 'object' && loaded !== null
        ? Object.freeze(Object.assign(Object.create(Object.getPrototypeOf(loaded)), loaded))
        : loaded;
    modules.set(id, module);
  }
  return module;
});

const noop = (): void => undefined;
const silentConsole = Object.freeze({ log: noop, error: noop, warn: noop, info: noop, debug: noop });
