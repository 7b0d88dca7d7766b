import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import type { AppEnv } from '../app-env';

/** The Node entry's peer address: the socket's remote end (Node only; the Worker uses CF-Connecting-IP). */
export function nodePeerAddress(c: Context<AppEnv>): string | undefined {
  return (c.env as { incoming?: unknown } | undefined)?.incoming ? getConnInfo(c).remote.address : undefined;
}
