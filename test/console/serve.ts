import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export interface ServedConsole {
  /** The page's origin (for the embedded Medplum's CORS origins). */
  origin: string;
  /** The console's address, for a Medplum (its base URL) and a project. */
  url(medplumBaseUrl: string, projectId: string): string;
  close(): void;
}

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Clinician console</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/console.css"></head>
<body><div id="root"></div><script type="module" src="/console.js"></script></body>
</html>`;

const TYPES: Record<string, string> = {
  '/': 'text/html; charset=utf-8',
  '/console.js': 'text/javascript; charset=utf-8',
  '/console.css': 'text/css; charset=utf-8',
};

/**
 * The clinician console (console.ts) bundled by esbuild, in memory, and served from its own origin on
 * 127.0.0.1, as Medplum's app is served apart from Medplum's API.
 */
export async function serveConsole(): Promise<ServedConsole> {
  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('console.ts', import.meta.url))],
    bundle: true,
    write: false,
    outdir: '/console',
    entryNames: '[name]',
    format: 'esm',
    platform: 'browser',
    target: 'chrome120',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const files = new Map<string, Uint8Array>([['/', new TextEncoder().encode(PAGE)]]);
  for (const file of bundle.outputFiles) {
    files.set(file.path.slice(file.path.lastIndexOf('/')), file.contents);
  }
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://page').pathname;
    const body = files.get(path);
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path] ?? 'application/octet-stream' }).end(body);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    url: (medplumBaseUrl, projectId) =>
      `${origin}/?${new URLSearchParams({ medplum: medplumBaseUrl, project: projectId })}`,
    close: () => server.close(),
  };
}
