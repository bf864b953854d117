import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AnswerDroppingProxy {
  url: string;
  /** Requests whose answer was dropped after the service had carried them out. */
  dropped: number;
  close(): Promise<void>;
}

/**
 * An HTTP proxy to Elasticsearch that lets every request through but, for those `drop`
 * picks, waits for the whole answer and then cuts the client's connection instead of
 * relaying it: the write happened, the client never learns it (a timeout or a reset at
 * the worst moment).
 */
export async function startAnswerDroppingProxy(
  target: string,
  drop: (method: string, path: string) => boolean,
): Promise<AnswerDroppingProxy> {
  const proxy: AnswerDroppingProxy = { url: '', dropped: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = { ...req.headers };
      delete headers.host;
      void fetch(new URL(req.url ?? '/', target), {
        method: req.method,
        headers: headers as Record<string, string>,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      })
        .then(async (upstream) => {
          const body = Buffer.from(await upstream.arrayBuffer());
          if (drop(req.method ?? 'GET', req.url ?? '/')) {
            proxy.dropped++;
            req.socket.destroy();
            return;
          }
          const out: Record<string, string> = {};
          upstream.headers.forEach((v, k) => {
            if (k !== 'content-encoding' && k !== 'transfer-encoding') out[k] = v;
          });
          out['content-length'] = String(body.length);
          res.writeHead(upstream.status, out).end(body);
        })
        .catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return proxy;
}
