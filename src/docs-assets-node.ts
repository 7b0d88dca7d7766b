import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type AssetLoader, DOCS_ASSETS } from './routes/docs';

/** Where the installed swagger-ui-dist package keeps the reference page's files. */
export function swaggerUiDir(): string {
  return dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
}

/** Node: the reference page's files straight from the installed swagger-ui-dist package. */
export function nodeAssetLoader(): AssetLoader {
  const dir = swaggerUiDir();
  return async (name) => {
    const contentType = DOCS_ASSETS[name];
    return contentType ? { body: await readFile(join(dir, name)), contentType } : undefined;
  };
}
