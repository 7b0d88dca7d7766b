import { MedplumClient } from '@medplum/core';
import type { ClientApplication } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { type JourneyBackend, journey } from '../../scripts/demo';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { pooledFetch } from '../../src/medplum/node-fetch';
import { DEMO_TENANTS } from '../../src/provision/demo';

/**
 * Each workflow call's latency on a real Medplum: the demo's whole journey (`npm run demo`'s steps, a new
 * patient each time) run `journeys` times through a gateway built as `npm start` builds it over a remote
 * Medplum (undici's pool), every `/v1` call timed from the patient's side. The project must be provisioned
 * with the demo definition and `edgeStatementKey` (the lane does both). Calls are grouped by route; a
 * workflow is a call that runs a bot (POST, and the reads a bot answers).
 */
export interface WorkflowFigure {
  route: string;
  calls: number;
  p50: number;
  max: number;
}

export async function runRealWorkflowBench(options: {
  baseUrl: string;
  projectId: string;
  clientId: string;
  clientSecret: string;
  edgeStatementKey: string;
  journeys: number;
}): Promise<{ figures: WorkflowFigure[]; journeyMs: number[] }> {
  const { baseUrl, projectId } = options;
  const admin = new MedplumClient({ baseUrl, cacheTime: 0 });
  await admin.startClientLogin(options.clientId, options.clientSecret);
  const appIds = new Map<string, string>();
  for (const tenant of DEMO_TENANTS) {
    const app = await admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.provisioning}|app-${tenant.key}` });
    if ((app as ClientApplication | undefined)?.id) {
      appIds.set(tenant.key, app?.id as string);
    }
  }
  const backend: JourneyBackend = {
    baseUrl,
    fetch: globalThis.fetch,
    projectId,
    appIdOf: (tenantKey) => {
      const id = appIds.get(tenantKey);
      if (!id) {
        throw new Error(`no ClientApplication tagged ${SYSTEMS.provisioning}|app-${tenantKey}`);
      }
      return id;
    },
  };
  const app = createApp({
    medplum: { baseUrl, fetch: pooledFetch() },
    issuer: baseUrl,
    projectId,
    limits: DEFAULT_LIMITS,
    edgeSigner: createEdgeSigner(options.edgeStatementKey),
  });
  const timings = new Map<string, number[]>();
  const timed = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const began = performance.now();
    const response = await app.fetch(request);
    const body = await response.arrayBuffer();
    const route = `${request.method} ${routeOf(new URL(request.url).pathname)}`;
    const list = timings.get(route) ?? [];
    list.push(performance.now() - began);
    timings.set(route, list);
    return new Response(body, { status: response.status, headers: response.headers });
  }) as typeof fetch;
  const journeyMs: number[] = [];
  for (let i = 0; i < options.journeys; i++) {
    const began = performance.now();
    await journey(backend, timed, { silent: true });
    journeyMs.push(performance.now() - began);
  }
  const figures = [...timings].map(([route, list]) => {
    const sorted = [...list].sort((a, b) => a - b);
    return {
      route,
      calls: sorted.length,
      p50: sorted[Math.floor((sorted.length - 1) / 2)] ?? 0,
      max: sorted.at(-1) ?? 0,
    };
  });
  return { figures: figures.sort((a, b) => b.p50 - a.p50), journeyMs };
}

/** A path with its ids (a real Medplum's are UUIDs) replaced: `/v1/tasks/<uuid>/complete` -> `/v1/tasks/{id}/complete`. */
function routeOf(path: string): string {
  return path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '{id}');
}
