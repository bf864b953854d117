/**
 * The tuning pass (contract §20) against in-memory ports: a fit lands only under the setting it
 * began with, an active fit keeps its projection and prunes the others, and after an embedder
 * change nothing is fitted until every item has its new vector.
 */
import pino from 'pino';
import type { Dataset } from '../../src/domain/dataset';
import { TUNING_OFF, type SimilaritySettings } from '../../src/domain/tuning/settings';
import { TuningPass } from '../../src/jobs/tuning-pass';
import type { LabelledVector } from '../../src/ports/item-reader';
import { seededRandom } from '../../src/lib/seeded-random';

const DIMS = 16;

/** Three labels apart along quiet axes of their own, drowned in louder noise: plain cosine
 * barely sees them, a projection does. */
function items(n: number): LabelledVector[] {
  const r = seededRandom(5);
  return Array.from({ length: n }, (_, i) => {
    const v = Float32Array.from({ length: DIMS }, (_, j) => (r() - 0.5) * (j < 3 ? 0.2 : 2));
    v[i % 3] += 0.3;
    const norm = Math.hypot(...v);
    return {
      id: `i-${String(i).padStart(3, '0')}`,
      vector: v.map((x) => x / norm),
      label: `l${i % 3}`,
    };
  });
}

function rig(opts: { waiting?: number; onRead?: () => void } = {}) {
  const all = items(90);
  let setting: SimilaritySettings = {
    ...TUNING_OFF,
    learnFrom: 'kind',
    state: 'fitting',
    revision: 1,
  };
  const models = new Map<string, Uint8Array>();
  const pruned: string[][] = [];
  const ds: Dataset = {
    id: 'd',
    org: 'o',
    name: 'n',
    settings: { fields: {}, version: 1 },
    createdAt: '',
    browseRotation: 0,
    embedder: { id: 'e', dimensions: DIMS },
  };
  const pass = new TuningPass({
    store: {
      putModel: async (_d, id, b) => void models.set(id, b),
      getModel: async (_d, id) => models.get(id),
      pruneModels: async (_d, keep) => {
        pruned.push([...keep]);
        for (const id of models.keys()) if (!keep.includes(id)) models.delete(id);
      },
      claim: async () => true,
    },
    accounts: {
      updateSimilarity: async (_id, change) => {
        const next = change(setting);
        if (next) setting = next;
        return setting;
      },
    },
    reader: {
      vectorsPage: async (_d, _e, _f, after, limit) => {
        opts.onRead?.();
        return all.filter((it) => after === undefined || it.id > after).slice(0, limit);
      },
    },
    engine: {
      facets: async () => ({ kind: { l0: 30, l1: 30, l2: 30 } }),
      applyTuning: async () => 0,
    },
    datasets: async () => [{ ...ds, similarity: setting }],
    waitingForEmbedder: async () => opts.waiting ?? 0,
    now: Date.now,
    log: pino({ level: 'silent' }),
    owner: 'me',
  });
  return {
    pass,
    models,
    pruned,
    setting: () => setting,
    put: (s: SimilaritySettings) => (setting = s),
  };
}

test('a fit turns tuning on with its stored projection, and keeps only that one', async () => {
  const r = rig();
  await r.pass.pass();
  const s = r.setting();
  expect(s).toMatchObject({ state: 'active', labelledItems: 90, classes: 3, embedder: 'e' });
  expect([...r.models.keys()]).toEqual([s.model]);
  expect(s.cv!.tuned).toBeGreaterThan(s.cv!.plain);
});

test('a fit begun under another setting does not land', async () => {
  let changed = false;
  const r = rig({
    onRead: () => {
      if (changed) return;
      changed = true;
      // a client's PUT while the items are read
      r.put({ ...TUNING_OFF, learnFrom: 'other', state: 'fitting', revision: 2 });
    },
  });
  await r.pass.pass();
  expect(r.setting()).toMatchObject({ learnFrom: 'other', state: 'fitting', revision: 2 });
  expect(r.setting().model).toBeUndefined();
  expect(r.models.size).toBe(0);
});

test('after an embedder change nothing is fitted until every item has its new vector', async () => {
  const r = rig({ waiting: 3 });
  await r.pass.pass();
  expect(r.setting().state).toBe('fitting');
  expect(r.models.size).toBe(0);
});
