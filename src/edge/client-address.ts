import { formatIp, inRange, parseIp, parseIpRange } from './ip';

/** The client's address from the connection's peer and the X-Forwarded-For it brought, if any. */
export type ClientAddressResolver = (peer: string | undefined, forwardedFor: string | undefined) => string | undefined;

/**
 * The standard walk (as Express's `trust proxy` and Rack do): X-Forwarded-For is believed only from a
 * trusted proxy, and read from the right, because each proxy appends the address it saw and only the
 * entries our own proxies appended are true; whatever the client wrote sits to their left. The first
 * untrusted entry is the client. An entry that is not an IP address means the chain cannot be read:
 * no address at all, rather than a guess. Without trusted proxies the peer is the client.
 */
export function clientAddressResolver(trustedProxies: readonly string[]): ClientAddressResolver {
  const ranges = trustedProxies.map((entry) => {
    const range = parseIpRange(entry);
    if (!range) {
      throw new Error(`TRUSTED_PROXIES: "${entry.slice(0, 64)}" is not an IP address or CIDR range`);
    }
    return range;
  });
  const trusted = (ip: Uint8Array) => ranges.some((range) => inRange(ip, range));
  return (peer, forwardedFor) => {
    let client = peer === undefined ? undefined : parseIp(peer);
    if (!client || ranges.length === 0 || forwardedFor === undefined) {
      return client && formatIp(client);
    }
    const hops = forwardedFor.split(',');
    for (let i = hops.length - 1; i >= 0 && trusted(client); i--) {
      client = parseIp(hops[i].trim());
      if (!client) {
        return undefined;
      }
    }
    return formatIp(client);
  };
}

/** TRUSTED_PROXIES as configured: `10.0.0.0/8, 192.0.2.7` -> entries; unset or blank -> none. */
export function trustedProxyList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}
