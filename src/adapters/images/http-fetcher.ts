import { Agent, request } from 'undici';
import { LIMITS } from '../../domain/limits';
import { ImageError } from '../../domain/processing';
import type { ImageFetcher } from '../../ports/image-fetcher';
import type { AddressPolicy } from './address-policy';
import {
  causes,
  destinationOf,
  DnsFailure,
  FORBIDDEN,
  guardedConnector,
  literalRefusal,
  systemResolve,
  timedOut,
  type Resolve,
} from './guarded-connect';

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

function classify(e: unknown, url: string): ImageError {
  if (e instanceof ImageError) return e;
  const chain = causes(e);
  const forbidden = chain.find((c) => c.code === FORBIDDEN);
  if (forbidden)
    return new ImageError('forbidden_address', forbidden.message ?? 'address not allowed');
  const dnsFailure = chain.find((c): c is DnsFailure => c instanceof DnsFailure);
  if (dnsFailure)
    return new ImageError('download_failed', dnsFailure.message, !dnsFailure.permanent);
  if (timedOut(chain))
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
    const refusal = literalRefusal(this.policy, destinationOf(u));
    if (refusal) throw new ImageError('forbidden_address', refusal);
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
