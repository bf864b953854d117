import net from 'node:net';
import { Agent, request } from 'undici';
import { DELIVERY_TIMEOUT_MS } from '../../domain/webhook';
import type { SendOutcome, WebhookSender } from '../../ports/webhook-sender';
import type { AddressPolicy } from '../images/address-policy';
import {
  causes,
  destinationOf,
  DnsFailure,
  FORBIDDEN,
  guardedConnector,
  literalRefusal,
  nameRefusal,
  systemResolve,
  timedOut,
  type Resolve,
} from '../images/guarded-connect';

/** The most of a receiver's answer read before the connection is dropped: it is never used. */
const MAX_ANSWER_BYTES = 64 * 1024;

const DEFAULT_USER_AGENT = 'visual-search-service/0.1 (webhooks)';

/** The URL, or why it is no webhook destination before any address is looked at. */
function parseDestination(url: string): URL | string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'not a valid URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return `scheme ${u.protocol} is not allowed (http, https)`;
  // The signature authenticates the sender; credentials in a URL would only leak into logs.
  if (u.username || u.password) return 'a URL with user information is not allowed';
  return u;
}

function classify(e: unknown, url: URL): SendOutcome {
  const chain = causes(e);
  const forbidden = chain.find((c) => c.code === FORBIDDEN);
  if (forbidden)
    return { error: 'forbidden_address', message: forbidden.message ?? 'address not allowed' };
  const dnsFailure = chain.find((c): c is DnsFailure => c instanceof DnsFailure);
  if (dnsFailure) return { error: 'connection', message: dnsFailure.message };
  if (timedOut(chain)) return { error: 'timeout', message: `${url.origin} did not answer in time` };
  const code = chain.find((c) => c.code)?.code ?? 'unknown';
  return { error: 'connection', message: `could not reach ${url.origin} (${code})` };
}

/**
 * Sends webhook requests under the image-fetch address policy (contract §9, §17). Its agent
 * keeps no connection (no pipelining, `Connection: close`), so every attempt opens a socket
 * through the guarded connector: the name is resolved again and every address judged, which a
 * pooled socket would skip. Undici follows no redirect without its redirect interceptor, so a
 * 3xx comes back as the outcome.
 */
export class HttpWebhookSender implements WebhookSender {
  private readonly agent: Agent;
  private readonly resolve: Resolve;
  private readonly userAgent: string;

  constructor(
    private readonly policy: AddressPolicy,
    opts: { resolve?: Resolve; userAgent?: string } = {},
  ) {
    this.resolve = opts.resolve ?? systemResolve;
    this.userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
    this.agent = new Agent({
      connect: guardedConnector(policy, this.resolve, DELIVERY_TIMEOUT_MS, 'every'),
      pipelining: 0,
    });
  }

  async checkDestination(url: string): Promise<string | undefined> {
    const u = parseDestination(url);
    if (typeof u === 'string') return u;
    const to = destinationOf(u);
    if (net.isIP(to.host)) return literalRefusal(this.policy, to);
    return nameRefusal(this.policy, this.resolve, to);
  }

  async send(
    url: string,
    headers: Record<string, string>,
    body: string,
    timeoutMs: number,
  ): Promise<SendOutcome> {
    const u = parseDestination(url);
    if (typeof u === 'string') return { error: 'forbidden_address', message: u };
    const literal = literalRefusal(this.policy, destinationOf(u));
    if (literal) return { error: 'forbidden_address', message: literal };
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const res = await request(u, {
        dispatcher: this.agent,
        method: 'POST',
        signal,
        headers: { 'user-agent': this.userAgent, ...headers, connection: 'close' },
        body,
      });
      await res.body.dump({ limit: MAX_ANSWER_BYTES, signal });
      const header = res.headers['retry-after'];
      const retryAfter = Array.isArray(header) ? header[0] : header;
      return { status: res.statusCode, ...(retryAfter !== undefined ? { retryAfter } : {}) };
    } catch (e) {
      return classify(e, u);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
