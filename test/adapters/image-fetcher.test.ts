import { HttpImageFetcher } from '../../src/adapters/images/http-fetcher';
import type { AddressPolicy } from '../../src/adapters/images/address-policy';
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
      expect((await failure(noLoopback, `http://localhost:${port}/img/1.png`)).code).toBe(
        'forbidden_address',
      );
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
});
