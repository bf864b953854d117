// Jest runs each test file in its own realm, so typed arrays made by a native addon (the
// outer realm's) fail `instanceof Float32Array` checks inside the test's realm. onnxruntime-node
// makes such checks; this environment gives the tests the outer realm's typed arrays.
const { TestEnvironment } = require('jest-environment-node');

class NativeTypedArraysEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of [
      'Float32Array',
      'Float64Array',
      'Int8Array',
      'Int16Array',
      'Int32Array',
      'Uint8Array',
      'Uint16Array',
      'Uint32Array',
      'BigInt64Array',
      'BigUint64Array',
    ])
      this.global[name] = globalThis[name];
  }
}

module.exports = NativeTypedArraysEnvironment;
