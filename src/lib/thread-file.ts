import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** How a thread's sources are transpiled when they have not been compiled (see threadFile). */
const TRANSPILE = { module: 'CommonJS', target: 'ES2022', esModuleInterop: true } as const;
/** Relative imports and requires of a module's code (type-only imports are erased anyway). */
const RELATIVE = /(?:from\s+|require\(\s*|import\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

/**
 * The file a worker thread starts from: the compiled sibling `<name>.js` when there is one
 * (dist/). From src/ under ts-jest, which does not reach worker threads, the `.ts` module and
 * every module it imports by a relative path are transpiled with `typescript` (a devDependency)
 * into node_modules/.cache, laid out as under src/, once per version of their sources, so the
 * thread runs the modules themselves from files (no eval) and resolves packages as src/ does.
 */
export async function threadFile(dir: string, name: string): Promise<string> {
  const built = path.join(dir, `${name}.js`);
  if (fs.existsSync(built)) return built;
  const entry = path.join(dir, `${name}.ts`);
  const root = sourceRoot(dir);
  const sources = new Map<string, string>();
  collect(entry, sources);
  const hash = crypto.createHash('sha256').update(JSON.stringify(TRANSPILE));
  for (const [file, source] of [...sources].sort(([a], [b]) => (a < b ? -1 : 1)))
    hash.update(path.relative(root, file)).update(source);
  const key = hash.digest('hex').slice(0, 16);
  const modules = path.dirname(path.dirname(require.resolve('typescript/package.json')));
  const out = path.join(modules, '.cache', 'vss-threads', key);
  const target = (file: string) =>
    path.join(out, path.relative(root, file)).replace(/\.ts$/, '.js');
  if (fs.existsSync(target(entry))) return target(entry);
  const ts = await import('typescript');
  // the entry last: its presence says every module it needs is there
  for (const [file, source] of [...sources].reverse()) {
    const { outputText } = ts.transpileModule(source, {
      fileName: path.basename(file),
      compilerOptions: {
        module: ts.ModuleKind[TRANSPILE.module],
        target: ts.ScriptTarget[TRANSPILE.target],
        esModuleInterop: TRANSPILE.esModuleInterop,
      },
    });
    const to = target(file);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    // written whole under another name first: test files in other processes may race for it
    const partial = `${to}.${crypto.randomUUID()}`;
    fs.writeFileSync(partial, outputText);
    fs.renameSync(partial, to);
  }
  return target(entry);
}

/** The module and, depth first, every module it imports by a relative path. */
function collect(file: string, into: Map<string, string>): void {
  if (into.has(file)) return;
  const source = fs.readFileSync(file, 'utf8');
  into.set(file, source);
  for (const m of source.matchAll(RELATIVE)) {
    const base = path.resolve(path.dirname(file), m[1]!);
    const found = [`${base}.ts`, path.join(base, 'index.ts')].find((f) => fs.existsSync(f));
    if (found) collect(found, into);
  }
}

/** The `src` directory above `dir` (the layout the transpiled copy keeps), or `dir` itself. */
function sourceRoot(dir: string): string {
  for (let d = path.resolve(dir); d !== path.dirname(d); d = path.dirname(d))
    if (path.basename(d) === 'src') return d;
  return path.resolve(dir);
}
