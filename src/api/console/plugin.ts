import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import fs from 'node:fs';
import path from 'node:path';
import { AppError } from '../../domain/errors';
import { CONTENT_TYPES, WEB_DIR } from '../web-assets';

/**
 * The web console at `/`: a static page built by scripts/build-web.mjs into dist/web
 * (console.html plus console-<hash>.js/.css). It talks to the public REST API and GraphQL with
 * the token the user pastes, so both routes here are public: the page holds no data.
 */

interface ConsoleAssets {
  html?: string;
  /** Hashed file name → contents. */
  files: Map<string, Buffer>;
}

function loadConsoleAssets(dir = WEB_DIR): ConsoleAssets {
  const files = new Map<string, Buffer>();
  const page = path.join(dir, 'console.html');
  if (!fs.existsSync(page)) return { files };
  for (const name of fs.readdirSync(dir))
    if (/^console-[\w-]+\.(js|css)$/.test(name))
      files.set(name, fs.readFileSync(path.join(dir, name)));
  return { html: fs.readFileSync(page, 'utf8'), files };
}

/**
 * Everything the page runs comes from this server (no CDN, no inline script). Images are the
 * exception: the service discards images after processing, so the console shows each item's
 * original image URL (`image_url`), which may be on any http(s) origin — hence `img-src http:
 * https:`. `data:` is the photo dropped for a lens search, previewed before it is sent.
 */
const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: http: https:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const NOT_BUILT = `<!doctype html>
<html lang="en"><meta charset="utf-8"><title>Console not built</title>
<h1>The web console is not built</h1>
<p>This server has no <code>dist/web/console.html</code>. Run <code>npm run build</code> (or
<code>node scripts/build-web.mjs</code>), then reload this page. The REST API and GraphQL work
without it.</p>
</html>
`;

/** The console's page and assets: public, and they call no service (the page holds no data). */
export const consolePages =
  (dir = WEB_DIR): FastifyPluginAsync =>
  async (app) => {
    let assets = loadConsoleAssets(dir);
    // A build made after start-up is picked up on the next request.
    const current = (): ConsoleAssets => {
      if (!assets.html) assets = loadConsoleAssets(dir);
      return assets;
    };
    const secure = (reply: FastifyReply) =>
      reply.header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer');

    app.get('/', { config: { public: true } }, async (_req, reply) => {
      const { html } = current();
      secure(reply).header('Cache-Control', 'no-cache').type('text/html; charset=utf-8');
      if (!html) return reply.code(503).header('Retry-After', '60').send(NOT_BUILT);
      return reply.header('Content-Security-Policy', CONSOLE_CSP).send(html);
    });

    app.get<{ Params: { file: string } }>(
      '/console/assets/:file',
      { config: { public: true } },
      async (req, reply) => {
        const body = current().files.get(req.params.file);
        if (!body) throw new AppError('not_found', `no console asset '${req.params.file}'`);
        // The names carry a hash of the contents: a new build is a new name.
        return secure(reply)
          .type(CONTENT_TYPES[path.extname(req.params.file)] ?? 'application/octet-stream')
          .header('Cache-Control', 'public, max-age=31536000, immutable')
          .send(body);
      },
    );
  };
