import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The layer rules of ARCHITECTURE.md are lint errors, so `npm run check` (and CI) fails on them.
// One ESLint process lints every probe below as if it were the named file (its config is ESM,
// which jest cannot load in-process); one process, because each start loads the config again.

const ROOT = path.resolve(__dirname, '../..');

interface Probe {
  filePath: string;
  code: string;
  /** Type-aware: read as an existing file of the project, so the type checker sees it. */
  typed?: boolean;
}
type Messages = Array<{ ruleId: string; message: string }>;

// A probe at a new path is in no TypeScript project: for those the type-aware rules stay off.
const LINTER = `
const { ESLint } = require('eslint');
let input = '';
process.stdin.on('data', (c) => (input += c)).on('end', async () => {
  const plain = new ESLint({ overrideConfig: {
    languageOptions: { parserOptions: { projectService: false } },
    rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/no-misused-promises': 'off' },
  } });
  const typed = new ESLint();
  const out = [];
  for (const p of JSON.parse(input)) {
    const [r] = await (p.typed ? typed : plain).lintText(p.code, { filePath: p.filePath });
    out.push(r.messages.map((m) => ({ ruleId: m.ruleId, message: m.message })));
  }
  process.stdout.write(JSON.stringify(out));
});`;

function lintAll(probes: Probe[]): Promise<Messages[]> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['-e', LINTER],
      { cwd: ROOT, maxBuffer: 16 * 2 ** 20 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}`));
        resolve(JSON.parse(stdout) as Messages[]);
      },
    );
    child.stdin!.end(JSON.stringify(probes));
  });
}

const refused: Array<[string, string, string]> = [
  [
    'src/api/rest/routes/x.ts',
    "import '../../../app/container';",
    'a transport calls services only',
  ],
  [
    'src/api/graphql/x.ts',
    "import '../../ports/content-store';",
    'a transport calls services only',
  ],
  ['src/api/x.ts', "import '../adapters/elasticsearch/dsl';", 'a transport calls services only'],
  ['src/services/x.ts', "import '../api/links';", 'never imports a transport'],
  ['src/jobs/x.ts', "import '../adapters/group-commit';", 'never imports a transport'],
  ['src/domain/x.ts', "import '../services/vision';", 'import only each other'],
  ['src/domain/x.ts', "import 'fastify';", 'free of vendor packages'],
  ['src/adapters/embedded/x.ts', "import '../../services/auth';", 'implements ports only'],
  ['bench/x.ts', "import '../src/app/start';", 'visual-search-service/dist/'],
  ['bench/x.ts', "import '../test/helpers/app';", 'visual-search-service/dist/'],
];

const allowed: Array<[string, string]> = [
  ['src/api/rest/routes/x.ts', "import '../../../services/vision';"],
  ['src/services/x.ts', "import '../ports/content-store';"],
  ['src/app/x.ts', "import '../adapters/embedded/db';"],
  ['bench/x.ts', "import 'visual-search-service/dist/app/start';"],
];

const typeAware: Probe = {
  filePath: 'src/lib/slots.ts',
  code: [
    'export async function f(): Promise<void> {}',
    'f();',
    'export const g = [1].forEach(async () => f());',
  ].join('\n'),
  typed: true,
};

let results: Messages[];
beforeAll(async () => {
  results = await lintAll([
    ...[...refused, ...allowed].map(([filePath, code]) => ({ filePath, code })),
    typeAware,
  ]);
}, 120_000);

const restricted = (i: number): string[] =>
  results[i]!.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);

test.each(refused.map((c, i) => [...c, i] as const))('%s may not %s', (_f, _c, why, i) => {
  expect(restricted(i).join('\n')).toContain(why);
});

test.each(allowed.map((c, i) => [...c, refused.length + i] as const))('%s may %s', (_f, _c, i) => {
  expect(restricted(i)).toEqual([]);
});

test('nothing in src/ knows of the benchmarks, which are a package of their own', () => {
  const mentions = fs
    .readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|tsx|mjs|css|html)$/.test(f))
    .filter((f) => /\bbench/i.test(fs.readFileSync(path.join(ROOT, 'src', f), 'utf8')));
  expect(mentions).toEqual([]);
});

test('lint is type-aware: an unhandled promise and an async callback where void is expected fail', () => {
  expect(results.at(-1)!.map((m) => m.ruleId)).toEqual(
    expect.arrayContaining([
      '@typescript-eslint/no-floating-promises',
      '@typescript-eslint/no-misused-promises',
    ]),
  );
});
