/**
 * casUpdate with `unique` documents: a write whose answer is lost after it landed (a timeout,
 * or the client's own retry meeting the new version as a conflict) is recognised and not
 * applied twice; without `unique` nothing is inferred from equal documents.
 */
import type { Client } from '@elastic/elasticsearch';
import { casUpdate } from '../../src/adapters/elasticsearch/cas';

interface Doc {
  n: number;
  write?: string;
}

/** One document in memory; `lose` makes the next index call land and then fail as given. */
function fakeClient(lose?: 'timeout' | 'conflict') {
  let stored: { doc: Doc; seq: number } | undefined = { doc: { n: 1 }, seq: 1 };
  let pending = lose;
  const client = {
    get: async () =>
      stored
        ? { found: true, _source: stored.doc, _seq_no: stored.seq, _primary_term: 1 }
        : { found: false },
    index: async (req: { document: Doc; if_seq_no?: number }) => {
      if (stored && req.if_seq_no !== stored.seq)
        throw Object.assign(new Error('version conflict'), { meta: { statusCode: 409 } });
      stored = {
        doc: JSON.parse(JSON.stringify(req.document)) as Doc,
        seq: (stored?.seq ?? 0) + 1,
      };
      const lost = pending;
      pending = undefined;
      if (lost === 'timeout') throw new Error('Request timed out');
      if (lost === 'conflict')
        throw Object.assign(new Error('version conflict'), { meta: { statusCode: 409 } });
      return { _seq_no: stored.seq, _primary_term: 1 };
    },
  };
  return { client: client as unknown as Client, doc: () => stored?.doc };
}

let writes = 0;
const increment = (cur: Doc | undefined): Doc => ({
  n: (cur?.n ?? 0) + 1,
  write: `w${++writes}`,
});

test.each(['timeout', 'conflict'] as const)(
  'a unique write that landed though its answer was a %s counts once',
  async (lose) => {
    const { client, doc } = fakeClient(lose);
    const r = await casUpdate<Doc>(client, 'i', 'd', increment, { unique: true });
    expect(r.written).toBe(true);
    expect(doc()!.n).toBe(2);
  },
);

test('without unique, a lost answer is not taken as a write (equal documents prove nothing)', async () => {
  const { client, doc } = fakeClient('timeout');
  await expect(casUpdate<Doc>(client, 'i', 'd', (cur) => ({ n: cur!.n + 1 }))).rejects.toThrow(
    'timed out',
  );
  expect(doc()!.n).toBe(2);
});
