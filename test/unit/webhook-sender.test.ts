import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { allowListed } from '../../src/adapters/images/address-policy';
import type { Resolve } from '../../src/adapters/images/guarded-connect';
import { HttpWebhookSender } from '../../src/adapters/webhooks/http-sender';

interface Received {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A loopback receiver: records what it gets and answers by path. */
let server: http.Server;
let port: number;
const received: Received[] = [];
/** Bytes the endless answer wrote before the sender hung up, once it did. */
let hugeDone: Promise<number>;
let hugeFinished: (written: number) => void;
/** The sockets the receiver accepted. */
const sockets: Socket[] = [];

/** Resolves when the receiver's side of `s` has closed; fails after `ms`. */
function closedWithin(s: Socket, ms: number): Promise<void> {
  if (s.destroyed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`socket still open after ${ms} ms`)), ms);
    s.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ url: req.url!, headers: req.headers, body });
      switch (req.url) {
        case '/ok':
          res.writeHead(204).end();
          return;
        case '/busy':
          res.writeHead(503, { 'retry-after': '120' }).end('try later');
          return;
        case '/moved':
          res.writeHead(302, { location: '/ok' }).end();
          return;
        case '/slow':
          return; // never answers
        case '/huge': {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const chunk = Buffer.alloc(64 * 1024, 1);
          let written = 0;
          let open = true;
          res.on('close', () => {
            open = false;
            hugeFinished(written);
          });
          const pump = (): void => {
            while (open && written < 1024 * 1024 * 1024) {
              written += chunk.length;
              if (!res.write(chunk)) return void res.once('drain', pump);
            }
            res.end();
          };
          pump();
          return;
        }
        default:
          res.writeHead(404).end();
      }
    });
  });
  server.keepAliveTimeout = 60_000; // a pooled socket would outlive every test
  server.on('connection', (s: Socket) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

beforeEach(() => {
  received.length = 0;
  hugeDone = new Promise((r) => (hugeFinished = r));
});

const v4 = (address: string): LookupAddress => ({ address, family: 4 });

/** Names the fake resolver knows; a function answers differently on each call. */
const names: Record<string, LookupAddress[] | (() => LookupAddress[])> = {
  'public.example': [v4('93.184.216.34')],
  'mixed.example': [v4('93.184.216.34'), v4('127.0.0.1')],
  'hooks.example': [v4('127.0.0.1')],
};
const lookups: string[] = [];
const resolve: Resolve = (hostname) => {
  lookups.push(hostname);
  const answer = names[hostname];
  if (!answer) return Promise.reject(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }));
  return Promise.resolve(typeof answer === 'function' ? answer() : answer);
};

/** Only the receiver, under its address and under `hooks.example`, and public addresses. */
const policy = (): ReturnType<typeof allowListed> =>
  allowListed([
    { host: '127.0.0.1', port },
    { host: 'hooks.example', port },
  ]);

