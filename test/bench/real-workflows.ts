import { MedplumClient } from '@medplum/core';
import { type JourneyBackend, type JourneyProgress, journey, provisionedAppIds } from '../../scripts/demo';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { createEdgeSigner } from '../../src/edge/statement';
import { pooledFetch } from '../../src/medplum/node-fetch';

/**
 * Each workflow call's latency on a real Medplum: the demo's whole journey (`npm run demo`'s steps, a new
 * patient each time) run `journeys` times through a gateway built as `npm start` builds it over a remote
 * Medplum (undici's pool), every `/v1` call timed from the patient's side. The project must be provisioned
 * with the demo definition and `edgeStatementKey` (the lane does both). Calls are grouped by route; a
 * workflow is a call that runs a bot (POST, and the reads a bot answers).
 */
export interface WorkflowFigure {
  route: string;
  /** Whether its calls ran a bot (the gateway called `$execute`). */
  workflow: boolean;
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
}): Promise<{
  figures: WorkflowFigure[];
  journeyMs: number[];
  stopped: string[];
  availability?: { p50: number; profileP50: number; calls: number };
  /** For each event her app waited for: from the write (its version's instant) to the answer that carried it. */
  heard: { type: string; ms: number }[];
}> {
  const { baseUrl, projectId } = options;
  const admin = new MedplumClient({ baseUrl, cacheTime: 0 });
  await admin.startClientLogin(options.clientId, options.clientSecret);
  const backend: JourneyBackend = {
    baseUrl,
    fetch: globalThis.fetch,
    projectId,
    appIdOf: await provisionedAppIds(admin),
  };
  // Bot runs the gateway asks for: a call that made one is a workflow. The journey's calls go one at a time.
  let executes = 0;
  const pooled = pooledFetch();
  const counting = ((input: RequestInfo | URL, init?: RequestInit) => {
    if ((input instanceof Request ? input.url : input.toString()).includes('/$execute')) {
      executes++;
    }
    return pooled(input, init);
  }) as typeof fetch;
  const app = createApp({
    medplum: { baseUrl, fetch: counting },
    issuer: baseUrl,
    projectId,
    limits: DEFAULT_LIMITS,
    edgeSigner: createEdgeSigner(options.edgeStatementKey),
  });
  const timings = new Map<string, number[]>();
  const workflows = new Set<string>();
  // The journey's first availability call, made again afterwards beside her profile read.
  let availabilityCall: { url: string; authorization: string } | undefined;
  const timed = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!availabilityCall && request.method === 'GET' && new URL(request.url).pathname === '/v1/availability') {
      availabilityCall = { url: request.url, authorization: request.headers.get('authorization') ?? '' };
    }
    const ranBefore = executes;
    const began = performance.now();
    const response = await app.fetch(request);
    const body = await response.arrayBuffer();
    // A refusal is timed apart from the answer it refuses: `POST /v1/... (409)`.
    const refused = response.status >= 300 ? ` (${response.status})` : '';
    const route = `${request.method} ${routeOf(new URL(request.url).pathname)}${refused}`;
    const list = timings.get(route) ?? [];
    list.push(performance.now() - began);
    timings.set(route, list);
    if (executes > ranBefore) {
      workflows.add(route);
    }
    return new Response(body, { status: response.status, headers: response.headers });
  }) as typeof fetch;
  const journeyMs: number[] = [];
  const stopped: string[] = [];
  const heard: { type: string; ms: number }[] = [];
  for (let i = 0; i < options.journeys; i++) {
    const began = performance.now();
    const progress: JourneyProgress = { steps: [] };
    try {
      await journey(backend, timed, {
        silent: true,
        progress,
        onHeard: (event, heardAt) => heard.push({ type: event.type, ms: heardAt - Date.parse(event.occurredAt) }),
      });
      journeyMs.push(performance.now() - began);
    } catch (err) {
      // Each journey books the soonest free slot and starts its visit at once: once the slot open now is
      // taken (the lane's journey takes it), a later journey's visit is not open yet (409). Its calls up to
      // there are timed all the same.
      stopped.push(`at step ${progress.steps.length} (${err instanceof Error ? err.message : String(err)})`);
    }
  }
  // Her availability (the journey's own query: her visit team, a week) against her profile read, one at a
  // time, alternating, through the same gateway: the gateway's copy of her tenant's visit directory is warm.
  const replay = async (url: string, authorization: string) => {
    const began = performance.now();
    const response = await app.fetch(new Request(url, { headers: { authorization } }));
    await response.arrayBuffer();
    if (response.status !== 200) {
      throw new Error(`${new URL(url).pathname}: ${response.status}`);
    }
    return performance.now() - began;
  };
  let availability: { p50: number; profileP50: number; calls: number } | undefined;
  if (availabilityCall) {
    const { url, authorization } = availabilityCall;
    const profileUrl = new URL('/v1/patient/profile', url).href;
    const [free, profile]: number[][] = [[], []];
    for (let i = 0; i < 40; i++) {
      free.push(await replay(url, authorization));
      profile.push(await replay(profileUrl, authorization));
    }
    const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)] ?? 0;
    availability = { p50: median(free), profileP50: median(profile), calls: free.length };
  }
  const figures = [...timings].map(([route, list]) => {
    const sorted = [...list].sort((a, b) => a - b);
    return {
      route,
      workflow: workflows.has(route),
      calls: sorted.length,
      p50: sorted[Math.floor((sorted.length - 1) / 2)] ?? 0,
      max: sorted.at(-1) ?? 0,
    };
  });
  return { figures: figures.sort((a, b) => b.p50 - a.p50), journeyMs, stopped, availability, heard };
}

/** A path with its ids (a real Medplum's are UUIDs) replaced: `/v1/tasks/<uuid>/complete` -> `/v1/tasks/{id}/complete`. */
function routeOf(path: string): string {
  return path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '{id}');
}
