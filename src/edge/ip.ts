/**
 * IP addresses as bytes: 4 for IPv4, 16 for IPv6. A pure parser (no node:net), so the Worker's graph
 * stays free of Node-only modules. Strict on purpose: what it accepts may end up in a legal record
 * (the clickwrap proof), so anything but a plain address (ports, brackets, zone ids, leading zeros,
 * markup) is not an address.
 */

/** The longest textual address: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`. */
const MAX_TEXT = 45;
const DECIMAL_OCTET = /^(0|[1-9]\d{0,2})$/;
const HEX_WORD = /^[0-9A-Fa-f]{1,4}$/;

/** Bytes of an IPv4 or IPv6 address; an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its IPv4. */
export function parseIp(text: string): Uint8Array | undefined {
  if (text.length === 0 || text.length > MAX_TEXT) {
    return undefined;
  }
  if (!text.includes(':')) {
    return parseIpv4(text);
  }
  const v6 = parseIpv6(text);
  return v6 && isIpv4Mapped(v6) ? v6.slice(12) : v6;
}

/** The canonical text: dotted decimal, or RFC 5952 (lower case, the longest zero run as `::`). */
export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) {
    return bytes.join('.');
  }
  const words = Array.from({ length: 8 }, (_, i) => (bytes[2 * i] << 8) | bytes[2 * i + 1]);
  let runStart = -1;
  let runLength = 0;
  for (let i = 0; i < 8; ) {
    let end = i;
    while (end < 8 && words[end] === 0) {
      end++;
    }
    if (end - i > runLength) {
      runStart = i;
      runLength = end - i;
    }
    i = end === i ? i + 1 : end;
  }
  const hex = words.map((word) => word.toString(16));
  if (runLength < 2) {
    return hex.join(':');
  }
  return `${hex.slice(0, runStart).join(':')}::${hex.slice(runStart + runLength).join(':')}`;
}

export interface IpRange {
  network: Uint8Array;
  /** Leading bits that must match. */
  prefix: number;
}

/** `192.0.2.1`, `10.0.0.0/8`, `2001:db8::/32`; a bare address is a range of one. */
export function parseIpRange(text: string): IpRange | undefined {
  const [address, bits, ...rest] = text.split('/');
  const network = parseIp(address);
  if (!network || rest.length > 0) {
    return undefined;
  }
  const max = network.length * 8;
  if (bits === undefined) {
    return { network, prefix: max };
  }
  if (!DECIMAL_OCTET.test(bits)) {
    return undefined;
  }
  // An IPv4-mapped IPv6 range (`::ffff:10.0.0.0/104`) is the IPv4 range it maps.
  const prefix = network.length === 4 && address.includes(':') ? Number(bits) - 96 : Number(bits);
  return prefix >= 0 && prefix <= max ? { network, prefix } : undefined;
}

export function inRange(ip: Uint8Array, range: IpRange): boolean {
  if (ip.length !== range.network.length) {
    return false;
  }
  for (let i = 0, bits = range.prefix; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((ip[i] & mask) !== (range.network[i] & mask)) {
      return false;
    }
  }
  return true;
}

function parseIpv4(text: string): Uint8Array | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) {
    return undefined;
  }
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    // Decimal only and no leading zeros: `010` is octal to some parsers and decimal to others.
    if (!DECIMAL_OCTET.test(parts[i]) || Number(parts[i]) > 255) {
      return undefined;
    }
    bytes[i] = Number(parts[i]);
  }
  return bytes;
}

function parseIpv6(text: string): Uint8Array | undefined {
  const halves = text.split('::');
  if (halves.length > 2) {
    return undefined;
  }
  const sides: number[][] = [];
  for (const [side, half] of halves.entries()) {
    const parts = half === '' ? [] : half.split(':');
    const words: number[] = [];
    for (const [i, part] of parts.entries()) {
      const last = side === halves.length - 1 && i === parts.length - 1;
      if (HEX_WORD.test(part)) {
        words.push(Number.parseInt(part, 16));
        continue;
      }
      // Only the address's last 32 bits may be written as dotted IPv4 (`::ffff:192.0.2.1`).
      const v4 = last ? parseIpv4(part) : undefined;
      if (!v4) {
        return undefined;
      }
      words.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
    }
    sides.push(words);
  }
  const [head, tail] = sides;
  const zeros = tail === undefined ? 0 : 8 - head.length - tail.length;
  if ((tail === undefined && head.length !== 8) || (tail !== undefined && zeros < 1)) {
    return undefined;
  }
  const words = [...head, ...Array<number>(zeros).fill(0), ...(tail ?? [])];
  const bytes = new Uint8Array(16);
  for (const [i, word] of words.entries()) {
    bytes[2 * i] = word >> 8;
    bytes[2 * i + 1] = word & 0xff;
  }
  return bytes;
}

function isIpv4Mapped(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
}
