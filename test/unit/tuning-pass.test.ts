/**
 * The tuning pass (contract §20) against in-memory ports: a fit lands only under the setting it
 * began with and while holding the lease, a landing keeps only its projection, failures back off
 * and end `inactive`, the labels learned from are capped, and after an embedder change nothing
 * is fitted until every item has its new vector.
 */
import pino from 'pino';
import type { Dataset } from '../../src/domain/dataset';
import { TUNING_OFF, type SimilaritySettings } from '../../src/domain/tuning/settings';
import { TuningPass, type TuningPassDeps } from '../../src/jobs/tuning-pass';
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

function rig(
  opts: {
    waiting?: number;
    onRead?: () => void;
    claim?: () => boolean;
    all?: LabelledVector[];
    now?: () => number;
    applyTuning?: TuningPassDeps['engine']['applyTuning'];
    compact?: TuningPassDeps['engine']['compact'];
  } = {},
) {
  const all = opts.all ?? items(90);
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
      claim: async () => opts.claim?.() ?? true,
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
        const items = all.filter((it) => after === undefined || it.id > after).slice(0, limit);
        return items.length < limit ? { items } : { items, next: items.at(-1)!.id };
      },
    },
    engine: {
      facets: async (_d, _c, fields) => {
        const counts: Record<string, number> = {};
        for (const it of all) counts[it.label!] = (counts[it.label!] ?? 0) + 1;
        return { [fields[0]!]: counts };
      },
      applyTuning: opts.applyTuning ?? (async () => ({ changed: 0 })),
      compact: opts.compact ?? (async () => true),
    },
    datasets: async () => [{ ...ds, similarity: setting }],
    waitingForEmbedder: async () => opts.waiting ?? 0,
    now: opts.now ?? Date.now,
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
  // its projection stays until a fit lands (the one that lost could delete another's)
  expect(r.models.size).toBe(1);
  await r.pass.pass();
  expect(r.setting()).toMatchObject({ learnFrom: 'other', state: 'active', revision: 2 });
  expect([...r.models.keys()]).toEqual([r.setting().model]);
});

test('projections are written in sweeps by id until a sweep changes nothing', async () => {
  // an index whose searches do not see this sweep's writes yet (no refresh in between)
  const stored = Array.from({ length: 1200 }, (_, i) => `s-${String(i).padStart(4, '0')}`);
  const done = new Set<string>();
  const calls: Array<string | undefined> = [];
  const r = rig({
    applyTuning: async (_d, _e, _dims, _t, after, limit) => {
      calls.push(after);
      const page = stored.filter((id) => after === undefined || id > after).slice(0, limit);
      const written = page.filter((id) => !done.has(id));
      for (const id of written) done.add(id);
      return page.length < limit
        ? { changed: written.length }
        : { changed: written.length, next: page.at(-1)! };
    },
  });
  await r.pass.pass();
  expect(r.setting().state).toBe('active');
  expect(done.size).toBe(1200);
  // pages of 500 follow the ids; the first sweep writes every item, the second changes nothing
  const sweep = [undefined, 's-0499', 's-0999'];
  expect(calls).toEqual([...sweep, ...sweep]);
});

test('after an embedder change nothing is fitted until every item has its new vector', async () => {
  const r = rig({ waiting: 3 });
  await r.pass.pass();
  expect(r.setting().state).toBe('fitting');
  expect(r.models.size).toBe(0);
});

test('a fit whose lease is lost on the way lands nothing', async () => {
  let claims = 0;
  // the lease holds for the reads, then another process takes it
  const r = rig({ claim: () => ++claims <= 2 });
  await r.pass.pass();
  expect(r.setting()).toMatchObject({ state: 'fitting', revision: 1 });
  expect(r.setting().model).toBeUndefined();
});

test('a fit that keeps failing lands inactive with the error, after backing off', async () => {
  // one vector of another length: the thread's fit throws
  const all = items(90);
  all[40] = { ...all[40]!, vector: new Float32Array(DIMS + 1).fill(0.1) };
  let t = 1_000_000;
  const r = rig({ all, now: () => t });
  for (let i = 0; i < 3; i++) {
    await r.pass.pass();
    if (i < 2) expect(r.setting().state).toBe('fitting');
    // the next attempt waits for its backoff: a pass meanwhile tries nothing
    await r.pass.pass();
    t += 10 * 60_000;
  }
  expect(r.setting().state).toBe('inactive');
  expect(r.setting().reason).toMatch(/the fit failed 3 times/);
});

