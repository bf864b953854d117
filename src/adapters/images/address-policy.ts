import ipaddr from 'ipaddr.js';

/** Decides whether the fetcher may connect to an IP address. */
export type AddressPolicy = (ip: string) => boolean;

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
 * unique-local, multicast, unspecified, CGNAT, documentation, benchmarking and other reserved
 * ranges are refused, and so is every IPv6 form that can reach such an IPv4 address.
 */
export const publicOnly: AddressPolicy = (ip) => {
  if (!ipaddr.isValid(ip) || IPV4_COMPATIBLE_TEXT.test(ip)) return false;
  const addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv4') return addr.range() === 'unicast';
  const v6 = addr as ipaddr.IPv6;
  const inner = embeddedIPv4(v6);
  if (inner) return inner.range() === 'unicast';
  return v6.range() === 'unicast' && v6.match(GLOBAL_UNICAST);
};

export const allowAll: AddressPolicy = () => true;
