/**
 * Contract §12: a token revoked on one host is refused on every host within 2 s. Each host keeps
 * the token records it read for a moment (EsAccountStore's memo, on the clock it is given), so
 * what bounds the window is that memo's time, checked here on an injected clock. The real
 * processes of test/production/scale-out.test.ts show the outcome across hosts.
 */
import type { Client } from '@elastic/elasticsearch';
import { EsAccountStore } from '../../src/adapters/elasticsearch/es-account-store';
import { EsIndices } from '../../src/adapters/elasticsearch/indices';
import { AuthService } from '../../src/services/auth';
import { issueToken } from '../../src/services/tokens';

/** Contract §12: how long another host may still accept a revoked token. */
const WINDOW_MS = 2000;

/** The documents of one installation, as every host's client reads and writes them. */
function fakeElasticsearch(): Client {
  const docs = new Map<string, { doc: unknown; seqNo: number }>();
  let seqNo = 0;
  const key = (index: string, id: string) => `${index}/${id}`;
  const client = {
    get: async ({ index, id }: { index: string; id: string }) => {
      const d = docs.get(key(index, id));
      return d
        ? { found: true, _source: d.doc, _seq_no: d.seqNo, _primary_term: 1 }
        : { found: false };
    },
    index: async ({ index, id, document }: { index: string; id: string; document: unknown }) => {
      docs.set(key(index, id), { doc: document, seqNo: ++seqNo });
      return {};
    },
    delete: async ({ index, id }: { index: string; id: string }) => {
      docs.delete(key(index, id));
      return {};
    },
  };
  return client as unknown as Client;
}

function installation() {
  let clock = 0;
  const es = fakeElasticsearch();
  const host = () => new EsAccountStore(new EsIndices(es, 'vss-'), () => clock);
  const [here, there] = [host(), host()];
  const auth = new AuthService(here);
  const { token, record } = issueToken('org', { org: 'acme' }, new Date(0));
  return {
    setClock: (ms: number) => (clock = ms),
    mint: () => there.putToken(record),
    revoke: async () => expect(await there.deleteToken('acme', record.prefix)).toBe(true),
    /** Whether this host accepts the token now. */
    accepts: () =>
      auth.authenticate(`token ${token}`).then(
        () => true,
        (e: { code?: string }) => {
          expect(e.code).toBe('unauthorized');
          return false;
        },
      ),
  };
}

const settle = () => new Promise((r) => setImmediate(r));

test('a token revoked on another host is refused here within 2 s, by this host’s clock', async () => {
  const i = installation();
  await i.mint();
  expect(await i.accepts()).toBe(true);
  await i.revoke();
  // what this host read is kept: the window is the memo's, not an immediate read
  expect(await i.accepts()).toBe(true);
  i.setClock(WINDOW_MS - 1);
  expect(await i.accepts()).toBe(false);
});

test('within 2 s also when a read in the background found the token just before it was revoked', async () => {
  const i = installation();
  await i.mint();
  expect(await i.accepts()).toBe(true);
  // late in the memo's time a request reads the record again behind its answer
  i.setClock(900);
  expect(await i.accepts()).toBe(true);
  await settle();
  await i.revoke();
  expect(await i.accepts()).toBe(true);
  i.setClock(900 + WINDOW_MS - 1);
  expect(await i.accepts()).toBe(false);
});
