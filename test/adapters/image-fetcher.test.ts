import type { LookupAddress } from 'node:dns';
import { HttpImageFetcher } from '../../src/adapters/images/http-fetcher';
import type { Resolve } from '../../src/adapters/images/guarded-connect';
import {
  allowListed,
  publicOnly,
  type AddressPolicy,
} from '../../src/adapters/images/address-policy';
import { ImageError } from '../../src/domain/processing';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let img: ImageServer;
let port: string;
beforeAll(async () => {
  img = await startImageServer();
  port = new URL(img.url).port;
});
afterAll(() => img.close());

/** Loopback stands in for "the public internet": 127.0.0.1 is allowed, every other address is not. */
const only127001: AddressPolicy = (ip) => ip === '127.0.0.1';
const limits = { deadlineMs: 1500, maxBytes: 20 * 1024 * 1024, maxRedirects: 3 };

async function failure(f: HttpImageFetcher, url: string): Promise<ImageError> {
  try {
    await f.fetch(url);
  } catch (e) {
    expect(e).toBeInstanceOf(ImageError);
    return e as ImageError;
  }
  throw new Error(`expected ${url} to fail`);
}

describe('HttpImageFetcher', () => {
  const f = new HttpImageFetcher(only127001, limits);
  afterAll(() => f.close());

  it('downloads an allowed image', async () => {
    const bytes = await f.fetch(`${img.url}/img/1.png`);
    expect(Buffer.from(bytes.subarray(1, 4)).toString()).toBe('PNG');
  });

  it('refuses a literal address outside the policy before connecting', async () => {
    const e = await failure(f, `http://127.0.0.2:${port}/img/1.png`);
    expect(e.code).toBe('forbidden_address');
    expect(e.transient).toBe(false);
  });

  it('checks every redirect hop', async () => {
    const to = encodeURIComponent(`http://127.0.0.2:${port}/img/1.png`);
    expect((await failure(f, `${img.url}/redirect/1?to=${to}`)).code).toBe('forbidden_address');
    const ok = encodeURIComponent(`${img.url}/img/2.png`);
    expect((await f.fetch(`${img.url}/redirect/1?to=${ok}`)).length).toBeGreaterThan(0);
  });

  it('checks the address a host name resolves to (the address actually connected to)', async () => {
    const second = await startImageServer('127.0.0.2');
    const noLoopback = new HttpImageFetcher((ip) => ip === '127.0.0.2', limits);
    try {
      expect((await noLoopback.fetch(`${second.url}/img/1.png`)).length).toBeGreaterThan(0);
      const to = encodeURIComponent(`http://localhost:${port}/img/1.png`);
      // first hop allowed (127.0.0.2); the redirect names a host that resolves to a refused address
      expect((await failure(noLoopback, `${second.url}/redirect/1?to=${to}`)).code).toBe(
        'forbidden_address',
      );
      const e = await failure(noLoopback, `http://localhost:${port}/img/1.png`);
      expect(e.code).toBe('forbidden_address');
      expect(e.message).toContain('localhost');
      expect(e.message).not.toMatch(/127\.0\.0\.1|::1/);
    } finally {
      await noLoopback.close();
      await second.close();
    }
  });

  it('refuses non-http redirect targets and long redirect chains', async () => {
    expect(
      (await failure(f, `${img.url}/redirect/1?to=${encodeURIComponent('file:///etc/passwd')}`))
        .code,
    ).toBe('forbidden_address');
    let url = `${img.url}/img/3.png`;
    for (let i = 0; i < 4; i++) url = `${img.url}/redirect/${i}?to=${encodeURIComponent(url)}`;
    const e = await failure(f, url);
    expect(e.code).toBe('download_failed');
    expect(e.message).toContain('redirects');
  });

  it('stops at the size limit', async () => {
    const tiny = new HttpImageFetcher(only127001, { ...limits, maxBytes: 100 });
    try {
      expect((await failure(tiny, `${img.url}/img/4.png`)).code).toBe('too_large');
    } finally {
      await tiny.close();
    }
  });

  it('gives up at the deadline with a transient timeout', async () => {
    const e = await failure(f, `${img.url}/slow.png`);
    expect(e.code).toBe('timeout');
    expect(e.transient).toBe(true);
  });

  it('classifies status codes: 404 permanent not_found, 503 transient', async () => {
    expect(await failure(f, `${img.url}/missing.png`)).toMatchObject({
      code: 'not_found',
      transient: false,
    });
    img.failuresLeft.set('/flaky/9.png', 1);
    expect(await failure(f, `${img.url}/flaky/9.png`)).toMatchObject({
      code: 'download_failed',
      transient: true,
    });
  });

  it('treats a refused connection as transient', async () => {
    expect(await failure(f, 'http://127.0.0.1:1/img.png')).toMatchObject({
      code: 'download_failed',
      transient: true,
    });
  });

  it('refuses IPv6 literals that reach a non-public IPv4 (IPv4-compatible, mapped, NAT64, 6to4)', async () => {
    const real = new HttpImageFetcher(publicOnly, limits);
    try {
      for (const host of [
        '[::127.0.0.1]',
        '[::7f00:1]',
        '[::ffff:127.0.0.1]',
        '[::ffff:7f00:1]',
        '[64:ff9b::127.0.0.1]',
        '[2002:7f00:1::1]',
        '[::1]',
      ])
        expect(await failure(real, `http://${host}:${port}/img/1.png`)).toMatchObject({
          code: 'forbidden_address',
          transient: false,
        });
    } finally {
      await real.close();
    }
  });
});

