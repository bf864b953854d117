import ipaddr from 'ipaddr.js';

/** Decides whether the fetcher may connect to an IP address. */
export type AddressPolicy = (ip: string) => boolean;

/**
 * Only globally routable unicast addresses: loopback, private, link-local, multicast, CGNAT,
 * reserved ranges and IPv6 transition prefixes (which can embed a private IPv4) are refused.
 */
export const publicOnly: AddressPolicy = (ip) => {
  if (!ipaddr.isValid(ip)) return false;
  let addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress())
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  return addr.range() === 'unicast';
};

export const allowAll: AddressPolicy = () => true;
