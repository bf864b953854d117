import dns from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, request } from 'undici';
import { LIMITS } from '../../domain/limits';
import { ImageError } from '../../domain/processing';
import type { ImageFetcher } from '../../ports/image-fetcher';
import { destinationKey, type AddressPolicy, type Destination } from './address-policy';

export interface FetchLimits {
  deadlineMs: number;
  maxBytes: number;
  maxRedirects: number;
}

const CONTRACT_FETCH_LIMITS: FetchLimits = {
  deadlineMs: LIMITS.imageFetchTimeoutMs,
  maxBytes: LIMITS.imageMaxBytes,
  maxRedirects: LIMITS.imageMaxRedirects,
};

const FORBIDDEN = 'EFORBIDDENADDRESS';

class ForbiddenAddress extends Error {
  readonly code = FORBIDDEN;
}

/**
 * Answers that the name has no address: NXDOMAIN or NODATA (getaddrinfo reports both as
 * ENOTFOUND, c-ares as ENOTFOUND and ENODATA). Recorded at once: an authoritative "no such
 * name" is the URL's fault, and negative caching keeps it for far longer than our retries wait,
 * so retrying would only delay the error the client has to act on. Everything else a resolver
 * can say (EAI_AGAIN, timeouts, SERVFAIL, refused or unreachable servers) says nothing about
 * the name, so it is retried like a 5xx.
 */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA']);

class DnsFailure extends Error {
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
 * that never answers is cut off by the connect timeout and ends as a transient `timeout`.
 */
export type Resolve = (
  hostname: string,
  family: dns.LookupOptions['family'],
) => Promise<dns.LookupAddress[]>;

const systemResolve: Resolve = (hostname, family) =>
  dns.promises.lookup(hostname, { all: true, family: family ?? 0 });

type LookupCallback = (
  err: Error | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/**
 * A DNS lookup for connections to `to` that hands the socket only addresses the policy allows
 * there, so the check applies to the address actually connected to (no window for DNS
 * rebinding between check and connect). Its errors name the host, never the addresses it
 * resolved to: those describe the network the service runs in, which is none of the client's
 * business.
 */
function guardedLookup(policy: AddressPolicy, resolve: Resolve, to: Destination) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, options.family).then(
      (addresses) => {
        if (addresses.length === 0)
          return callback(new DnsFailure(hostname, { code: 'ENOTFOUND' }), []);
        const allowed = addresses.filter((a) => policy(a.address, to));
        if (allowed.length === 0)
          return callback(
            new ForbiddenAddress(
              `${destinationKey(to)} resolves to an address that is not allowed`,
            ),
            [],
          );
        if (options.all) callback(null, allowed);
        else callback(null, allowed[0].address, allowed[0].family);
      },
      (err: unknown) => callback(new DnsFailure(hostname, err), []),
    );
  };
}

const defaultPort = (protocol: string): number => (protocol === 'https:' ? 443 : 80);

/** The destination a URL names. */
function destinationOf(u: URL): Destination {
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port) || defaultPort(u.protocol),
  };
}

/** Connectors kept, one per destination (each holds that destination's TLS sessions). */
const MAX_CONNECTORS = 256;

/**
 * Every socket the fetcher opens goes through here, for the first URL and every redirect. The
 * policy is asked about (address, the host and port the URL names), and the socket is opened
 * to that very port: undici hands a connector the origin's own host and port, and the lookup
 * built for this destination only ever feeds its addresses to a socket bound for it. A listed
 * `host:port` (contract §9) therefore opens that one port of whatever the host resolves to;
 * the same address reached under another name or on another port is judged on its own.
 * Node's `lookup` hook is not told the port, hence one connector per destination.
 */
function guardedConnector(
  policy: AddressPolicy,
  resolve: Resolve,
  timeout: number,
): buildConnector.connector {
  const connectors = new Map<string, buildConnector.connector>();
  return (options, callback) => {
    const to: Destination = {
      host: options.hostname.replace(/^\[|\]$/g, ''),
      port: Number(options.port) || defaultPort(options.protocol),
    };
    // Literal addresses never reach the lookup.
    if (net.isIP(to.host) && !policy(to.host, to))
      return callback(
        new ForbiddenAddress(`${destinationKey(to)} is not an allowed address`),
        null,
      );
    const key = `${options.protocol}//${destinationKey(to)}`;
    let connect = connectors.get(key);
    if (connect) connectors.delete(key);
    else connect = buildConnector({ lookup: guardedLookup(policy, resolve, to) as never, timeout });
    connectors.set(key, connect); // most recently used last
    if (connectors.size > MAX_CONNECTORS) connectors.delete(connectors.keys().next().value!);
    connect(options, callback);
  };
}

