import path from 'node:path';

/** dist/web, built by scripts/build-web.mjs; the same path from src/ (tests) and dist/. */
export const WEB_DIR = path.resolve(__dirname, '../../dist/web');

/** Media types of the built pages' files (the GraphiQL page and the console). */
export const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
};
