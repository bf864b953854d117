import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got, with whether its signature verified. */
export interface Received {
  id: string;
  timestamp: number;
  body: any;
  raw: string;
  at: number;
  verified: boolean;
  /** What the receiver answered. */
  status: number;
  /** The request's path and query, and its content type. */
  path: string;
  contentType: string;
  /** The raw signature header (`v1,<base64>` entries separated by spaces). */
  signature: string;
}

/** What to answer a request: a status, and headers (e.g. Retry-After). */
export type Answer = { status: number; headers?: Record<string, string>; delayMs?: number };

export interface WebhookReceiver {
  url: string;
  port: number;
  /** Every request, in arrival order. */
  received: Received[];
  /** Requests answered 2xx. */
  delivered(): Received[];
  /** Set once the secret is known (at registration); requests before it count as unverified. */
  secret?: string;
  /** Answers for the next requests, in order; 200 once they are used up. */
  script: Answer[];
  /** Closes the port (a receiver that is down); `listen` opens it again on the same port. */
  down(): Promise<void>;
  listen(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A webhook receiver on loopback that verifies every signature with the Standard Webhooks
 * reference library (`standardwebhooks`), as an integrator would.
 */
export async function startWebhookReceiver(port = 0): Promise<WebhookReceiver> {
  const r: WebhookReceiver = {
    url: '',
    port,
    received: [],
    delivered: () => r.received.filter((x) => x.status >= 200 && x.status < 300),
    script: [],
    down: async () => {
      server.closeAllConnections();
      await new Promise<void>((res) => server.close(() => res()));
    },
    listen: () =>
      new Promise<void>((res) => {
        server.listen(r.port, '127.0.0.1', () => {
          r.port = (server.address() as AddressInfo).port;
          r.url = `http://127.0.0.1:${r.port}/hook`;
          res();
        });
      }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const headers = {
        'webhook-id': String(req.headers['webhook-id'] ?? ''),
        'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
      };
      let verified = false;
      try {
        if (r.secret) {
          new Webhook(r.secret).verify(raw, headers);
          verified = true;
        }
      } catch {
        verified = false;
      }
      const answer = r.script.shift() ?? { status: 200 };
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        /* kept raw */
      }
      r.received.push({
        id: headers['webhook-id'],
        timestamp: Number(headers['webhook-timestamp']),
        body,
        raw,
        at: Date.now(),
        verified,
        status: answer.status,
        path: req.url ?? '',
        contentType: String(req.headers['content-type'] ?? ''),
        signature: headers['webhook-signature'],
      });
      const send = () => {
        res.writeHead(answer.status, answer.headers ?? {});
        res.end();
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await r.listen();
  return r;
}

/**
 * The environment of a test installation whose image fetcher and webhooks may reach only the
 * image server and these receivers (any other private address refused, as in production),
 * with the retry schedule divided by 1,000.
 */
export function webhookTestEnv(
  imageServerUrl: string,
  receivers: readonly WebhookReceiver[],
): Record<string, string> {
  return {
    IMAGE_FETCH_ALLOW_PRIVATE: 'false',
    IMAGE_FETCH_ALLOW_HOSTS: [
      new URL(imageServerUrl).host,
      ...receivers.map((r) => `127.0.0.1:${r.port}`),
    ].join(','),
    WEBHOOK_RETRY_SCALE: '1000',
  };
}
