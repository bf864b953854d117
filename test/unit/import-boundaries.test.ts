import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The layer rules of ARCHITECTURE.md are lint errors, so `npm run check` (and CI) fails on them.
// The ESLint CLI reads each probe from stdin as if it were the named file (its config is ESM,
// which jest cannot load in-process).

const ROOT = path.resolve(__dirname, '../..');
const ESLINT = path.join(ROOT, 'node_modules/eslint/bin/eslint.js');

function lint(
  filePath: string,
  code: string,
  typed = false,
): Promise<Array<{ ruleId: string; message: string }>> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [
        ESLINT,
        ...['--format', 'json', '--stdin', '--stdin-filename', filePath],
        // a probe at a new path is in no TypeScript project: the type-aware rules stay off
        ...(typed
          ? []
          : [
              ...['--parser-options', 'projectService:false'],
              ...['--rule', '@typescript-eslint/no-floating-promises: off'],
              ...['--rule', '@typescript-eslint/no-misused-promises: off'],
            ]),
      ],
      { cwd: ROOT },
      (err, stdout) => {
        // exit code 1 means lint errors, which is what most cases expect
        if (err && err.code !== 1) return reject(err);
        const [result] = JSON.parse(stdout) as Array<{
          messages: Array<{ ruleId: string; message: string }>;
        }>;
        resolve(result!.messages);
      },
    );
    child.stdin!.end(code);
  });
}

const restricted = async (filePath: string, code: string): Promise<string[]> =>
  (await lint(filePath, code))
    .filter((m) => m.ruleId === 'no-restricted-imports')
    .map((m) => m.message);

test.each([
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
])('%s may not %s', async (file, code, why) => {
  expect((await restricted(file, code)).join('\n')).toContain(why);
});

test.each([
  ['src/api/rest/routes/x.ts', "import '../../../services/vision';"],
  ['src/services/x.ts', "import '../ports/content-store';"],
  ['src/app/x.ts', "import '../adapters/embedded/db';"],
  ['bench/x.ts', "import 'visual-search-service/dist/app/start';"],
])('%s may %s', async (file, code) => {
  expect(await restricted(file, code)).toEqual([]);
});

test('nothing in src/ knows of the benchmarks, which are a package of their own', () => {
  const mentions = fs
    .readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|tsx|mjs|css|html)$/.test(f))
    .filter((f) => /\bbench/i.test(fs.readFileSync(path.join(ROOT, 'src', f), 'utf8')));
  expect(mentions).toEqual([]);
});

test('lint is type-aware: an unhandled promise and an async callback where void is expected fail', async () => {
  // read as an existing file of the project, so the type checker sees it
  const probe = [
    'export async function f(): Promise<void> {}',
    'f();',
    'export const g = [1].forEach(async () => f());',
  ].join('\n');
  const rules = (await lint('src/lib/slots.ts', probe, true)).map((m) => m.ruleId);
  expect(rules).toEqual(
    expect.arrayContaining([
      '@typescript-eslint/no-floating-promises',
      '@typescript-eslint/no-misused-promises',
    ]),
  );
});
