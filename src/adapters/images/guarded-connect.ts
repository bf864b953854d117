import dns from 'node:dns';
import net from 'node:net';
import { buildConnector } from 'undici';
import { destinationKey, type AddressPolicy, type Destination } from './address-policy';

/**
 * Sockets opened under an address policy (contract §9): the image fetcher and the webhook
 * sender both connect only through `guardedConnector`, so there is one place that decides
 * which addresses the service may reach.
 */

export const FORBIDDEN = 'EFORBIDDENADDRESS';

class ForbiddenAddress extends Error {
  readonly code = FORBIDDEN;
}

/**
 * Answers that the name has no address: NXDOMAIN or NODATA (getaddrinfo reports both as
 * ENOTFOUND, c-ares as ENOTFOUND and ENODATA). An authoritative "no such name" is the URL's
 * fault, and negative caching keeps it for far longer than retries wait. Everything else a
 * resolver can say (EAI_AGAIN, timeouts, SERVFAIL, refused or unreachable servers) says
 * nothing about the name.
 */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA']);

export class DnsFailure extends Error {
  readonly permanent: boolean;

  constructor(host: string, cause: unknown) {
    const code = (cause as { code?: unknown } | null)?.code;
    const name = typeof code === 'string' ? code : 'unknown error';
    const permanent = NO_SUCH_NAME.has(name);
    super(
      permanent
        ? `host ${host} does not resolve (${name})`
        : `could not resolve host ${host} for now (${name})`,
    );
    this.permanent = permanent;
  }
}

/**
 * All addresses of a host name. Injectable, so tests can play resolver failures. A resolver
 * that never answers is cut off by the connect timeout.
 */
export type Resolve = (
  hostname: string,
  family: dns.LookupOptions['family'],
) => Promise<dns.LookupAddress[]>;

export const systemResolve: Resolve = (hostname, family) =>
  dns.promises.lookup(hostname, { all: true, family: family ?? 0 });

/**
 * How a name's addresses are judged. `allowed`: the socket gets the addresses the policy
 * allows, and the name is refused only when none is (the fetcher: a dual-stack host with one
 * odd address still serves its images). `every`: one refused address refuses the name (the
 * webhook sender: a receiver's name has no business pointing inside).
 */
export type NameRule = 'allowed' | 'every';

type LookupCallback = (
  err: Error | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

const refusedName = (to: Destination): ForbiddenAddress =>
  new ForbiddenAddress(`${destinationKey(to)} resolves to an address that is not allowed`);

/**
 * A DNS lookup for connections to `to` that hands the socket only addresses the policy allows
 * there, so the check applies to the address actually connected to (no window for DNS
 * rebinding between check and connect). Its errors name the host, never the addresses it
 * resolved to: those describe the network the service runs in, which is none of the client's
 * business.
 */
function guardedLookup(policy: AddressPolicy, resolve: Resolve, to: Destination, rule: NameRule) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, options.family).then(
      (addresses) => {
        if (addresses.length === 0)
          return callback(new DnsFailure(hostname, { code: 'ENOTFOUND' }), []);
        const allowed = addresses.filter((a) => policy(a.address, to));
        if (allowed.length === 0 || (rule === 'every' && allowed.length < addresses.length))
          return callback(refusedName(to), []);
        if (options.all) callback(null, allowed);
        else callback(null, allowed[0].address, allowed[0].family);
      },
      (err: unknown) => callback(new DnsFailure(hostname, err), []),
    );
  };
}

const defaultPort = (protocol: string): number => (protocol === 'https:' ? 443 : 80);

/** The destination a URL names. */
export function destinationOf(u: URL): Destination {
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port) || defaultPort(u.protocol),
  };
}

/** Why a literal IP destination is refused, or undefined (also for names, judged at lookup). */
export function literalRefusal(policy: AddressPolicy, to: Destination): string | undefined {
  return net.isIP(to.host) && !policy(to.host, to)
    ? `${destinationKey(to)} is not an allowed address`
    : undefined;
}

/**
 * Every address a name resolves to, judged as `every` would: why the name is refused (one
 * address refused, or no address at all), or undefined. For checks ahead of any connection,
 * such as a webhook URL at registration; connections are judged again by the connector.
 */
export async function nameRefusal(
  policy: AddressPolicy,
  resolve: Resolve,
  to: Destination,
): Promise<string | undefined> {
  let addresses: dns.LookupAddress[];
  try {
    addresses = await resolve(to.host, 0);
  } catch (e) {
    return new DnsFailure(to.host, e).message;
  }
  if (addresses.length === 0) return new DnsFailure(to.host, { code: 'ENOTFOUND' }).message;
  return addresses.every((a) => policy(a.address, to)) ? undefined : refusedName(to).message;
}

/** Connectors kept, one per destination (each holds that destination's TLS sessions). */
const MAX_CONNECTORS = 256;

/**
 * Every socket goes through here, for the first URL and every redirect. The policy is asked
 * about (address, the host and port the URL names), and the socket is opened to that very
 * port: undici hands a connector the origin's own host and port, and the lookup built for this
 * destination only ever feeds its addresses to a socket bound for it. A listed `host:port`
 * (contract §9) therefore opens that one port of whatever the host resolves to; the same
 * address reached under another name or on another port is judged on its own. Node's `lookup`
 * hook is not told the port, hence one connector per destination.
 */
export function guardedConnector(
  policy: AddressPolicy,
  resolve: Resolve,
  timeout: number,
  rule: NameRule = 'allowed',
): buildConnector.connector {
  const connectors = new Map<string, buildConnector.connector>();
  return (options, callback) => {
    const to: Destination = {
      host: options.hostname.replace(/^\[|\]$/g, ''),
      port: Number(options.port) || defaultPort(options.protocol),
    };
    // Literal addresses never reach the lookup.
    const refusal = literalRefusal(policy, to);
    if (refusal) return callback(new ForbiddenAddress(refusal), null);
    const key = `${options.protocol}//${destinationKey(to)}`;
    let connect = connectors.get(key);
    if (connect) connectors.delete(key);
    else
      connect = buildConnector({
        lookup: guardedLookup(policy, resolve, to, rule) as never,
        timeout,
      });
    connectors.set(key, connect); // most recently used last
    if (connectors.size > MAX_CONNECTORS) connectors.delete(connectors.keys().next().value!);
    connect(options, callback);
  };
}

export interface ErrorLike {
  code?: string;
  name?: string;
  message?: string;
  cause?: unknown;
}

/** The error and its causes: undici wraps socket errors (ours included) several levels deep. */
export const causes = (e: unknown): ErrorLike[] => {
  const out: ErrorLike[] = [];
  for (
    let c = e as ErrorLike | undefined, i = 0;
    c && typeof c === 'object' && i < 6;
    c = c.cause as ErrorLike, i++
  )
    out.push(c);
  return out;
};

/** Whether an undici error chain says the request ran out of time (ours or undici's own). */
export const timedOut = (chain: ErrorLike[]): boolean =>
  chain.some(
    (c) =>
      c.name === 'TimeoutError' ||
      c.name === 'AbortError' ||
      c.code === 'UND_ERR_HEADERS_TIMEOUT' ||
      c.code === 'UND_ERR_BODY_TIMEOUT' ||
      c.code === 'UND_ERR_CONNECT_TIMEOUT',
  );
