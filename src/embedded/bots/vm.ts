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

const botRequire = createRequire(import.meta.url);

/**
 * Runs a bot exactly as Medplum's `vmcontext` runtime does (packages/server/src/bots/vmcontext.ts):
 * a fresh `node:vm` context whose only globals are console, fetch, require, ContentType, Hl7Message,
 * MedplumClient, the text/stream codecs, URL, URLSearchParams, Headers, Request and Response (no
 * process, Buffer or timers); the bundle defines `exports.handler`, which gets a MedplumClient made
 * inside the sandbox from the base URL and the bot's token. `timeoutMs` bounds synchronous work (vm
 * timeout) and the whole run (the returned promise is raced against a timer outside the sandbox).
 */
export async function runBotBundle(request: VmBotRequest): Promise<unknown> {
  const sandbox = {
    ...vmcontextGlobals(request.fetch, request.console),
    event: { ...request.event, baseUrl: request.baseUrl, accessToken: request.accessToken },
  };
  const wrapped = `
const exports = {};
const module = { exports };
${request.code}
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
  const running = vm.runInNewContext(wrapped, sandbox, { timeout: request.timeoutMs }) as Promise<unknown>;
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
  return vm.runInNewContext(wrapped, vmcontextGlobals(fetch), { timeout: 1000 }) as string;
}

/** Exactly the globals of Medplum's vmcontext sandbox, nothing else (no process, Buffer or timers). */
function vmcontextGlobals(fetchImpl: typeof fetch, botConsole?: VmBotRequest['console']) {
  return {
    console: botConsole ?? silentConsole,
    fetch: fetchImpl,
    require: botRequire,
    ContentType,
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
}

const noop = (): void => undefined;
const silentConsole = { log: noop, error: noop, warn: noop, info: noop, debug: noop };
