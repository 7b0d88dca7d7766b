import { createRequire } from 'node:module';
import { basename, resolve } from 'node:path';
import vm from 'node:vm';
import { MedplumClient } from '@medplum/core';
import type { Bot } from '@medplum/fhirtypes';
import { build, type Plugin } from 'esbuild';
import { SYSTEMS } from '../../contracts/systems';
import { botBuildOptions, botEntries } from '../../scripts/bot-build';
import { startTestBackend } from '../support/backend';

/**
 * Issue 40 item 3: what a bot's input check costs its bundle and the start of every run, as built (the
 * contract as JSON Schema, checked by bots/lib/input.ts) and with the contract's own zod schemas bundled
 * (test/bench/zod-bots/: `readInput` by `safeParse`, `@hono/zod-openapi` as zod's constructors by name,
 * minified: the smallest honest way). Medplum's vmcontext runtime evaluates the whole bundle in a fresh
 * context on every run, so a bundle's top level is paid by every call.
 */
export type Variant = 'schema' | 'zod';
export const VARIANTS: Variant[] = ['schema', 'zod'];

/** Every bot's bundle, by key, as the variant builds it (in memory; the schema variant is dist/bots). */
export async function botBundles(variant: Variant): Promise<Record<string, string>> {
  const entries = botEntries();
  const built = await Promise.all(
    entries.map(async (entry) => {
      const options = botBuildOptions(entry);
      const zod =
        variant === 'zod'
          ? {
              minify: true,
              alias: { '@hono/zod-openapi': resolve('test/bench/zod-bots/zod-openapi.ts') },
              plugins: [zodInput],
            }
          : {};
      const result = await build({ ...options, ...zod, write: false, outfile: 'bot.js' });
      return [basename(entry, '.ts'), result.outputFiles[0].text] as const;
    }),
  );
  return Object.fromEntries(built);
}

/** The bots' `./lib/input` (or `./input`) as the zod variant's. */
const zodInput: Plugin = {
  name: 'zod-input',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\/(lib\/)?input$/ }, (args) =>
      args.importer.includes('/bots/') ? { path: resolve('test/bench/zod-bots/input.ts') } : undefined,
    );
  },
};

/**
 * The floor of any zod in a bundle: zod's constructors and one small schema (sms-opt-out's), as if the
 * contracts were split so that a bot evaluated only its own input's schema.
 */
export async function zodAloneBundle(): Promise<string> {
  const result = await build({
    stdin: {
      contents: `import { z } from './zod-openapi';
const input = z.object({ resourceType: z.literal('Communication'), id: z.string().regex(/^[A-Za-z0-9\\-.]{1,64}$/) }).passthrough();
exports.handler = async (medplum, event) => input.safeParse(event.input).success;`,
      resolveDir: resolve('test/bench/zod-bots'),
      loader: 'ts',
    },
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'es2022',
    minify: true,
    write: false,
    footer: { js: 'Object.assign(exports, module.exports);' },
  });
  return result.outputFiles[0].text;
}

/** A bundle that does nothing: what a run costs before any code of a bot (the context, the wrapper). */
export const EMPTY_BOT = 'exports.handler = async () => undefined;';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

export interface BundleFigures {
  bot: string;
  bytes: Record<Variant, number>;
  /** p50 of a bundle's load in a fresh vmcontext-like context, less the empty bundle's, ms. */
  startMs: Record<Variant, number>;
}

/**
 * Each bundle loaded as a run loads it (a fresh context, the bundle's top level evaluated, `exports.handler`
 * there), `loads` times, the variants alternating; the empty bundle's p50 is taken off each.
 */
export function measureBundleStarts(bundles: Record<Variant, Record<string, string>>, loads = 30): BundleFigures[] {
  const timeLoad = (code: string) => {
    const start = performance.now();
    loadBundle(code);
    return performance.now() - start;
  };
  const empty: number[] = [];
  const figures: BundleFigures[] = [];
  for (const bot of Object.keys(bundles.schema)) {
    const times: Record<Variant, number[]> = { schema: [], zod: [] };
    for (let i = 0; i < loads + 3; i++) {
      for (const variant of VARIANTS) {
        const ms = timeLoad(bundles[variant][bot]);
        if (i >= 3) {
          times[variant].push(ms);
        }
      }
      empty.push(timeLoad(EMPTY_BOT));
    }
    figures.push({
      bot,
      bytes: { schema: bundles.schema[bot].length, zod: bundles.zod[bot].length },
      startMs: { schema: median(times.schema), zod: median(times.zod) },
    });
  }
  const floor = median(empty);
  for (const f of figures) {
    f.startMs.schema -= floor;
    f.startMs.zod -= floor;
  }
  return figures;
}

const botRequire = createRequire(import.meta.url);

/**
 * What a vmcontext run does before the handler: a fresh context with Medplum's globals
 * (packages/server/src/bots/vmcontext.ts), the bundle compiled and its top level evaluated.
 */
function loadBundle(code: string): void {
  const context = vm.createContext({
    console,
    require: botRequire,
    fetch,
    MedplumClient,
    TextDecoder,
    TextEncoder,
    URL,
    URLSearchParams,
    Headers,
    Request,
    Response,
  });
  const wrapped = `const exports = {};\nconst module = { exports };\n${code}\n;typeof exports.handler;`;
  if (vm.runInContext(wrapped, context) !== 'function') {
    throw new Error('the bundle exports no handler');
  }
}