describe('HttpImageFetcher name resolution', () => {
  const HOST = 'images.example.test';
  const dnsError = (code: string) =>
    Object.assign(new Error(`getaddrinfo ${code} ${HOST}`), { code, hostname: HOST });
  /** A fetcher whose resolver answers `answer` for every name. */
  const resolving = (answer: () => Promise<LookupAddress[]>, policy = only127001) => {
    const resolve: Resolve = () => answer();
    return new HttpImageFetcher(policy, limits, resolve);
  };
  const at = (address: string): LookupAddress[] => [
    { address, family: address.includes(':') ? 6 : 4 },
  ];

  it('connects to what the injected resolver answers', async () => {
    const f = resolving(async () => at('127.0.0.1'));
    try {
      expect((await f.fetch(`http://${HOST}:${port}/img/1.png`)).length).toBeGreaterThan(0);
    } finally {
      await f.close();
    }
  });

  it.each(['EAI_AGAIN', 'ETIMEOUT', 'ESERVFAIL', 'EAI_FAIL', 'ECONNREFUSED', 'EREFUSED'])(
    'retries a resolver failure (%s) like a 5xx',
    async (code) => {
      const f = resolving(() => Promise.reject(dnsError(code)));
      try {
        const e = await failure(f, `http://${HOST}:${port}/img/1.png`);
        expect(e).toMatchObject({ code: 'download_failed', transient: true });
        expect(e.message).toContain(HOST);
        expect(e.message).toContain(code);
      } finally {
        await f.close();
      }
    },
  );

  it('retries a resolver that never answers, as a timeout', async () => {
    const f = resolving(() => new Promise<LookupAddress[]>(() => {}));
    try {
      expect(await failure(f, `http://${HOST}:${port}/img/1.png`)).toMatchObject({
        code: 'timeout',
        transient: true,
      });
    } finally {
      await f.close();
    }
  });

  it.each([
    ['ENOTFOUND', () => Promise.reject(dnsError('ENOTFOUND'))],
    ['ENODATA', () => Promise.reject(dnsError('ENODATA'))],
    ['an empty answer', async () => []],
  ])('records a name that does not exist (%s) at once', async (_, answer) => {
    const f = resolving(answer as () => Promise<LookupAddress[]>);
    try {
      const e = await failure(f, `http://${HOST}:${port}/img/1.png`);
      expect(e).toMatchObject({ code: 'download_failed', transient: false });
      expect(e.message).toContain(HOST);
    } finally {
      await f.close();
    }
  });

  it.each(['10.0.0.7', '169.254.169.254', 'fd00::7', '::7f00:1'])(
    'refuses a name resolving to %s without disclosing the address',
    async (address) => {
      const f = resolving(async () => at(address), publicOnly);
      try {
        const e = await failure(f, `http://${HOST}:${port}/img/1.png`);
        expect(e).toMatchObject({ code: 'forbidden_address', transient: false });
        expect(e.message).toContain(HOST);
        expect(e.message).not.toContain(address);
      } finally {
        await f.close();
      }
    },
  );

  it('connects only to the allowed addresses of a mixed answer', async () => {
    const f = resolving(async () => [...at('10.0.0.7'), ...at('127.0.0.1')]);
    try {
      expect((await f.fetch(`http://${HOST}:${port}/img/1.png`)).length).toBeGreaterThan(0);
    } finally {
      await f.close();
    }
  });
});