describe('HttpWebhookSender', () => {
  let sender: HttpWebhookSender;
  beforeAll(() => {
    sender = new HttpWebhookSender(policy(), { resolve, userAgent: 'test-agent' });
  });
  afterAll(() => sender.close());

  describe('checkDestination', () => {
    it.each([
      ['the cloud metadata address', 'http://169.254.169.254/latest/meta-data'],
      ['a private address', 'https://10.1.2.3/hook'],
      ['IPv6 loopback', () => `http://[::1]:${port}/ok`],
      ['IPv4-mapped loopback', () => `http://[::ffff:127.0.0.1]:${port}/ok`],
      ['the listed address on another port', () => `http://127.0.0.1:${port + 1}/ok`],
      ['a name with one private address among public ones', 'https://mixed.example/hook'],
      ['a name that does not resolve', 'https://nowhere.example/hook'],
      ['another scheme', 'ftp://public.example/hook'],
      ['user information', () => `http://user:pass@127.0.0.1:${port}/ok`],
      ['not a URL', 'hooks'],
    ])('refuses %s', async (_, url) => {
      const reason = await sender.checkDestination(typeof url === 'function' ? url() : url);
      expect(reason).toEqual(expect.any(String));
      expect(reason).not.toMatch(/127\.0\.0\.1(?!:)|93\.184/); // names no resolved address
    });

    it('allows the listed receiver, a listed name and a public name', async () => {
      expect(await sender.checkDestination(`http://127.0.0.1:${port}/ok`)).toBeUndefined();
      expect(await sender.checkDestination(`http://hooks.example:${port}/ok`)).toBeUndefined();
      expect(await sender.checkDestination('https://public.example/hook')).toBeUndefined();
      expect(await sender.checkDestination('https://93.184.216.34/hook')).toBeUndefined();
    });
  });

  describe('send', () => {
    const url = (path: string): string => `http://127.0.0.1:${port}${path}`;

    it('posts the body and headers and returns the status', async () => {
      const out = await sender.send(url('/ok'), { 'webhook-id': 'msg_1' }, '{"a":1}', 2000);
      expect(out).toEqual({ status: 204 });
      expect(received).toHaveLength(1);
      expect(received[0]!.body).toBe('{"a":1}');
      expect(received[0]!.headers['webhook-id']).toBe('msg_1');
      expect(received[0]!.headers['user-agent']).toBe('test-agent');
      expect(received[0]!.headers.connection).toBe('close');
    });

    it('returns Retry-After as sent', async () => {
      expect(await sender.send(url('/busy'), {}, '{}', 2000)).toEqual({
        status: 503,
        retryAfter: '120',
      });
    });

    it('a redirect is the outcome, never followed', async () => {
      expect(await sender.send(url('/moved'), {}, '{}', 2000)).toEqual({ status: 302 });
      expect(received.map((r) => r.url)).toEqual(['/moved']);
    });

    it('a receiver that does not answer ends as a timeout within the budget', async () => {
      const start = Date.now();
      const out = await sender.send(url('/slow'), {}, '{}', 300);
      expect(out).toMatchObject({ error: 'timeout' });
      expect(Date.now() - start).toBeLessThan(2000);
    });

    it('reads at most a little of a huge answer, then hangs up', async () => {
      const out = await sender.send(url('/huge'), {}, '{}', 10_000);
      expect(out).toEqual({ status: 200 });
      // The receiver had 1 GiB to send: it stopped at what socket buffers hold.
      expect(await hugeDone).toBeLessThan(32 * 1024 * 1024);
    });

    it('refuses a literal address outside the policy without connecting', async () => {
      const out = await sender.send(`http://127.0.0.1:${port + 1}/ok`, {}, '{}', 2000);
      expect(out).toMatchObject({ error: 'forbidden_address' });
      const mapped = await sender.send(`http://[::ffff:127.0.0.1]:${port}/ok`, {}, '{}', 2000);
      expect(mapped).toMatchObject({ error: 'forbidden_address' });
      expect(received).toHaveLength(0);
    });

    it('refuses a name with any refused address, without connecting to the others', async () => {
      const out = await sender.send(`http://mixed.example:${port}/ok`, {}, '{}', 2000);
      expect(out).toMatchObject({ error: 'forbidden_address' });
    });

    it('judges the address a name has at send time, not the one it had at registration', async () => {
      let calls = 0;
      names['rebind.example'] = () => (calls++ === 0 ? [v4('93.184.216.34')] : [v4('127.0.0.1')]);
      const hook = `http://rebind.example:${port}/ok`;
      expect(await sender.checkDestination(hook)).toBeUndefined();
      const out = await sender.send(hook, {}, '{}', 2000);
      expect(out).toMatchObject({ error: 'forbidden_address' });
      expect((out as { message: string }).message).not.toContain('127.0.0.1');
      expect(received).toHaveLength(0);
    });

    it('keeps no connection: every attempt resolves the name and connects again', async () => {
      lookups.length = 0;
      sockets.length = 0;
      const hook = `http://hooks.example:${port}/ok`;
      expect(await sender.send(hook, {}, '{}', 2000)).toEqual({ status: 204 });
      // Hung up after the answer, so nothing is left to reuse.
      await Promise.all(sockets.map((s) => closedWithin(s, 2000)));
      expect(await sender.send(hook, {}, '{}', 2000)).toEqual({ status: 204 });
      expect(lookups).toEqual(['hooks.example', 'hooks.example']);
      expect(sockets).toHaveLength(2);
    });

    it('a name that does not resolve or a closed port is a connection error', async () => {
      const dns = await sender.send('http://nowhere.example/hook', {}, '{}', 2000);
      expect(dns).toMatchObject({ error: 'connection' });
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const closedPort = (closed.address() as AddressInfo).port;
      await new Promise((r) => closed.close(r));
      const toClosed = new HttpWebhookSender(
        allowListed([{ host: '127.0.0.1', port: closedPort }]),
      );
      try {
        const out = await toClosed.send(`http://127.0.0.1:${closedPort}/ok`, {}, '{}', 2000);
        expect(out).toMatchObject({
          error: 'connection',
          message: expect.stringMatching(/ECONNREFUSED/),
        });
      } finally {
        await toClosed.close();
      }
    });
  });
});
