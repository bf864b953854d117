import ipaddr from 'ipaddr.js';

/**
 * Where a connection goes: the host the URL names (as the WHATWG URL parser writes it:
 * lowercase, IPv6 without brackets) and the port it names (80/443 when it names none).
 */
export interface Destination {
  host: string;
  port: number;
}

/**
 * Decides whether the fetcher may connect to the IP address `ip`, which is what the URL's host
 * resolved to (or the host itself, for a literal address), on the destination's port.
 */
export type AddressPolicy = (ip: string, to: Destination) => boolean;

/** IANA's global unicast space: nothing outside it is a public host today. */
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];
/** RFC 6052's well-known NAT64 prefix: a translator sends the packets to the last 32 bits. */
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96') as [ipaddr.IPv6, number];
/**
 * ipaddr.js reads `::a.b.c.d` as IPv4-mapped, but it is the IPv4-compatible form (::/96, how
 * inet_ntop prints such addresses), a different address that some stacks tunnel to a.b.c.d.
 */
const IPV4_COMPATIBLE_TEXT = /^::\d{1,3}(\.\d{1,3}){3}$/;

const v4 = (bytes: number[]): ipaddr.IPv4 => new ipaddr.IPv4(bytes);

/**
 * The IPv4 address the packets end up at, for IPv6 forms whose routing is decided by it
 * (IPv4-mapped, the NAT64 well-known prefix, 6to4): such an address is as public as that IPv4.
 * The local-use NAT64 prefix (64:ff9b:1::/48) is not here: its translator and the position of
 * the IPv4 inside it are local choices, so it is refused whole, like Teredo (whose client part
 * is obfuscated) and the deprecated IPv4-compatible ::/96.
 */
function embeddedIPv4(a: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const b = a.toByteArray();
  if (a.isIPv4MappedAddress()) return a.toIPv4Address();
  if (a.match(NAT64_WELL_KNOWN)) return v4(b.slice(12, 16));
  if (a.range() === '6to4') return v4(b.slice(2, 6));
  return undefined;
}

/**
 * Only globally routable unicast addresses. Loopback, private, link-local, site-local,
 * unique-local, multicast, unspecified, CGNAT, documentation, RFC 2544 device-test and other reserved
 * ranges are refused, and so is every IPv6 form that can reach such an IPv4 address.
 */
export const publicOnly = (ip: string): boolean => {
  if (!ipaddr.isValid(ip) || IPV4_COMPATIBLE_TEXT.test(ip)) return false;
  const addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv4') return addr.range() === 'unicast';
  const v6 = addr as ipaddr.IPv6;
  const inner = embeddedIPv4(v6);
  if (inner) return inner.range() === 'unicast';
  return v6.range() === 'unicast' && v6.match(GLOBAL_UNICAST);
};

export const allowAll: AddressPolicy = () => true;

/** How a destination is written in `IMAGE_FETCH_ALLOW_HOSTS` and compared: `host:port`, `[v6]:port`. */
export const destinationKey = (to: Destination): string =>
  `${to.host.includes(':') ? `[${to.host}]` : to.host}:${to.port}`;

/**
 * `publicOnly`, plus every address for exactly the listed destinations (`IMAGE_FETCH_ALLOW_HOSTS`:
 * e.g. a local image server on 127.0.0.1:5123). The exception is keyed on the host *and* port the
 * URL names, and the fetcher connects to the port it names, so a listed name opens one port on
 * whatever that name resolves to and nothing else: another name resolving to the same private
 * address (DNS rebinding), the same host on another port, and a redirect to any other private
 * destination all stay refused.
 */
export function allowListed(
  listed: readonly Destination[],
  base: AddressPolicy = publicOnly,
): AddressPolicy {
  if (listed.length === 0) return base;
  const keys = new Set(listed.map(destinationKey));
  return (ip, to) => keys.has(destinationKey(to)) || base(ip, to);
}
