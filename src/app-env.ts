import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { SessionClaims, TokenVerifier } from './auth/verify';
import type { EdgeKeyVerdict } from './edge/edge-key';
import type { EventTickets } from './edge/event-ticket';
import type { Edge } from './edge/request';
import type { EdgeSigner } from './edge/statement';
import type { MedplumTarget, Upstream } from './medplum/client';
import type { AssetLoader } from './routes/docs';
import type { WebApp } from './routes/web-app';
import type { OriginRule } from './shared/cors';

/**
 * The gateway's types: what `createApp` needs and what every route sees. Route modules take them
 * from here, never from app.ts (which imports the routes).
 */
export interface Limits {
  /** Largest request body accepted, in bytes. */
  bodyBytes: number;
  /** Deadline for each call to Medplum. */
  upstreamTimeoutMs: number;
  /** Calls one caller may have in flight at once; beyond it, 429 (src/edge/admission.ts). */
  inFlightPerCaller: number;
  /** Calls everyone may have in flight at once on this instance; beyond it, a call waits for a place. */
  inFlightTotal: number;
  /** Calls that may wait for a place at once on this instance; beyond it (or after half the upstream deadline), 503. */
  inFlightWaiting?: number;
  /**
   * Calls this instance has in flight at Medplum at once (absent: no bound of its own); past it a call waits
   * for a place, the caller with the fewest calls first (src/medplum/client.ts `fairShare`).
   */
  medplumInFlight?: number;
  /** Calls waiting on event feeds (or streaming them) at once on this instance (default 2,000: src/routes/events.ts). */
  eventWaitsTotal?: number;
}

export interface AccessLogEntry {
  requestId: string;
  method: string;
  route: string;
  status: number;
  durationMs: number;
}

export interface AppDeps {
  medplum: MedplumTarget;
  /** The `iss` of Medplum's tokens (its base URL); its JWKS is `<issuer>.well-known/jwks.json`. */
  issuer: string;
  projectId: string;
  limits: Limits;
  clock?: () => Date;
  /** Structured access log sink. Entries never contain bodies, query values, names or tokens. */
  log?: (entry: AccessLogEntry) => void;
  /** Serves the API reference page's static files (Node: from disk; Workers: the assets binding). */
  assets?: AssetLoader;
  /** Overrides token verification's key source (defaults to the issuer's JWKS through `medplum.fetch`). */
  verifier?: TokenVerifier;
  /**
   * Where clients reach the gateway (`PUBLIC_URL`): every link, the reference page and the document's
   * `servers` name it, never the Host header. Both entries set it; without it (in-process tests) the
   * URL a request was made with is used.
   */
  publicUrl?: string;
  /** Proxies whose X-Forwarded-For is believed (`TRUSTED_PROXIES`: IPs or CIDR ranges); default none. */
  trustedProxies?: readonly string[];
  /** The connection's peer address: Node's socket, Cloudflare's CF-Connecting-IP. Absent: unknown. */
  peerAddress?: (c: Context<AppEnv>) => string | undefined;
  /**
   * Signs what only the gateway sees of a call (client address, user agent) for the bots that record it
   * (the clickwrap proof). Absent: bots record no address or agent, since they cannot vouch for one.
   */
  edgeSigner?: EdgeSigner;
  /** Tickets for her event stream in a browser (src/edge/event-ticket.ts), sealed with the edge key. */
  eventTickets?: EventTickets;
  /** The reference patient web app at `/app/` (`npm start` only: src/routes/web-app.ts), and where she signs in. */
  webApp?: { files: WebApp; medplumOrigin: string };
  /** Origins whose pages may call the API from a browser (`CORS_ORIGINS`); default none. */
  corsOrigins?: readonly OriginRule[];
  /**
   * Whether its EDGE_STATEMENT_KEY is the Project's (src/edge/edge-key.ts), asked by `/readyz`: set over a
   * remote Medplum; the embedded Medplum makes the key it is given.
   */
  edgeKeyCheck?: () => Promise<EdgeKeyVerdict>;
  /**
   * How long a tenant's published catalog read serves the next calls (src/medplum/catalog-cache.ts);
   * default 10 s, 0 reads it on every call.
   */
  catalogTtlMs?: number;
}

export interface AppEnv {
  Variables: {
    requestId: string;
    session: SessionClaims;
    /** Her way to Medplum; `medplumOf(c)` gives the MedplumClient. */
    upstream: Upstream;
    edge: Edge;
    /**
     * Steps out of admission while the call waits on nothing of Medplum's (a feed's wait): her place is
     * freed for the wait and asked again after it, `false` if it is not given back (the call then
     * answers with what it has). Absent where admission does not count the call.
     */
    stepOut?: <T>(wait: () => Promise<T>) => Promise<{ value: T; readmitted: boolean }>;
    /**
     * A place among her calls in flight, asked again for work done after the answer began (a stream's
     * looks): its release, or undefined when she is at her limit or the instance full.
     */
    admitted?: () => (() => void) | undefined;
  };
}

export type App = OpenAPIHono<AppEnv>;

/**
 * Calls one instance has in flight at Medplum by default (`MEDPLUM_IN_FLIGHT`): the embedded Medplum
 * answers on one thread, so more at once only lengthens every answer (docs/benchmarks.md, fairness); a
 * Medplum server's figure is not yet measured (issue 50 item 4): 32, to be set from its own bench.
 */
export const MEDPLUM_IN_FLIGHT = { embedded: 4, remote: 32 } as const;

export const DEFAULT_LIMITS: Limits = {
  bodyBytes: 1024 * 1024,
  upstreamTimeoutMs: 10_000,
  inFlightPerCaller: 32,
  inFlightTotal: 256,
  inFlightWaiting: 4_096,
};
