import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { WebApp, WebAppConfig } from './routes/web-app';

/** The reference patient web app's folder (`web/`), beside `src/`. */
export const WEB_APP_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');

/**
 * The reference patient web app (`web/`, issue 51 item 7) built for a browser: its one module bundled
 * with the SDK (`@patient-care/sdk`, from its source here) and zod, its page and its style as they are.
 * Built in memory in about a second, once, when `npm start` begins; `npm run web-app` writes or serves
 * the same files for a static server.
 */
export async function buildWebApp(config: WebAppConfig): Promise<WebApp> {
  const bundled = await build({
    entryPoints: [join(WEB_APP_DIR, 'main.js')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    alias: { '@patient-care/sdk': join(WEB_APP_DIR, '..', 'src', 'sdk', 'index.ts') },
    logLevel: 'silent',
  });
  const script = bundled.outputFiles[0]?.text;
  if (!script) {
    throw new Error('the web app did not build');
  }
  return {
    files: {
      'index.html': {
        body: await readFile(join(WEB_APP_DIR, 'index.html'), 'utf8'),
        contentType: 'text/html; charset=utf-8',
      },
      'app.css': { body: await readFile(join(WEB_APP_DIR, 'app.css'), 'utf8'), contentType: 'text/css; charset=utf-8' },
      'app.js': { body: script, contentType: 'text/javascript; charset=utf-8' },
      'config.json': { body: `${JSON.stringify(config)}\n`, contentType: 'application/json' },
    },
  };
}