/**
 * IMAGE_FETCH_ALLOW_HOSTS (contract §9): with the real public-only policy, loopback is private,
 * so only the listed image server (host and port) is reachable.
 */
describe('HttpImageFetcher with allowed private hosts', () => {
  let other: ImageServer; // the same host, another port: never listed
  let otherPort: string;
  let f: HttpImageFetcher;
  beforeAll(async () => {
    other = await startImageServer();
    otherPort = new URL(other.url).port;
    f = new HttpImageFetcher(
      allowListed([
        { host: '127.0.0.1', port: Number(port) },
        { host: 'localhost', port: Number(port) },
      ]),
      limits,
    );
  });
  afterAll(async () => {
    await f.close();
    await other.close();
  });
  const forbidden = async (url: string) => {
    const e = await failure(f, url);
    expect(e).toMatchObject({ code: 'forbidden_address', transient: false });
    expect(e.message).toMatch(/not (an )?allowed/);
    return e;
  };

  it('fetches from a listed host:port, by address and by name', async () => {
    expect((await f.fetch(`${img.url}/img/1.png`)).length).toBeGreaterThan(0);
    expect((await f.fetch(`http://localhost:${port}/img/2.png`)).length).toBeGreaterThan(0);
  });

  it('refuses the same host on a port that is not listed, before connecting', async () => {
    const before = other.hits.get('/img/1.png') ?? 0;
    const byAddress = await forbidden(`http://127.0.0.1:${otherPort}/img/1.png`);
    // a literal names only itself (the URL's own text), never anything resolved
    expect(byAddress.message).toBe(`127.0.0.1:${otherPort} is not an allowed address`);
    const byName = await forbidden(`http://localhost:${otherPort}/img/1.png`);
    expect(byName.message).toBe(
      `localhost:${otherPort} resolves to an address that is not allowed`,
    );
    expect(byName.message).not.toMatch(/127\.0\.0\.1|::1/);
    expect(other.hits.get('/img/1.png') ?? 0).toBe(before);
  });

  it('refuses a redirect from the listed host to another private port', async () => {
    for (const target of [
      `http://127.0.0.1:${otherPort}/img/3.png`,
      `http://localhost:${otherPort}/img/3.png`,
      `http://127.0.0.2:${port}/img/3.png`, // another private address on the listed port
    ])
      await forbidden(`${img.url}/redirect/1?to=${encodeURIComponent(target)}`);
    expect(other.hits.get('/img/3.png')).toBeUndefined();
    // a redirect between listed destinations is followed
    const ok = encodeURIComponent(`http://localhost:${port}/img/3.png`);
    expect((await f.fetch(`${img.url}/redirect/1?to=${ok}`)).length).toBeGreaterThan(0);
  });

  it('does not open a listed port to other names resolving to the same address (DNS rebinding)', async () => {
    // every name resolves to 127.0.0.1, as a rebinding attacker's name would
    const resolve: Resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const g = new HttpImageFetcher(
      allowListed([{ host: 'images.internal', port: Number(port) }]),
      limits,
      resolve,
    );
    try {
      expect((await g.fetch(`http://images.internal:${port}/img/4.png`)).length).toBeGreaterThan(0);
      for (const url of [
        `http://rebind.attacker.test:${port}/img/4.png`, // the listed port, another name
        `http://images.internal:${otherPort}/img/4.png`, // the listed name, another port
      ])
        expect(await failure(g, url)).toMatchObject({ code: 'forbidden_address' });
      const hop = encodeURIComponent(`http://rebind.attacker.test:${otherPort}/img/4.png`);
      expect(await failure(g, `http://images.internal:${port}/redirect/1?to=${hop}`)).toMatchObject(
        { code: 'forbidden_address' },
      );
      expect(other.hits.get('/img/4.png')).toBeUndefined();
    } finally {
      await g.close();
    }
  });
});
