import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProvisionDefinition } from './definition';

/** Reads each defined bot's built bundle from `dist/bots/<key>.js` (built by `npm run build:bots`). */
export function readBotBundles(
  definition: ProvisionDefinition,
  dir = join(process.cwd(), 'dist', 'bots'),
): Record<string, string> {
  return Object.fromEntries(definition.bots.map((bot) => [bot.key, readFileSync(join(dir, `${bot.key}.js`), 'utf8')]));
}
