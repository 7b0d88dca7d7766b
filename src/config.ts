import { DEFAULT_LIMITS, type Limits } from './app';

export interface NodeConfig {
  port: number;
  /** Where clients reach the gateway (printed, and used for links); defaults to localhost. */
  publicUrl?: string;
  /** The embedded Medplum's issuer/base URL (it runs in-process). */
  medplumBaseUrl: string;
  embeddedDb: string;
  limits: Limits;
}

const positive = (value: string | undefined): number | undefined => {
  const n = Number(value);
  return value !== undefined && Number.isFinite(n) && n > 0 ? n : undefined;
};

/** The README's configuration table, in code: every variable, its default. */
export function loadConfig(env: Record<string, string | undefined>): NodeConfig {
  const port = positive(env.PORT) ?? 8080;
  return {
    port,
    publicUrl: env.PUBLIC_URL,
    medplumBaseUrl: env.MEDPLUM_BASE_URL ?? 'http://embedded.medplum.local/',
    embeddedDb: env.EMBEDDED_MEDPLUM_DB ?? '.data/embedded-medplum.sqlite',
    limits: {
      bodyBytes: positive(env.BODY_LIMIT_BYTES) ?? DEFAULT_LIMITS.bodyBytes,
      upstreamTimeoutMs: positive(env.UPSTREAM_TIMEOUT_MS) ?? DEFAULT_LIMITS.upstreamTimeoutMs,
    },
  };
}
