// ts-jest, then one line more. Each test file runs in its own vm context, where every read of a
// global (Math, Number ...) goes through the context's interceptor and is never inlined, so
// per-pixel loops (the descriptor, copy signatures) run 10–25× slower than under node
// (nodejs/node#49283, jestjs/jest#5163). Binding these globals once per module, to the same
// objects, makes them plain local reads. What a test replaces on the global stays global: Date
// and timers (fake timers), the typed arrays (test/helpers/image-fuzz.ts counts allocations).
const crypto = require('node:crypto');
const fs = require('node:fs');
const tsJest = require('ts-jest').default;

/** This file's own part of the cache key: a change here transforms every file again. */
const OWN = crypto.createHash('sha256').update(fs.readFileSync(__filename)).digest('hex');

const LOCAL = ['Math', 'Number', 'Array', 'Object', 'JSON', 'String', 'Map', 'Set'];
const PRELUDE = `const { ${LOCAL.join(', ')} } = globalThis;`;
const STRICT = '"use strict";';

function localise(code) {
  // on the first line, so that no line of the source map moves; output without the directive
  // (none today: every file here is CommonJS TypeScript) is left as it is, only slower
  return code.startsWith(STRICT) ? STRICT + PRELUDE + code.slice(STRICT.length) : code;
}

module.exports = {
  createTransformer(options) {
    const inner = tsJest.createTransformer(options);
    return {
      canInstrument: inner.canInstrument,
      getCacheKey: (...args) => `${inner.getCacheKey(...args)}:${OWN}`,
      process(...args) {
        const out = inner.process(...args);
        return typeof out === 'string' ? localise(out) : { ...out, code: localise(out.code) };
      },
    };
  },
};
