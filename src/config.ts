import { DEFAULT_LIMITS, type Limits, MEDPLUM_IN_FLIGHT } from './app-env';
import { trustedProxyList } from './edge/client-address';
import { LOOPBACK_ORIGINS, type OriginRule, parseOrigins } from './shared/cors';

export interface NodeConfig {
  port: number;
  /** The interface both servers listen on (`HOST`); absent: all of them, Node's default. */
  host?: string;
  /** Where clients reach the gateway: printed, and named by every link; defaults to localhost. */
  publicUrl: string;
  /** Proxies whose X-Forwarded-For is believed (IPs or CIDR ranges); none by default. */
  trustedProxies: string[];
  /** The embedded Medplum's issuer and public base URL: where patient apps sign in. */
  medplumBaseUrl: string;
  /** The port the embedded Medplum's own API listens on (Medplum's default, 8103). */
  embeddedPort: number;
  /** Origins whose pages may call the gateway and the embedded Medplum from a browser. */
  corsOrigins: OriginRule[];
  embeddedDb: string;
  limits: Limits;
  /** Set when MEDPLUM_REMOTE_BASE_URL is: serve a real Medplum instead of the embedded one. */
  remote?: {
    baseUrl: string;
    issuer: string;
    projectId: string;
    edgeStatementKey: string;
    /** The gateway's own client: it checks at start that the key is the Project's (src/edge/edge-key.ts). */
    gatewayClient: { clientId: string; clientSecret: string };
  };
}

const positive = (value: string | undefined): number | undefined => {
  const n = Number(value);
  return value !== undefined && Number.isFinite(n) && n > 0 ? n : undefined;
};

/** Why a gateway over a real Medplum does not serve without its edge-statement key. */
export const MISSING_EDGE_KEY =
  'EDGE_STATEMENT_KEY is required over a remote Medplum: the key provisioning stored as the Project secret the bots check the client address and app with (run `npm run provision` with the same EDGE_STATEMENT_KEY; docs/deploy.md)';

/** Why a gateway over a real Medplum does not serve without its own client. */
export const MISSING_GATEWAY_CLIENT =
  "GATEWAY_CLIENT_ID and GATEWAY_CLIENT_SECRET are required over a remote Medplum: the gateway's own client, with which it checks that EDGE_STATEMENT_KEY is the Project's (`npm run provision -- --out gateway.env` writes them; docs/deploy.md)";

/** The README's configuration table, in code: every variable, its default. */
export function loadConfig(env: Record<string, string | undefined>): NodeConfig {
  const port = positive(env.PORT) ?? 8080;
  const embeddedPort = positive(env.EMBEDDED_MEDPLUM_PORT) ?? 8103;
  const remoteBaseUrl = env.MEDPLUM_REMOTE_BASE_URL;
  if (remoteBaseUrl && !env.PROJECT_ID) {
    throw new Error('PROJECT_ID is required with MEDPLUM_REMOTE_BASE_URL');
  }
  if (remoteBaseUrl && !env.EDGE_STATEMENT_KEY) {
    // Without it every agreement's clickwrap proof silently lacks her address and app (docs/deploy.md).
    throw new Error(MISSING_EDGE_KEY);
  }
  if (remoteBaseUrl && (!env.GATEWAY_CLIENT_ID || !env.GATEWAY_CLIENT_SECRET)) {
    throw new Error(MISSING_GATEWAY_CLIENT);
  }
  return {
    remote: remoteBaseUrl
      ? {
          baseUrl: remoteBaseUrl,
          issuer: env.MEDPLUM_ISSUER ?? remoteBaseUrl,
          projectId: env.PROJECT_ID as string,
          edgeStatementKey: env.EDGE_STATEMENT_KEY as string,
          gatewayClient: {
            clientId: env.GATEWAY_CLIENT_ID as string,
            clientSecret: env.GATEWAY_CLIENT_SECRET as string,
          },
        }
      : undefined,
    port,
    host: env.HOST || undefined,
    publicUrl: env.PUBLIC_URL || `http://localhost:${port}`,
    trustedProxies: trustedProxyList(env.TRUSTED_PROXIES),
    medplumBaseUrl: env.MEDPLUM_BASE_URL || `http://localhost:${embeddedPort}/`,
    embeddedPort,
    // Production (a real Medplum) allows no origin unless told; the local demo, pages on this machine.
    corsOrigins: parseOrigins(env.CORS_ORIGINS ?? (remoteBaseUrl ? '' : LOOPBACK_ORIGINS)),
    embeddedDb: env.EMBEDDED_MEDPLUM_DB ?? '.data/embedded-medplum.sqlite',
    limits: {
      bodyBytes: positive(env.BODY_LIMIT_BYTES) ?? DEFAULT_LIMITS.bodyBytes,
      upstreamTimeoutMs: positive(env.UPSTREAM_TIMEOUT_MS) ?? DEFAULT_LIMITS.upstreamTimeoutMs,
      inFlightPerCaller: positive(env.IN_FLIGHT_PER_CALLER) ?? DEFAULT_LIMITS.inFlightPerCaller,
      inFlightTotal: positive(env.IN_FLIGHT_TOTAL) ?? DEFAULT_LIMITS.inFlightTotal,
      inFlightWaiting: positive(env.IN_FLIGHT_WAITING) ?? DEFAULT_LIMITS.inFlightWaiting,
      medplumInFlight:
        positive(env.MEDPLUM_IN_FLIGHT) ?? (remoteBaseUrl ? MEDPLUM_IN_FLIGHT.remote : MEDPLUM_IN_FLIGHT.embedded),
    },
  };
}