interface ErrorLike {
  code?: string;
  name?: string;
  message?: string;
  cause?: unknown;
}

/** The error and its causes: undici wraps socket errors (ours included) several levels deep. */
const causes = (e: unknown): ErrorLike[] => {
  const out: ErrorLike[] = [];
  for (
    let c = e as ErrorLike | undefined, i = 0;
    c && typeof c === 'object' && i < 6;
    c = c.cause as ErrorLike, i++
  )
    out.push(c);
  return out;
};

function classify(e: unknown, url: string): ImageError {
  if (e instanceof ImageError) return e;
  const chain = causes(e);
  const forbidden = chain.find((c) => c.code === FORBIDDEN);
  if (forbidden)
    return new ImageError('forbidden_address', forbidden.message ?? 'address not allowed');
  const dnsFailure = chain.find((c): c is DnsFailure => c instanceof DnsFailure);
  if (dnsFailure)
    return new ImageError('download_failed', dnsFailure.message, !dnsFailure.permanent);
  if (
    chain.some(
      (c) =>
        c.name === 'TimeoutError' ||
        c.name === 'AbortError' ||
        c.code === 'UND_ERR_HEADERS_TIMEOUT' ||
        c.code === 'UND_ERR_BODY_TIMEOUT' ||
        c.code === 'UND_ERR_CONNECT_TIMEOUT',
    )
  )
    return new ImageError('timeout', `downloading ${url} took longer than allowed`, true);
  const code = chain.find((c) => c.code)?.code ?? 'unknown';
  return new ImageError('download_failed', `could not download ${url} (${code})`, true);
}

/** Downloads images over http(s) under contract §4's rules. */
export class HttpImageFetcher implements ImageFetcher {
  private readonly agent: Agent;

  constructor(
    private readonly policy: AddressPolicy,
    private readonly limits: FetchLimits = CONTRACT_FETCH_LIMITS,
    resolve: Resolve = systemResolve,
  ) {
    this.agent = new Agent({
      connect: guardedConnector(policy, resolve, limits.deadlineMs),
      headersTimeout: limits.deadlineMs,
      bodyTimeout: limits.deadlineMs,
    });
  }

  async fetch(url: string): Promise<Uint8Array> {
    const signal = AbortSignal.timeout(this.limits.deadlineMs);
    let current = new URL(url);
    try {
      for (let hop = 0; ; hop++) {
        this.checkTarget(current);
        const res = await request(current, {
          dispatcher: this.agent,
          method: 'GET',
          signal,
          headers: {
            accept: 'image/jpeg, image/png;q=0.9, */*;q=0.1',
            'user-agent': 'visual-search-service/0.1',
          },
        });
        if ([301, 302, 303, 307, 308].includes(res.statusCode)) {
          await res.body.dump();
          const location = res.headers.location;
          if (typeof location !== 'string')
            throw new ImageError('download_failed', `redirect from ${current} without a Location`);
          if (hop >= this.limits.maxRedirects)
            throw new ImageError(
              'download_failed',
              `more than ${this.limits.maxRedirects} redirects`,
            );
          current = new URL(location, current);
          continue;
        }
        if (res.statusCode !== 200) {
          await res.body.dump();
          const s = res.statusCode;
          if (s === 404 || s === 410) throw new ImageError('not_found', `${current} answered ${s}`);
          const transient = s >= 500 || s === 408 || s === 429;
          throw new ImageError('download_failed', `${current} answered ${s}`, transient);
        }
        return await this.readBody(res.body, res.headers['content-length'], String(current));
      }
    } catch (e) {
      throw classify(e, url);
    }
  }

  private checkTarget(u: URL): void {
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new ImageError(
        'forbidden_address',
        `scheme ${u.protocol} is not allowed (http, https)`,
      );
    // Literal IPs never reach the DNS lookup: refused here before any connection is attempted
    // (the connector checks them again, as it does every socket).
    const to = destinationOf(u);
    if (net.isIP(to.host) && !this.policy(to.host, to))
      throw new ImageError('forbidden_address', `${destinationKey(to)} is not an allowed address`);
  }

  private async readBody(
    body: AsyncIterable<Buffer> & { destroy(): void },
    length: unknown,
    url: string,
  ): Promise<Uint8Array> {
    const max = this.limits.maxBytes;
    if (typeof length === 'string' && Number(length) > max) {
      body.destroy();
      throw new ImageError('too_large', `${url} is ${length} bytes; at most ${max}`);
    }
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      size += chunk.length;
      if (size > max) {
        body.destroy();
        throw new ImageError('too_large', `${url} is larger than ${max} bytes`);
      }
      parts.push(chunk);
    }
    return Buffer.concat(parts);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
