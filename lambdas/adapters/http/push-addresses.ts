import { BlockList, isIPv6 } from 'node:net';

/**
 * Addresses a push target must not reach: a caller could otherwise make the gateway call its own
 * network (SSRF). Loopback, private (RFC 1918, ULA), link-local (which holds the cloud metadata
 * service, 169.254.169.254 and fd00:ec2::254), shared, reserved and multicast ranges (RFC 6890).
 */
const V4: [string, number][] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
const V6: [string, number][] = [
  ['::', 128],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
];
const LOOPBACK_V4: [string, number] = ['127.0.0.0', 8];
const LOOPBACK_V6: [string, number] = ['::1', 128];

function blockList(allowLoopback: boolean): BlockList {
  const list = new BlockList();
  for (const [address, prefix] of allowLoopback ? V4 : [...V4, LOOPBACK_V4]) list.addSubnet(address, prefix, 'ipv4');
  for (const [address, prefix] of allowLoopback ? V6 : [...V6, LOOPBACK_V6]) list.addSubnet(address, prefix, 'ipv6');
  return list;
}

const LISTS = { strict: blockList(false), loopbackAllowed: blockList(true) };

/** Why a target may not be connected to at this address, or undefined when it may. */
export function addressRefusal(address: string, allowLoopback: boolean): string | undefined {
  const list = allowLoopback ? LISTS.loopbackAllowed : LISTS.strict;
  const bare = address.replace(/%.*$/, '');
  const refused = isIPv6(bare)
    ? list.check(bare, 'ipv6') || embeddedIpv4(bare).some((inner) => list.check(inner, 'ipv4'))
    : list.check(bare, 'ipv4');
  return refused ? `${address} is a private, loopback, link-local or reserved address` : undefined;
}

/**
 * The IPv4 addresses an IPv6 address carries and reaches: IPv4-compatible (::/96, RFC 4291
 * §2.5.5.1), IPv4-mapped (::ffff:0:0/96), SIIT (::ffff:0:0:0/96, RFC 2765), NAT64 (64:ff9b::/96,
 * RFC 6052), 6to4 (2002::/16, RFC 3056) and Teredo (2001::/32, RFC 4380: the server, and the
 * client's address with its bits inverted). Whatever the text (hex or dotted, leading zeros, case).
 */
export function embeddedIpv4(address: string): string[] {
  const g = groups(address);
  const zero = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  const v4 = (high: number, low: number) => [high >> 8, high & 255, low >> 8, low & 255].join('.');
  const last = v4(g[6], g[7]);
  if (zero(0, 6)) return g[6] === 0 && g[7] <= 1 ? [] : [last]; // :: and ::1 are IPv6's own
  if (zero(0, 5) && g[5] === 0xffff) return [last];
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return [last];
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return [last];
  if (g[0] === 0x2002) return [v4(g[1], g[2])];
  if (g[0] === 0x2001 && g[1] === 0) return [v4(g[2], g[3]), v4(~g[6] & 0xffff, ~g[7] & 0xffff)];
  return [];
}

/** An IPv6 address's eight 16-bit groups. The URL parser writes any valid form as hex groups (WHATWG URL, IPv6 serializer). */
function groups(address: string): number[] {
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head, tail] = canonical.includes('::') ? canonical.split('::') : [canonical, undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((group) => parseInt(group, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
