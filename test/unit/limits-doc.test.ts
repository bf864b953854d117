/**
 * docs/limits.md is generated from LIMIT_TABLE, so the docs cannot drift from the code:
 * `UPDATE_DOCS=1 npx jest test/unit/limits-doc.test.ts` rewrites it after a change.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { LIMITS, LIMIT_TABLE } from '../../src/domain/limits';

const FILE = path.join(__dirname, '../../docs/limits.md');

const show = (value: number, unit: string): string => {
  if (unit === 'bytes' && value >= 1024 * 1024 && value % (1024 * 1024) === 0)
    return `${value / (1024 * 1024)} MB (${value.toLocaleString('en')} bytes)`;
  if (unit === 'bytes' && value % 1024 === 0)
    return `${value / 1024} KB (${value.toLocaleString('en')} bytes)`;
  if (unit === 'ms') return `${value / 1000} s`;
  return `${value.toLocaleString('en')} ${unit === 'count' ? '' : unit}`.trim();
};

function render(): string {
  const rows = Object.entries(LIMIT_TABLE).map(
    ([name, l]) => `| ${l.what} | ${show(l.value, l.unit)} | \`${name}\` |`,
  );
  const text = [
    '# Limits',
    '',
    '<!-- Generated from src/domain/limits.ts by test/unit/limits-doc.test.ts',
    '     (UPDATE_DOCS=1 to rewrite). Do not edit by hand. -->',
    '',
    'Every size, count and time limit of the service, as the code applies it. Errors past a',
    'limit use the contract §2 body and name the item, field or parameter.',
    '',
    '| what | limit | name in `src/domain/limits.ts` |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
  // As the repository's formatter writes it, so `npm run format:check` agrees (in a child
  // process: prettier loads its plugins with dynamic imports, which jest's sandbox refuses).
  return execFileSync(
    process.execPath,
    [require.resolve('prettier/bin/prettier.cjs'), '--stdin-filepath', FILE],
    { input: text, encoding: 'utf8' },
  );
}

test('docs/limits.md is the table the code reads', () => {
  const want = render();
  if (process.env.UPDATE_DOCS) fs.writeFileSync(FILE, want);
  expect(fs.readFileSync(FILE, 'utf8')).toBe(want);
});

test('LIMITS holds exactly the values of the table', () => {
  expect(Object.keys(LIMITS)).toEqual(Object.keys(LIMIT_TABLE));
  for (const [k, l] of Object.entries(LIMIT_TABLE))
    expect(LIMITS[k as keyof typeof LIMITS]).toBe(l.value);
});
