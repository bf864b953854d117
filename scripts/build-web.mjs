// Bundles the browser pages in src/web into dist/web (served by the API; no CDN at run time).
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const outdir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/web');
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: { graphiql: 'src/web/graphiql/main.ts' },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['es2022'],
  outdir,
  define: { 'process.env.NODE_ENV': '"production"' },
  loader: {
    '.woff': 'file',
    '.woff2': 'file',
    '.ttf': 'file',
    '.svg': 'dataurl',
    '.png': 'dataurl',
  },
  assetNames: '[name]-[hash]',
  logLevel: 'warning',
});
