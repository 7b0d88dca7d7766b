import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { webAppPolicy } from '../src/routes/web-app';
import { buildWebApp } from '../src/web-app-node';

/**
 * `npm run web-app -- --api <gateway URL> --client-id <patient app id> [--tenant <name>] [--port N | --out DIR]`:
 * the reference patient web app (web/) for a gateway that does not serve it (one over a real Medplum),
 * served on 127.0.0.1:<port>, or written to a folder for any static server. The gateway's `CORS_ORIGINS`
 * must list the page's origin, and Medplum's `allowedOrigins` too (she signs in there).
 */
const { values } = parseArgs({
  options: {
    api: { type: 'string' },
    'client-id': { type: 'string' },
    tenant: { type: 'string', default: '' },
    port: { type: 'string', default: '8090' },
    out: { type: 'string' },
  },
});
const api = values.api?.replace(/\/+$/, '');
const clientId = values['client-id'];
if (!api || !clientId) {
  console.error(
    'Usage: npm run web-app -- --api <gateway URL> --client-id <patient app id> [--tenant <name>] [--port N | --out DIR]',
  );
  process.exit(2);
}
const config = (await (await fetch(`${api}/v1/config`)).json()) as { medplumBaseUrl: string };
const app = await buildWebApp({ api, clientId, tenant: values.tenant ?? '' });
const medplumOrigin = new URL(config.medplumBaseUrl).origin;
if (values.out) {
  await mkdir(values.out, { recursive: true });
  for (const [name, file] of Object.entries(app.files)) {
    await writeFile(join(values.out, name), file.body);
  }
  console.log(
    `Wrote the web app to ${values.out}; serve it with this Content-Security-Policy:\n  ${webAppPolicy(medplumOrigin, api)}`,
  );
} else {
  const server = new Hono();
  server.get('/:name{[a-z.]*}', (c) => {
    const file = app.files[c.req.param('name') || 'index.html'];
    return file
      ? c.body(file.body, 200, {
          'Content-Type': file.contentType,
          'Content-Security-Policy': webAppPolicy(medplumOrigin, api),
        })
      : c.text('Not found', 404);
  });
  const port = Number(values.port);
  serve({ fetch: server.fetch, port, hostname: '127.0.0.1' });
  console.log(`The web app at http://127.0.0.1:${port}/ (API ${api}, Medplum ${medplumOrigin})`);
}
