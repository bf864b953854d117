import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';

/** A deterministic small image: colour and a bar position derived from `seed`. */
export async function makeImage(
  seed: number,
  format: 'png' | 'jpeg' = 'png',
  size = 48,
): Promise<Buffer> {
  const r = (seed * 67) % 256;
  const g = (seed * 131) % 256;
  const b = (seed * 197) % 256;
  const bar = Buffer.from(
    `<svg width="${size}" height="${size}"><rect width="100%" height="100%" fill="rgb(${r},${g},${b})"/>` +
      `<rect x="${seed % size}" y="0" width="6" height="${size}" fill="white"/></svg>`,
  );
  const img = sharp(bar);
  return format === 'png' ? img.png().toBuffer() : img.jpeg().toBuffer();
}

export interface ImageServer {
  url: string;
  /** Requests per path, to check what was (re-)downloaded. */
  hits: Map<string, number>;
  /** Paths that answer 503 this many more times before succeeding. */
  failuresLeft: Map<string, number>;
  /** Bytes served at /file/<name> (JPEG), set by a test. */
  files: Map<string, Buffer>;
  /** Paths that answer 404 from now on (an image removed at its source). */
  gone: Set<string>;
  /** Most requests that were open at the same time (shows several workers sharing load). */
  peakInFlight(): number;
  close(): Promise<void>;
}

/**
 * Serves images for the tests on loopback:
 *   /img/<seed>.png|.jpg     an image (any query string ignored)
 *   /noext/<seed>            a png without extension
 *   /missing.png             404
 *   /flaky/<seed>.png        503 while failuresLeft says so, then the image
 *   /gif/<n>.png             GIF bytes behind a .png name
 *   /corrupt.png             a truncated png
 *   /redirect/<n>?to=<url>   302 to `to`
 *   /slow.png                never answers in time
 *   /delayed/<seed>.png?ms=N the image after N ms
 *   /file/<name>             the bytes a test put in `files` (as JPEG)
 */
export async function startImageServer(host = '127.0.0.1'): Promise<ImageServer> {
  const hits = new Map<string, number>();
  const failuresLeft = new Map<string, number>();
  const gone = new Set<string>();
  const files = new Map<string, Buffer>();
  let open = 0;
  let peak = 0;
  const server = http.createServer((req, res) => {
    open++;
    peak = Math.max(peak, open);
    res.once('close', () => open--);
    void (async () => {
      const u = new URL(req.url ?? '/', 'http://x');
      hits.set(u.pathname, (hits.get(u.pathname) ?? 0) + 1);
      let m: RegExpExecArray | null;
      if (gone.has(u.pathname)) {
        res.writeHead(404);
        return res.end('gone');
      }
      if (
        (m = /^\/img\/(\d+)\.(png|jpg)$/.exec(u.pathname)) ||
        (m = /^\/noext\/(\d+)$/.exec(u.pathname))
      ) {
        const jpeg = m[2] === 'jpg';
        res.writeHead(200, { 'content-type': jpeg ? 'image/jpeg' : 'image/png' });
        return res.end(await makeImage(Number(m[1]), jpeg ? 'jpeg' : 'png'));
      }
      if ((m = /^\/flaky\/(\d+)\.png$/.exec(u.pathname))) {
        const left = failuresLeft.get(u.pathname) ?? 0;
        if (left > 0) {
          failuresLeft.set(u.pathname, left - 1);
          res.writeHead(503);
          return res.end('try later');
        }
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(await makeImage(Number(m[1])));
      }
      if (u.pathname.startsWith('/gif/')) {
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(
          await sharp({ create: { width: 8, height: 8, channels: 3, background: 'red' } })
            .gif()
            .toBuffer(),
        );
      }
      if (u.pathname === '/corrupt.png') {
        const png = await makeImage(3, 'png', 200);
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(png.subarray(0, Math.floor(png.length / 2)));
      }
      if (u.pathname.startsWith('/redirect/')) {
        res.writeHead(302, { location: u.searchParams.get('to') ?? '/' });
        return res.end();
      }
      if (u.pathname === '/slow.png') return; // never answers
      if ((m = /^\/file\/(.+)$/.exec(u.pathname)) && files.has(m[1]!)) {
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        return res.end(files.get(m[1]!));
      }
      if ((m = /^\/delayed\/(\d+)\.png$/.exec(u.pathname))) {
        await new Promise((r) => setTimeout(r, Number(u.searchParams.get('ms') ?? 100)));
        res.writeHead(200, { 'content-type': 'image/png' });
        return res.end(await makeImage(Number(m[1])));
      }
      res.writeHead(404);
      res.end('not here');
    })();
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    hits,
    failuresLeft,
    files,
    gone,
    peakInFlight: () => peak,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
