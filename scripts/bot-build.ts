import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { build } from 'esbuild';

/**
 * One bot = one single-file CommonJS bundle, as Medplum's vmcontext runtime requires: everything
 * bundled, `exports.handler` set, and the footer that copies `module.exports` onto `exports`
 * (the runtime reads `exports`, esbuild's CJS output assigns `module.exports`).
 */
export async function buildBot(entry: string, outfile: string): Promise<void> {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'es2022',
    minify: false,
    sourcemap: false,
    logLevel: 'warning',
    footer: { js: 'Object.assign(exports, module.exports);' },
  });
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
