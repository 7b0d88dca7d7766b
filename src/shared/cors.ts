import type { Context, MiddlewareHandler } from 'hono';

/**
 * Cross-origin calls from browser apps (the Fetch standard's CORS protocol), for the gateway and for
 * the embedded Medplum's public API alike. Runs on Node and on Workers: no Node module here.
 *
 * Allowed origins are a list (`CORS_ORIGINS`): exact origins (`https://app.example.com`) or an origin
 * with any port (`http://localhost:*`), for local development where each tool picks its own port.
 * A wildcard host is not accepted: every allowed site is named.
 */
export type OriginRule = { origin: string } | { scheme: string; host: string; anyPort: true };

const ANY_PORT = /^(https?):\/\/(\[[0-9a-f:.]+\]|[a-z0-9.-]+):\*$/i;

/** Parses `CORS_ORIGINS` (comma-separated); a malformed entry throws with the entry named. */
export function parseOrigins(value: string | undefined): OriginRule[] {
  return (value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
    .map((entry): OriginRule => {
      const anyPort = ANY_PORT.exec(entry);
      if (anyPort) {
        return { scheme: anyPort[1].toLowerCase(), host: anyPort[2].toLowerCase(), anyPort: true };
      }
      let url: URL | undefined;
      try {
        url = new URL(entry);
      } catch {
        url = undefined;
      }
      // An origin is scheme, host and port only, as a browser sends it in `Origin`.
      if (!url || !/^https?:$/.test(url.protocol) || url.origin !== entry.replace(/\/$/, '').toLowerCase()) {
        throw new Error(
          `CORS_ORIGINS: "${entry}" is not an origin (scheme://host[:port], or scheme://host:* for any port)`,
        );
      }
      return { origin: url.origin };
    });
}

/** The development default of the embedded backend (`npm start`): pages served from this machine. */
export const LOOPBACK_ORIGINS = 'http://localhost:*,http://127.0.0.1:*,http://[::1]:*';

export function originAllowed(rules: readonly OriginRule[], origin: string | undefined): origin is string {
  if (!origin) {
    return false;
  }
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.origin !== origin) {
    return false;
  }
  return rules.some((rule) =>
    'origin' in rule ? rule.origin === origin : `${rule.scheme}:` === url.protocol && rule.host === url.hostname,
  );
}

export interface CorsOptions {
  origins: readonly OriginRule[];
  /** Methods a preflight may allow: fixed, or read when first needed (the routes registered by then). */
  methods: () => readonly string[];
  /** Request headers a preflight may allow; absent: those the preflight asks for (as Medplum's `cors`). */
  allowHeaders?: readonly string[];
  /** Response headers a page may read besides the CORS-safelisted ones. */
  exposeHeaders: readonly string[];
  /** Send `Access-Control-Allow-Credentials: true` (Medplum does; a bearer-token API need not). */
  credentials?: boolean;
  /** Paths that answer CORS at all (Medplum: its API prefixes); absent: every path. */
  paths?: (path: string) => boolean;
  maxAgeSeconds?: number;
  /** The answer to a preflight that is refused (origin, method or header not allowed). */
  refuse: (c: Context, why: { origin?: string; method?: string; headers?: string[] }) => Response;
}

/**
 * Answers preflights itself, before authentication (a browser sends no credentials on a preflight),
 * and marks the answers to allowed origins' calls as readable by them. Calls from other origins are
 * answered as usual but without CORS headers, so the browser keeps the answer from the page.
 */
export function cors(options: CorsOptions): MiddlewareHandler {
  const expose = options.exposeHeaders.join(', ');
  const allowHeaders = options.allowHeaders?.map((h) => h.toLowerCase());
  return async (c, next) => {
    const origin = c.req.header('origin');
    const applies = options.paths?.(c.req.path) ?? true;
    const requestedMethod = c.req.header('access-control-request-method');
    if (c.req.method === 'OPTIONS' && origin !== undefined && requestedMethod !== undefined) {
      const requestedHeaders = (c.req.header('access-control-request-headers') ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter((h) => h.length > 0);
      const methods = options.methods();
      const deniedHeaders = allowHeaders ? requestedHeaders.filter((h) => !allowHeaders.includes(h)) : [];
      if (!applies || !originAllowed(options.origins, origin)) {
        return options.refuse(c, { origin });
      }
      if (!methods.includes(requestedMethod.toUpperCase()) || deniedHeaders.length > 0) {
        return options.refuse(c, {
          ...(methods.includes(requestedMethod.toUpperCase()) ? {} : { method: requestedMethod }),
          ...(deniedHeaders.length > 0 ? { headers: deniedHeaders } : {}),
        });
      }
      const headers = new Headers({
        'Access-Control-Allow-Origin': origin,
        'Access-Control-Allow-Methods': methods.join(', '),
        'Access-Control-Max-Age': String(options.maxAgeSeconds ?? 600),
        Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
      });
      const allowed = allowHeaders ? options.allowHeaders?.join(', ') : requestedHeaders.join(', ');
      if (allowed) {
        headers.set('Access-Control-Allow-Headers', allowed);
      }
      if (options.credentials) {
        headers.set('Access-Control-Allow-Credentials', 'true');
      }
      return new Response(null, { status: 204, headers });
    }
    await next();
    // Every answer varies by Origin once CORS is on, allowed or not, so a cache never serves one
    // origin's answer (with or without the header) to another.
    c.res.headers.append('Vary', 'Origin');
    if (applies && originAllowed(options.origins, origin)) {
      c.res.headers.set('Access-Control-Allow-Origin', origin);
      c.res.headers.set('Access-Control-Expose-Headers', expose);
      if (options.credentials) {
        c.res.headers.set('Access-Control-Allow-Credentials', 'true');
      }
    }
  };
}
