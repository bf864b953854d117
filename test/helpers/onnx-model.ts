/**
 * A tiny ONNX model written byte by byte (protobuf), so the ONNX embedder is tested without
 * downloading anything: ReduceMean over height and width of a [N, 3, S, S] input, giving a
 * 3-dimensional "embedding" (the normalised mean colour) per image. N is 1 unless `batch`
 * says otherwise: a number fixes it, a name makes it symbolic (any number of images a run).
 */
function varint(value: number): Buffer {
  const out: number[] = [];
  let n = BigInt(value);
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n > 0n) b |= 0x80;
    out.push(b);
  } while (n > 0n);
  return Buffer.from(out);
}
const key = (field: number, wire: number) => varint((field << 3) | wire);
const int = (field: number, n: number) => Buffer.concat([key(field, 0), varint(n)]);
const bytes = (field: number, b: Buffer | string) => {
  const buf = typeof b === 'string' ? Buffer.from(b) : b;
  return Buffer.concat([key(field, 2), varint(buf.length), buf]);
};
const cat = (...parts: Buffer[]) => Buffer.concat(parts);

const FLOAT = 1;
const INT64 = 7;
const ATTR_INT = 2;
const ATTR_INTS = 7;

// TensorShapeProto.Dimension: dim_value (1) or dim_param (2)
const dim = (d: number | string) => bytes(1, typeof d === 'number' ? int(1, d) : bytes(2, d));
const tensorType = (dims: Array<number | string>) =>
  bytes(1, cat(int(1, FLOAT), bytes(2, cat(...dims.map(dim)))));
const valueInfo = (name: string, dims: Array<number | string>) =>
  cat(bytes(1, name), bytes(2, tensorType(dims)));

/** ReduceMean node: `input` averaged over `axes`. */
const reduceMean = (input: string, output: string, axes: number[], keepdims: 0 | 1) =>
  cat(
    bytes(1, input),
    bytes(2, output),
    bytes(3, output),
    bytes(4, 'ReduceMean'),
    bytes(5, cat(bytes(1, 'axes'), int(20, ATTR_INTS), ...axes.map((a) => int(8, a)))),
    bytes(5, cat(bytes(1, 'keepdims'), int(20, ATTR_INT), int(3, keepdims))),
  );

/** A one-dimensional int64 initializer (TensorProto: dims 1, data_type 2, int64_data 7, name 8). */
const int64s = (name: string, values: number[]) =>
  cat(int(1, values.length), int(2, INT64), ...values.map((v) => int(7, v)), bytes(8, name));

/**
 * `kind` makes a model that declares a free batch dimension and still cannot take a batch:
 * `pools-the-batch` averages over the images too (one row back, whatever the batch),
 * `adds-the-batch-mean` returns one row per image but adds the batch's mean colour to each, and
 * `keeps-two-rows` gives back at most the first two images' rows (a batch of two is right, a
 * larger one is not).
 */
const KINDS = {
  mean: { nodes: [reduceMean('pixels', 'embedding', [2, 3], 0)], initializers: [] },
  'pools-the-batch': { nodes: [reduceMean('pixels', 'embedding', [0, 2, 3], 1)], initializers: [] },
  'adds-the-batch-mean': {
    nodes: [
      reduceMean('pixels', 'rows', [2, 3], 0),
      reduceMean('rows', 'batch_mean', [0], 1),
      cat(bytes(1, 'rows'), bytes(1, 'batch_mean'), bytes(2, 'embedding'), bytes(4, 'Add')),
    ],
    initializers: [],
  },
  'keeps-two-rows': {
    nodes: [
      reduceMean('pixels', 'rows', [2, 3], 0),
      cat(
        ...['rows', 'starts', 'ends', 'axes'].map((i) => bytes(1, i)),
        bytes(2, 'embedding'),
        bytes(4, 'Slice'),
      ),
    ],
    initializers: [int64s('starts', [0]), int64s('ends', [2]), int64s('axes', [0])],
  },
} satisfies Record<string, { nodes: Buffer[]; initializers: Buffer[] }>;

export function meanColourModel(
  size: number,
  batch: number | string = 1,
  kind: keyof typeof KINDS = 'mean',
): Buffer {
  const { nodes, initializers } = KINDS[kind];
  const graph = cat(
    ...nodes.map((n) => bytes(1, n)),
    bytes(2, 'mean-colour'),
    ...initializers.map((t) => bytes(5, t)),
    bytes(11, valueInfo('pixels', [batch, 3, size, size])),
    bytes(12, valueInfo('embedding', [batch, 3])),
  );
  // ir_version 7, opset 13 (ReduceMean takes axes as an attribute there)
  return cat(
    int(1, 7),
    bytes(2, 'vss-test'),
    bytes(7, graph),
    bytes(8, cat(bytes(1, ''), int(2, 13))),
  );
}
