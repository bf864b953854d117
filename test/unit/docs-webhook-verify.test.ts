import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { webhookHeaders, webhookSecret } from '../../src/services/webhook-signing';

/** docs/webhooks.md's verification example, as a receiver would paste it. */
const doc = fs.readFileSync(path.join(__dirname, '../../docs/webhooks.md'), 'utf8');
const section = doc.slice(doc.indexOf('## Verifying a delivery'));
const code = /```js\n([\s\S]*?)```/.exec(section)![1]!;

const secret = webhookSecret(crypto.randomBytes(32), 'wh_1', 'salt');
const body = JSON.stringify({ type: 'items.processed', data: { ids: ['a', 'é'] } });

function verifies(headers: Record<string, string>, sent: string, key = secret): boolean {
  const run = `${code}\nconsole.log(verify(${JSON.stringify(key)}, ${JSON.stringify(headers)}, ${JSON.stringify(sent)}));`;
  return (
    execFileSync(process.execPath, ['--input-type=module', '-e', run]).toString().trim() === 'true'
  );
}

test('the documented check accepts what the service signs, and nothing altered', () => {
  const headers = webhookHeaders(secret, 'msg_abc', Date.now(), body);
  expect(verifies(headers, body)).toBe(true);
  expect(verifies(headers, body.replace('a', 'b'))).toBe(false);
  expect(verifies({ ...headers, 'webhook-id': 'msg_abd' }, body)).toBe(false);
  expect(verifies(headers, body, webhookSecret(crypto.randomBytes(32), 'wh_1', 'salt'))).toBe(
    false,
  );
  const old = webhookHeaders(secret, 'msg_abc', Date.now() - 600_000, body);
  expect(verifies(old, body)).toBe(false);
});
