import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { z } from '@hono/zod-openapi';
import { type BuildOptions, build } from 'esbuild';
import { SUPPORTED_SCHEMA_KEYWORDS } from '../bots/lib/input';
import { BOT_INPUTS } from '../contracts/bot-inputs';

/**
 * Every bot's input contract as JSON Schema, checked to use only what bots/lib/input.ts understands
 * (so the bot can never accept what the contract refuses). Computed once per build.
 */
let inputSchemas: string | undefined;
export function botInputSchemas(): string {
  if (!inputSchemas) {
    const schemas = Object.fromEntries(
      Object.entries(BOT_INPUTS).map(([name, schema]) => {
        const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw' });
        assertSupportedSchema(json, name);
        return [name, json];
      }),
    );
    inputSchemas = JSON.stringify(schemas);
  }
  return inputSchemas;
}

function assertSupportedSchema(schema: unknown, path: string): void {
  if (Array.isArray(schema)) {
    schema.forEach((item, i) => {
      assertSupportedSchema(item, `${path}[${i}]`);
    });
    return;
  }
  if (typeof schema !== 'object' || schema === null) {
    return;
  }
  for (const [keyword, value] of Object.entries(schema)) {
    if (!SUPPORTED_SCHEMA_KEYWORDS.has(keyword)) {
      throw new Error(
        `bot input schema ${path}: JSON Schema keyword "${keyword}" is not supported by bots/lib/input.ts`,
      );
    }
    if (keyword === 'properties') {
      for (const [name, property] of Object.entries(value as Record<string, unknown>)) {
        assertSupportedSchema(property, `${path}.${name}`);
      }
    } else if (keyword !== 'enum' && keyword !== 'const' && keyword !== 'required') {
      assertSupportedSchema(value, `${path}.${keyword}`);
    }
  }
}

/**
 * One bot = one single-file CommonJS bundle, as Medplum's vmcontext runtime requires: everything
 * bundled, `exports.handler` set, and the footer that copies `module.exports` onto `exports`
 * (the runtime reads `exports`, esbuild's CJS output assigns `module.exports`).
 */
export function botBuildOptions(entry: string): BuildOptions {
  return {
    entryPoints: [entry],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'es2022',
    minify: false,
    sourcemap: false,
    logLevel: 'warning',
    footer: { js: 'Object.assign(exports, module.exports);' },
    // Medplum's vmcontext `require` is the server's own (packages/server/src/bots/vmcontext.ts:
    // createRequire), which has @medplum/core: a bot takes it from there rather than bundling it.
    external: ['@medplum/core'],
    define: { BOT_INPUT_SCHEMAS: botInputSchemas() },
  };
}

export async function buildBot(entry: string, outfile: string): Promise<void> {
  await build({ ...botBuildOptions(entry), outfile });
}

export function botEntries(dir = 'bots'): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(dir, file));
}

export async function buildAllBots(dir = 'bots', outDir = join('dist', 'bots')): Promise<string[]> {
  const entries = botEntries(dir);
  await Promise.all(entries.map((entry) => buildBot(entry, join(outDir, `${basename(entry, '.ts')}.js`))));
  return entries;
}
