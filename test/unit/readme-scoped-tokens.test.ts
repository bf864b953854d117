import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseScoped, scopedKey, verifyScoped } from '../../src/services/scoped-tokens';

/** The README's minting examples, as a shop would paste them. */
const readme = fs.readFileSync(path.join(__dirname, '../../README.md'), 'utf8');
const section = readme.slice(readme.indexOf('### Scoped tokens for shoppers'));
const block = (lang: string): string => {
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(section);
  if (!m) throw new Error(`no ${lang} block in the README's scoped-token section`);
  return m[1]!;
};

const key = scopedKey(crypto.randomBytes(32), 'ds-1', 3);
const env = { ...process.env, SCOPED_KEY: key };

function check(token: string): void {
  const t = parseScoped(token.trim());
  expect(t).toBeDefined();
  expect(verifyScoped(t!, key)).toBe(true);
  expect(t!.claims).toMatchObject({ q: 'region:eu', uid: 'shopper-42' });
  expect(t!.claims.exp! * 1000).toBeGreaterThan(Date.now());
}

test('the Node example mints a token the service accepts', () => {
  const code = `${block('js')}\nconsole.log(token);`;
  check(execFileSync(process.execPath, ['--input-type=module', '-e', code], { env }).toString());
});

test('the Python example mints a token the service accepts', () => {
  check(execFileSync('python3', ['-c', `${block('python')}\nprint(token)`], { env }).toString());
});
