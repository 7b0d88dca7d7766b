import { type App, createApp, DEFAULT_LIMITS, MEDPLUM_IN_FLIGHT } from './app';
import { MISSING_EDGE_KEY, MISSING_GATEWAY_CLIENT } from './config';
import { trustedProxyList } from './edge/client-address';
import { type EdgeKeyVerdict, edgeKeyChecker, refuses } from './edge/edge-key';
import { createEventTickets } from './edge/event-ticket';
import { createEdgeSigner } from './edge/statement';
import type { AssetLoader } from './routes/docs';
import { DOCS_ASSETS } from './routes/docs';
import { parseOrigins } from './shared/cors';

/** Cloudflare Workers bindings (wrangler.toml `[vars]` and `[assets]`). */
export interface WorkerEnv {
  MEDPLUM_BASE_URL: string;
  /** Where clients reach this Worker: every link and the reference page name it, never the Host header. */
  PUBLIC_URL: string;
  /** Proxies in front of Cloudflare whose X-Forwarded-For is believed (comma-separated IPs/CIDRs); rarely any. */
  TRUSTED_PROXIES?: string;
  /** Token issuer; defaults to MEDPLUM_BASE_URL (Medplum issues tokens as its base URL). */
  MEDPLUM_ISSUER?: string;
  PROJECT_ID: string;
  /**
   * A Worker secret (`wrangler secret put EDGE_STATEMENT_KEY`), the same value as the Project secret
   * `edge-statement-key`: signs the client address and user agent for the clickwrap proof.
   */
  EDGE_STATEMENT_KEY?: string;
  /** The gateway's own client (a var) and its secret (`wrangler secret put GATEWAY_CLIENT_SECRET`): the key check. */
  GATEWAY_CLIENT_ID?: string;
  GATEWAY_CLIENT_SECRET?: string;
  BODY_LIMIT_BYTES?: string;
  IN_FLIGHT_PER_CALLER?: string;
  IN_FLIGHT_TOTAL?: string;
  IN_FLIGHT_WAITING?: string;
  MEDPLUM_IN_FLIGHT?: string;
  UPSTREAM_TIMEOUT_MS?: string;
  /** Origins whose pages may call the API from a browser (comma-separated; `https://host:*` for any port). None by default. */
  CORS_ORIGINS?: string;
  ASSETS?: { fetch(request: Request): Promise<Response> };
}

/** The same app as on Node; assets come from the Workers static-assets binding. */
function assetsFrom(env: WorkerEnv): AssetLoader | undefined {
  const binding = env.ASSETS;
  if (!binding) {
    return undefined;
  }
  return async (name) => {
    const response = await binding.fetch(new Request(`https://assets.local/${name}`));
    return response.ok ? { body: await response.arrayBuffer(), contentType: DOCS_ASSETS[name] } : undefined;
  };
}

let cached: { env: WorkerEnv; app: App; edgeKeyCheck: () => Promise<EdgeKeyVerdict> } | undefined;

function appFor(env: WorkerEnv): NonNullable<typeof cached> {
  if (cached?.env !== env) {
    const edgeKeyCheck = edgeKeyChecker(
      {
        baseUrl: env.MEDPLUM_BASE_URL,
        clientId: env.GATEWAY_CLIENT_ID as string,
        clientSecret: env.GATEWAY_CLIENT_SECRET as string,
      },
      env.EDGE_STATEMENT_KEY as string,
    );
    cached = {
      env,
      edgeKeyCheck,
      app: createApp({
        edgeKeyCheck,
        medplum: { baseUrl: env.MEDPLUM_BASE_URL },
        issuer: env.MEDPLUM_ISSUER ?? env.MEDPLUM_BASE_URL,
        projectId: env.PROJECT_ID,
        limits: {
          bodyBytes: Number(env.BODY_LIMIT_BYTES) || DEFAULT_LIMITS.bodyBytes,
          upstreamTimeoutMs: Number(env.UPSTREAM_TIMEOUT_MS) || DEFAULT_LIMITS.upstreamTimeoutMs,
          inFlightPerCaller: Number(env.IN_FLIGHT_PER_CALLER) || DEFAULT_LIMITS.inFlightPerCaller,
          inFlightTotal: Number(env.IN_FLIGHT_TOTAL) || DEFAULT_LIMITS.inFlightTotal,
          inFlightWaiting: Number(env.IN_FLIGHT_WAITING) || DEFAULT_LIMITS.inFlightWaiting,
          medplumInFlight: Number(env.MEDPLUM_IN_FLIGHT) || MEDPLUM_IN_FLIGHT.remote,
        },
        assets: assetsFrom(env),
        log: (entry) => console.log(JSON.stringify(entry)),
        publicUrl: env.PUBLIC_URL,
        trustedProxies: trustedProxyList(env.TRUSTED_PROXIES),
        // Cloudflare sets CF-Connecting-IP to the address it was reached from, replacing any a client sent.
        peerAddress: (c) => c.req.header('cf-connecting-ip'),
        edgeSigner: createEdgeSigner(env.EDGE_STATEMENT_KEY as string),
        eventTickets: createEventTickets(env.EDGE_STATEMENT_KEY as string),
        corsOrigins: parseOrigins(env.CORS_ORIGINS),
      }),
    };
  }
  return cached;
}

/** A Worker cannot refuse to start: it refuses every request, naming the setting (never a secret). */
function notConfigured(message: string): Response {
  console.log(JSON.stringify({ level: 'error', message }));
  return Response.json(
    { error: { code: 'internal', message: `This gateway is not configured: ${message}` } },
    { status: 500 },
  );
}

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    if (!env.EDGE_STATEMENT_KEY) {
      return notConfigured(MISSING_EDGE_KEY);
    }
    if (!env.GATEWAY_CLIENT_ID || !env.GATEWAY_CLIENT_SECRET) {
      return notConfigured(MISSING_GATEWAY_CLIENT);
    }
    const { app, edgeKeyCheck } = appFor(env);
    // Its key the Project's, asked once a minute at most (a Medplum that does not answer: served, /readyz says so).
    const verdict = await edgeKeyCheck();
    if (refuses(verdict) && !verdict.ok) {
      return notConfigured(verdict.message);
    }
    return app.fetch(request, env);
  },
};
