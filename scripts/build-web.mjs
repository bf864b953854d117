// Bundles the browser pages in src/web into dist/web (served by the API; no CDN at run time):
// the GraphiQL page (graphiql.js/.css) and the web console (console-<hash>.js/.css and
// console.html, the page with the hashed names filled in; see src/api/rest/routes/console.ts).
import { build } from 'esbuild';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist/web');
rmSync(outdir, { recursive: true, force: true });

const common = {
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['es2022'],
  outdir,
  absWorkingDir: root,
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
};

const graphiql = build({
  ...common,
  entryPoints: { graphiql: 'src/web/graphiql/main.ts' },
  loader: {
    '.woff': 'file',
    '.woff2': 'file',
    '.ttf': 'file',
    '.svg': 'dataurl',
    '.png': 'dataurl',
  },
  assetNames: '[name]-[hash]',
});

/** The console: one hashed script and stylesheet (cached for good), and its page. */
async function buildConsole() {
  const result = await build({
    ...common,
    entryPoints: { console: 'src/web/console/main.tsx' },
    entryNames: '[name]-[hash]',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    metafile: true,
  });
  const outputs = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
  const pick = (ext) => {
    const name = outputs.find((f) => f.startsWith('console-') && f.endsWith(ext));
    if (!name) throw new Error(`build-web: the console build wrote no ${ext} file`);
    return name;
  };
  const html = readFileSync(path.join(root, 'src/web/console/index.html'), 'utf8')
    .replace('%CONSOLE_CSS%', `/console/assets/${pick('.css')}`)
    .replace('%CONSOLE_JS%', `/console/assets/${pick('.js')}`);
  writeFileSync(path.join(outdir, 'console.html'), html);
}

await Promise.all([graphiql, buildConsole()]);
