import type { App, AppDeps } from '../app-env';

/** How long a readiness answer serves the next probes: a probe every second costs Medplum one call in 5 s. */
const READY_TTL_MS = 5_000;
/** A Medplum slower than this to answer its health check is not ready for us. */
const READY_TIMEOUT_MS = 2_000;

/**
 * Probes for whoever runs the gateway (docs/deploy.md), outside `/v1` and the API document:
 * - `GET /healthz`: the process serves (liveness); never reaches Medplum.
 * - `GET /readyz`: Medplum answers its `/healthcheck` and, over a remote Medplum, the gateway's
 *   EDGE_STATEMENT_KEY is the Project's (src/edge/edge-key.ts; 503 naming why otherwise); 503 otherwise. One probe at a time
 *   reaches Medplum, and its answer serves the next ones for 5 s, so probes from many instances or
 *   load balancers cannot load it.
 * Neither needs a session, and neither says more than ok or not, or which setting to mend (no versions,
 * no addresses, never a secret).
 */
export function registerHealthRoutes(app: App, deps: AppDeps): void {
  const now = () => (deps.clock?.() ?? new Date()).getTime();
  let last: { at: number; ready: Promise<boolean> } | undefined;
  const probe = async (): Promise<boolean> => {
    try {
      const response = await (deps.medplum.fetch ?? fetch)(`${deps.medplum.baseUrl}healthcheck`, {
        signal: AbortSignal.timeout(READY_TIMEOUT_MS),
      });
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  };
  app.get('/healthz', (c) => c.json({ ok: true }, 200, { 'Cache-Control': 'no-store' }));
  app.get('/readyz', async (c) => {
    if (!last || now() - last.at > READY_TTL_MS) {
      last = { at: now(), ready: probe() };
    }
    const ready = await last.ready;
    if (!ready) {
      return c.json(
        { error: { code: 'upstream_unavailable', message: 'Medplum does not answer its health check' } },
        503,
        {
          'Cache-Control': 'no-store',
          'Retry-After': '5',
        },
      );
    }
    // Its key the Project's (kept a minute; checked again sooner while Medplum could not be asked).
    const key = (await deps.edgeKeyCheck?.()) ?? { ok: true };
    if (!key.ok) {
      return c.json(
        {
          error: {
            code: key.reason === 'unreachable' ? 'upstream_unavailable' : 'internal',
            message: key.message,
            details: { reason: key.reason },
          },
        },
        503,
        { 'Cache-Control': 'no-store', 'Retry-After': '5' },
      );
    }
    return c.json({ ok: true }, 200, { 'Cache-Control': 'no-store' });
  });
}
