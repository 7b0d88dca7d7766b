import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

/**
 * Bench helper: the floor of `npm start`'s layout, a relay that does no work of its own. The main thread
 * serves HTTP with the gateway's server stack (@hono/node-server, Hono) and passes each request to a
 * worker thread as a message, as the gateway reaches the embedded Medplum; the worker answers a fixed
 * body of a Patient read's size, and also serves that body over HTTP itself, for the direct rounds. What
 * the relay costs against the direct call bounds what any gateway in this layout can reach at
 * concurrency 1 (docs/benchmarks.md, "The gateway's own cost at concurrency 1").
 */
const BODY = JSON.stringify({
  resourceType: 'Patient',
  id: '00000000-0000-4000-8000-000000000000',
  meta: { versionId: '1', lastUpdated: '2026-11-26T00:00:00.000Z' },
  name: [{ given: ['Maya'], family: 'Relay' }],
  address: [{ line: ['1 Floor Street'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
  text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${'x'.repeat(600)}</div>` },
});
const HEADERS = { 'content-type': 'application/fhir+json' };

if (isMainThread) {
  const worker = new Worker(new URL(import.meta.url));
  const pending = new Map<number, (body: string) => void>();
  let next = 0;
  worker.on('message', (message: { id: number; body: string } | { port: number }) => {
    if ('port' in message) {
      const app = new Hono();
      app.get('/*', async (c) => {
        const id = ++next;
        const body = await new Promise<string>((resolve) => {
          pending.set(id, resolve);
          worker.postMessage({ id, path: c.req.path, authorization: c.req.header('authorization') });
        });
        pending.delete(id);
        return new Response(body, { headers: HEADERS });
      });
      const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
      server.once('listening', () => {
        const relay = (server.address() as { port: number }).port;
        process.send?.({ direct: `http://127.0.0.1:${message.port}/`, relay: `http://127.0.0.1:${relay}/` });
      });
      return;
    }
    pending.get(message.id)?.(message.body);
  });
  process.on('SIGINT', () => process.exit(0));
} else {
  const app = new Hono();
  app.get('/*', () => new Response(BODY, { headers: HEADERS }));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  server.once('listening', () => parentPort?.postMessage({ port: (server.address() as { port: number }).port }));
  parentPort?.on('message', (message: { id: number }) => parentPort?.postMessage({ id: message.id, body: BODY }));
}