test('past 64 labels, the largest 64 are learned from and the rest summed', async () => {
  const r0 = seededRandom(9);
  const all: LabelledVector[] = Array.from({ length: 70 * 6 }, (_, i) => {
    const v = Float32Array.from({ length: DIMS }, () => r0() - 0.5);
    const n = Math.hypot(...v);
    // label k has 5 items, plus one more for the first 64: those are the largest
    const label = i < 70 * 5 ? `l${i % 70}` : `l${i % 64}`;
    return { id: `i-${String(i).padStart(4, '0')}`, vector: v.map((x) => x / n), label };
  }).filter((_, i) => i < 70 * 5 + 64);
  const r = rig({ all });
  await r.pass.pass();
  const s = r.setting();
  expect(s.state).not.toBe('fitting');
  expect(s.classes).toBe(64);
  expect(s.labelledItems).toBe(all.length);
  expect(Object.keys(s.labelCounts!)).toHaveLength(65);
  expect(s.labelCounts!['\u0000other']).toBe(30);
});

/** An engine that stores projections: the first sweep writes all 40 items, the next none. */
function storing() {
  const done = new Set<string>();
  const applyTuning: TuningPassDeps['engine']['applyTuning'] = async () => {
    const written = Array.from({ length: 40 }, (_, i) => `s-${i}`).filter((id) => !done.has(id));
    for (const id of written) done.add(id);
    return { changed: written.length };
  };
  return { applyTuning, done };
}

describe('merging the index after a fit rewrote its items', () => {
  test('is asked for once, before the fit lands; a pass that writes nothing asks for none', async () => {
    const events: string[] = [];
    const { applyTuning } = storing();
    let waiting: boolean | undefined;
    const r = rig({
      applyTuning: async (...a) => {
        const page = await applyTuning(...a);
        events.push(`apply ${page.changed}`);
        return page;
      },
      compact: async (_d, keepWaiting) => {
        events.push(`compact while ${r.setting().state}`);
        waiting = await keepWaiting();
        return true;
      },
    });
    await r.pass.pass();
    expect(r.setting().state).toBe('active');
    expect(events).toEqual(['apply 40', 'apply 0', 'compact while fitting']);
    expect(waiting).toBe(true);
    // the next pass keeps the stored projections current and finds nothing to write
    await r.pass.pass();
    expect(events.slice(3)).toEqual(['apply 0']);
  });

  test('a fit whose projections were already written asks for no merge', async () => {
    let merges = 0;
    const r = rig({ compact: async () => (merges++, true) });
    await r.pass.pass();
    expect(r.setting().state).toBe('active');
    expect(merges).toBe(0);
  });

  test('renews the lease while it waits, and lands nothing when the lease is lost meanwhile', async () => {
    // the lease is lost during the wait only: it is held again by the time the fit would land
    let merging = false;
    let lost = false;
    let claims = 0;
    const answers: boolean[] = [];
    const r = rig({
      applyTuning: storing().applyTuning,
      claim: () => {
        if (merging) claims++;
        return !(merging && lost);
      },
      compact: async (_d, keepWaiting) => {
        merging = true;
        answers.push(await keepWaiting());
        lost = true;
        answers.push(await keepWaiting());
        merging = false;
        return false;
      },
    });
    await r.pass.pass();
    expect(answers).toEqual([true, false]);
    expect(claims).toBe(2);
    expect(r.setting()).toMatchObject({ state: 'fitting', revision: 1 });
    expect(r.setting().model).toBeUndefined();
  });

  test('a process that stops meanwhile stops waiting and lands its rewrite', async () => {
    let answer: boolean | undefined;
    const r = rig({
      applyTuning: storing().applyTuning,
      compact: async (_d, keepWaiting) => {
        r.pass.halt();
        answer = await keepWaiting();
        return false;
      },
    });
    await r.pass.pass();
    expect(answer).toBe(false);
    expect(r.setting().state).toBe('active');
  });

  test('stops waiting after ten minutes and lands; a merge that fails lands too', async () => {
    let now = 1_000_000;
    let waits = 0;
    const r = rig({
      applyTuning: storing().applyTuning,
      now: () => now,
      compact: async (_d, keepWaiting) => {
        while (await keepWaiting()) {
          waits++;
          now += 60_000;
        }
        return false;
      },
    });
    await r.pass.pass();
    expect(waits).toBe(10);
    expect(r.setting().state).toBe('active');

    const failing = rig({
      applyTuning: storing().applyTuning,
      compact: async () => {
        throw new Error('forcemerge refused');
      },
    });
    await failing.pass.pass();
    expect(failing.setting().state).toBe('active');
  });
});
