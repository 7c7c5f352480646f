// The client address the gate's per-address limits are keyed by. An IPv4 address is itself (an
// IPv4-mapped IPv6 address counts as its IPv4 address); an IPv6 address counts as its /64
// prefix, because one host is routinely handed a whole /64 and can pick a new address from it
// for every request: keyed by full address, a per-address limit would not limit it at all.

import { isIPv4, isIPv6 } from 'node:net';

/** Longest key kept for something that is not an IP address (a misconfigured proxy's header). */
const MAX_OTHER_LENGTH = 64;

export function addressKey(ip: string): string {
  if (isIPv4(ip)) return ip;
  const bare = ip.split('%', 1)[0]!;
  if (!isIPv6(bare)) return ip.slice(0, MAX_OTHER_LENGTH);
  const g = ipv6Groups(bare);
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return `${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`;
  }
  return `${g.slice(0, 4).map((n) => n.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail converted). */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (isIPv4(tail)) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left, right] = text.split('::') as [string, string | undefined];
  const head = left ? left.split(':') : [];
  const rest = right === undefined ? [] : right ? right.split(':') : [];
  const parts = right === undefined ? head : [...head, ...Array<string>(8 - head.length - rest.length).fill('0'), ...rest];
  return parts.map((h) => parseInt(h, 16));
}
