import fc from 'fast-check';
import { esClient } from '../../src/adapters/elasticsearch/client';
import { toDoc } from '../../src/adapters/elasticsearch/document';
import { VectorTextSerializer, vectorText } from '../../src/adapters/elasticsearch/vector-text';

const serializer = new VectorTextSerializer();
const bits = (v: ArrayLike<number>): number[] => [...new Uint32Array(Float32Array.from(v).buffer)];

describe('VectorTextSerializer', () => {
  test('a float32 vector reads back as the same float32s, bit for bit', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { maxLength: 64 }),
        (values) => {
          const v = Float32Array.from(values);
          const back = JSON.parse(serializer.serialize({ id: 'a', vector_3: v })) as {
            id: string;
            vector_3: number[];
          };
          expect(back.id).toBe('a');
          expect(bits(back.vector_3)).toEqual(bits(v));
        },
      ),
      { numRuns: 500 },
    );
  });

  test('values JSON cannot hold are written as null, as JSON.stringify writes them', () => {
    expect(vectorText(Float32Array.of(NaN, Infinity, -0, 1))).toBe('[null,null,-0,1.00000000]');
  });

  test('an item document is sent with its vector as an array, shorter than as doubles', () => {
    const vector = Array.from({ length: 1420 }, (_, i) => Math.fround(Math.sin(i) / 38));
    const doc = toDoc(
      'ds',
      {
        id: 'x',
        url: 'http://img/x.jpg',
        metadata: { colour: 'red' },
        privateMetadata: {},
        state: 'processed',
        createdAt: 1,
        updatedAt: 2,
        image: { width: 8, height: 6, url: 'http://img/x.jpg', processedAt: 2 },
      },
      null,
      { vector, embedder: 'e' },
    );
    const text = serializer.serialize(doc as unknown as Record<string, unknown>);
    const back = JSON.parse(text) as Record<string, unknown>;
    expect(bits(back.vector_1420 as number[])).toEqual(bits(vector));
    // everything else is what the stock serializer writes
    const { vector_1420: _, ...rest } = back;
    const { vector_1420: __, ...plain } = doc;
    expect(rest).toEqual(JSON.parse(JSON.stringify(plain)));
    expect(text.length).toBeLessThan(0.75 * JSON.stringify({ ...doc, vector_1420: vector }).length);
  });

  test('bodies without a top-level Float32Array are serialized as JSON.stringify does', () => {
    const bodies = [
      { query: { knn: { query_vector: [0.1, 0.2] } }, size: 3 },
      { a: null, b: [1, 'x'], c: { d: true } },
      {},
    ];
    for (const b of bodies) expect(serializer.serialize(b)).toBe(JSON.stringify(b));
  });

  test('bulk lines go through it', () => {
    const v = Float32Array.of(0.1, -0.25);
    expect(serializer.ndserialize([{ index: { _id: '1' } }, { vector_2: v }])).toBe(
      `{"index":{"_id":"1"}}\n{"vector_2":[0.100000001,-0.250000000]}\n`,
    );
  });

  test("the service's client uses it", async () => {
    const client = esClient('http://127.0.0.1:1');
    try {
      expect(client.serializer).toBeInstanceOf(VectorTextSerializer);
    } finally {
      await client.close();
    }
  });
});
