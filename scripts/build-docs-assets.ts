import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { swaggerUiDir } from '../src/docs-assets-node';
import { DOCS_ASSETS } from '../src/routes/docs';

/** Copies the reference page's files where wrangler.toml's `[assets]` expects them (Workers only). */
const source = swaggerUiDir();
const target = join('dist', 'docs-assets');
mkdirSync(target, { recursive: true });
for (const name of Object.keys(DOCS_ASSETS)) {
  copyFileSync(join(source, name), join(target, name));
}
console.log(`copied ${Object.keys(DOCS_ASSETS).length} reference-page assets into ${target}`);