export interface ExecuteFigures {
  bot: string;
  caller: string;
  /** p50 of a `$execute` with a bad input (refused at the bot's input check), ms. */
  p50: Record<Variant, number>;
  /** What the refusal said, the last one of each variant (the same envelope either way). */
  answer: Record<Variant, string>;
}

/** A cheap failing call for each bot measured: bad input, refused by the input check. */
const BAD_INPUT: { bot: string; caller: 'admin' | 'alice'; input: unknown }[] = [
  // A subscription bot, by the project admin: the input check is its first line.
  { bot: 'sms-opt-out', caller: 'admin', input: { resourceType: 'Communication' } },
  // A patient workflow, by its patient: her token verified, then the input checked.
  { bot: 'accept-agreements', caller: 'alice', input: { agreements: 'all of them' } },
  // The largest bundle.
  { bot: 'complete-task', caller: 'alice', input: { task: 'x' } },
];

/**
 * `$execute` of each bot in BAD_INPUT with a bad input on the embedded Medplum (in process), the bot's
 * code redeployed as each variant in turn, `rounds` rounds of `calls` sequential calls.
 */
export async function measureBadInputExecutes(
  bundles: Record<Variant, Record<string, string>>,
  rounds = 6,
  calls = 25,
): Promise<ExecuteFigures[]> {
  const backend = await startTestBackend();
  try {
    const figures: ExecuteFigures[] = [];
    for (const { bot: key, caller, input } of BAD_INPUT) {
      const bot = await backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|${key}` });
      if (!bot) {
        throw new Error(`no provisioned bot ${key}`);
      }
      const medplum = caller === 'admin' ? backend.admin : backend.patients.alice.medplum;
      const times: Record<Variant, number[]> = { schema: [], zod: [] };
      const answer: Record<Variant, string> = { schema: '', zod: '' };
      for (let round = 0; round < rounds; round++) {
        for (const variant of VARIANTS) {
          await deploy(backend.admin, bot, bundles[variant][key]);
          for (let i = 0; i < calls + 3; i++) {
            const start = performance.now();
            const result = await medplum.executeBot(bot.id as string, input, 'application/json');
            if (i >= 3) {
              times[variant].push(performance.now() - start);
            }
            answer[variant] = JSON.stringify(result).slice(0, 300);
          }
        }
      }
      figures.push({ bot: key, caller, p50: { schema: median(times.schema), zod: median(times.zod) }, answer });
    }
    return figures;
  } finally {
    backend.close();
  }
}

const deploy = (admin: MedplumClient, bot: Bot, code: string) =>
  admin.post(admin.fhirUrl('Bot', bot.id as string, '$deploy'), { code, filename: 'bot.js' });

/**
 * The same on a real Medplum (BENCH_MEDPLUM_BASE_URL, _CLIENT_ID, _CLIENT_SECRET: a project admin client
 * of a project of its own, e.g. from `npm run bootstrap`): a Bot of each variant of `sms-opt-out` and an
 * empty one, made in that project, each `$execute`d with a bad input by the admin client, alternating.
 * There every run compiles and evaluates the bundle in a fresh context (packages/server/src/bots/vmcontext.ts).
 */
export async function measureRealBadInputExecutes(
  options: { baseUrl: string; clientId: string; clientSecret: string },
  rounds = 8,
  calls = 10,
): Promise<Record<Variant | 'empty', number> & { bytes: Record<Variant | 'empty', number> }> {
  const medplum = new MedplumClient({ baseUrl: options.baseUrl, cacheTime: 0 });
  await medplum.startClientLogin(options.clientId, options.clientSecret);
  const projectId = medplum.getProject()?.id;
  if (!projectId) {
    throw new Error('the client has no project');
  }
  const key = 'sms-opt-out';
  const [schema, zod] = [(await botBundles('schema'))[key], (await botBundles('zod'))[key]];
  const codes: Record<Variant | 'empty', string> = { schema, zod, empty: EMPTY_BOT };
  const bots = {} as Record<Variant | 'empty', Bot>;
  for (const [variant, code] of Object.entries(codes) as [Variant | 'empty', string][]) {
    const bot = (await medplum.post(`admin/projects/${projectId}/bot`, {
      name: `bot start bench ${variant}`,
      runtimeVersion: 'vmcontext',
    })) as Bot;
    await deploy(medplum, bot, code);
    bots[variant] = bot;
  }
  const times: Record<Variant | 'empty', number[]> = { schema: [], zod: [], empty: [] };
  for (let round = 0; round < rounds + 1; round++) {
    for (const variant of Object.keys(bots) as (Variant | 'empty')[]) {
      for (let i = 0; i < calls; i++) {
        const start = performance.now();
        await medplum.executeBot(bots[variant].id as string, { resourceType: 'Communication' }, 'application/json');
        if (round > 0) {
          times[variant].push(performance.now() - start);
        }
      }
    }
  }
  return {
    schema: median(times.schema),
    zod: median(times.zod),
    empty: median(times.empty),
    bytes: { schema: schema.length, zod: zod.length, empty: EMPTY_BOT.length },
  };
}
