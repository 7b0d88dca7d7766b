import type { Context } from 'hono';
import type { AppEnv } from '../app-env';
import { type ClientAddressResolver, clientAddressResolver } from './client-address';
import { parsePublicUrl } from './public-url';
import type { EdgeSigner } from './statement';
import { cleanUserAgent } from './user-agent';

/** What the gateway knows of its own edge: built once per app, seen by every request as `c.get('edge')`. */
export interface Edge {
  publicUrl?: string;
  peerAddress?: (c: Context<AppEnv>) => string | undefined;
  resolveClientAddress: ClientAddressResolver;
}

export function createEdge(options: {
  publicUrl?: string;
  trustedProxies?: readonly string[];
  peerAddress?: (c: Context<AppEnv>) => string | undefined;
}): Edge {
  return {
    publicUrl: options.publicUrl === undefined ? undefined : parsePublicUrl(options.publicUrl),
    peerAddress: options.peerAddress,
    resolveClientAddress: clientAddressResolver(options.trustedProxies ?? []),
  };
}

/**
 * Where clients reach the gateway, without a trailing slash: PUBLIC_URL, never the Host header. Both
 * entries always configure it; an app built without one (in-process tests) names the URL it was called with.
 */
export function publicUrl(c: Context<AppEnv>): string {
  return c.get('edge').publicUrl ?? new URL(c.req.url).origin;
}

/** The client's IP address (canonical text), or undefined when the edge cannot vouch for one. */
export function clientAddress(c: Context<AppEnv>): string | undefined {
  const edge = c.get('edge');
  return edge.resolveClientAddress(edge.peerAddress?.(c), c.req.header('x-forwarded-for'));
}

/** The User-Agent without control characters, at most 512 characters. */
export function userAgent(c: Context<AppEnv>): string | undefined {
  return cleanUserAgent(c.req.header('user-agent'));
}

/**
 * What the gateway alone saw of this call, for a clickwrap proof: the client address and user agent,
 * signed for the bot and bound to this session (the bot takes nothing unsigned from its input).
 */
export async function edgeStatement(c: Context<AppEnv>, sign: EdgeSigner | undefined): Promise<string | undefined> {
  const session = c.get('session');
  return sign?.({ sub: session.profile, lid: session.loginId, ip: clientAddress(c), ua: userAgent(c) });
}
