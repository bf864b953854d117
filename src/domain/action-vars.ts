import { invalid } from './errors';
import { keyed } from './keyed';
import { LIMITS } from './limits';

const KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * `v`: comma-separated `key:value` action variables (e.g. `a:exit,user_id:abc`). A value may
 * contain ':' (only the first one separates); keys are word characters, dots and dashes.
 */
export function parseActionVars(v: string | undefined): Record<string, string> {
  if (v === undefined || v === '') return {};
  if (v.length > LIMITS.vMaxLength)
    throw invalid(`v is ${v.length} characters; at most ${LIMITS.vMaxLength}`, [
      { param: 'v', message: 'too long' },
    ]);
  // a key such as __proto__ is a key like any other
  const out = keyed<string>();
  let pos = 0;
  for (const pair of v.split(',')) {
    const colon = pair.indexOf(':');
    const key = colon < 0 ? pair : pair.slice(0, colon);
    if (colon < 0 || !KEY.test(key)) {
      throw invalid(`malformed v at position ${pos}: expected key:value`, [
        {
          param: 'v',
          position: pos,
          message: `'${pair}' is not key:value (key: letters, digits, _ . -)`,
        },
      ]);
    }
    let value = pair.slice(colon + 1);
    try {
      value = decodeURIComponent(value);
    } catch {
      /* keep the raw text: v is informational */
    }
    out[key] = value;
    pos += pair.length + 1;
  }
  return out;
}
