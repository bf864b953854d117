import { type Bits, clear, grown, set, wordsFor } from './bitset';
import { Posting } from './posting';
import { SlotLists } from './slot-lists';

/** One distinct value of a field, as item_values holds it (vtype, sval, nval). */
export interface FieldValue {
  vtype: 's' | 'n' | 'b';
  /** sval for strings and booleans ('true'/'false'); '' for numbers. */
  text: string;
  /** nval for numbers; 0 otherwise. */
  num: number;
  posting: Posting;
}

/** The queryable values of one metadata (or generated) field across a dataset. */
export class FieldIndex {
  readonly values: FieldValue[] = [];
  readonly strIds = new Map<string, number>();
  readonly boolIds = new Map<string, number>();
  readonly numIds = new Map<number, number>();
  /** Slots holding any value of the field (exists, missing). */
  readonly holders = new Posting();
  /** Bumped whenever a slot's values of this field change: sort orders depend on it. */
  version = 0;
  /** Numeric values in ascending order, for ranges; dropped when a new number appears. */
  numSorted: { nums: Float64Array; ids: Int32Array } | undefined;

  constructor(
    readonly name: string,
    readonly no: number,
  ) {}

  idOf(vtype: FieldValue['vtype'], sval: string | null, nval: number | null): number {
    const map = vtype === 'n' ? this.numIds : vtype === 'b' ? this.boolIds : this.strIds;
    const key = vtype === 'n' ? nval! : sval!;
    let id = (map as Map<string | number, number>).get(key);
    if (id === undefined) {
      id = this.values.length;
      this.values.push({
        vtype,
        text: vtype === 'n' ? '' : sval!,
        num: vtype === 'n' ? nval! : 0,
        posting: new Posting(),
      });
      (map as Map<string | number, number>).set(key, id);
      if (vtype === 'n') this.numSorted = undefined;
    }
    return id;
  }

  /**
   * Every numeric (item, value) row of the field as two flat arrays sorted by value: ranges,
   * stats and histograms read them contiguously (walking one posting object per distinct
   * value costs a cache miss or three each, which at 50,000 prices is most of a request).
   * Rebuilt after a write changes the field.
   */
  numericRows(): { nums: Float64Array; slots: Int32Array } {
    if (this.rows?.version !== this.version) {
      const { ids } = this.sortedNumbers();
      let n = 0;
      for (const id of ids) n += this.values[id]!.posting.size;
      const nums = new Float64Array(n);
      const slots = new Int32Array(n);
      let k = 0;
      for (const id of ids) {
        const v = this.values[id]!;
        v.posting.forEach((s) => {
          nums[k] = v.num;
          slots[k++] = s;
        });
      }
      this.rows = { version: this.version, nums, slots };
    }
    return this.rows;
  }

  private rows: { version: number; nums: Float64Array; slots: Int32Array } | undefined;

  sortedNumbers(): { nums: Float64Array; ids: Int32Array } {
    if (!this.numSorted) {
      const ids = Int32Array.from(this.numIds.values()).sort(
        (a, b) => this.values[a]!.num - this.values[b]!.num,
      );
      this.numSorted = { nums: Float64Array.from(ids, (i) => this.values[i]!.num), ids };
    }
    return this.numSorted;
  }
}

/** A queryable item_values row of one item, as the index reads it. */
export interface ValueRow {
  field: string;
  isArray: number;
  vtype: FieldValue['vtype'];
  sval: string | null;
  nval: number | null;
}

export interface ItemState {
  id: string;
  processed: boolean;
  /** Waiting for processing (not failed): counts() reads it. */
  pending: boolean;
  createdAt: number;
  updatedAt: number;
}

/**
 * One dataset's items as the search engine reads them, kept in memory: every item (processed
 * or not) has a slot; per field, each distinct value keeps the set of slots holding it; the
 * words of `text:` search likewise. SQLite stays the store of record: this is rebuilt from it
 * and kept in step by the change log (index-sync.ts). Only the Vision API's scopes (metadata
 * and generated fields, never privateMetadata) are read into it, so nothing here can leak or
 * probe private values.
 */
export class DatasetIndex {
  /** Slots in use or freed: the high-water mark. */
  size = 0;
  private capacity = 0;
  pks = new Float64Array(0);
  ids: string[] = [];
  created = new Float64Array(0);
  updated = new Float64Array(0);
  /** Processed items: the universe every query is evaluated in. */
  processed: Bits = new Uint32Array(0);
  pending: Bits = new Uint32Array(0);
  alive: Bits = new Uint32Array(0);
  /** Per slot: pairs [field no, value id << 1 | is_array], to undo the item on change. */
  private readonly entries = new SlotLists();
  /** Per slot: the ids of its words. */
  private readonly terms = new SlotLists();
  readonly slotOfPk = new Map<number, number>();
  private readonly free: number[] = [];

  readonly fields = new Map<string, FieldIndex>();
  readonly fieldList: FieldIndex[] = [];
  private readonly termIds = new Map<string, number>();
  private readonly termPostings: Posting[] = [];

  /** Bumped when slots are assigned, freed or change their id or times (sort orders, vectors). */
  slotVersion = 0;
  /** Bumped on every change (cached answers of any kind). */
  version = 0;
  /** The change-log head this index reflects. */
  seen = 0;
  /** Per-request caches that depend on `version` (sort orders, vector slot maps). */
  readonly caches = new Map<string, { version: string; value: unknown }>();

  /** Words a filter set needs to cover every slot. */
  get words(): number {
    return wordsFor(this.size);
  }

  field(name: string): FieldIndex | undefined {
    return this.fields.get(name);
  }

  private fieldFor(name: string): FieldIndex {
    let f = this.fields.get(name);
    if (!f) {
      f = new FieldIndex(name, this.fieldList.length);
      this.fields.set(name, f);
      this.fieldList.push(f);
    }
    return f;
  }

  termPosting(term: string): Posting | undefined {
    const id = this.termIds.get(term);
    return id === undefined ? undefined : this.termPostings[id];
  }

  private grow(need: number): void {
    if (need <= this.capacity) return;
    const cap = Math.max(need, this.capacity * 2, 64);
    const f64 = (a: Float64Array) => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    this.pks = f64(this.pks);
    this.created = f64(this.created);
    this.updated = f64(this.updated);
    this.processed = grown(this.processed, wordsFor(cap));
    this.pending = grown(this.pending, wordsFor(cap));
    this.alive = grown(this.alive, wordsFor(cap));
    this.capacity = cap;
  }

  private slotFor(pk: number): number {
    let slot = this.slotOfPk.get(pk);
    if (slot !== undefined) return slot;
    slot = this.free.pop() ?? this.size++;
    this.grow(slot + 1);
    this.slotOfPk.set(pk, slot);
    this.pks[slot] = pk;
    set(this.alive, slot);
    return slot;
  }

  /**
   * Takes the item's values and words out of every set (the slot and its lists stay, for
   * `put` to overwrite or `remove` to clear).
   */
  private unindex(slot: number): void {
    const n = this.entries.length(slot);
    if (n) {
      const at = this.entries.start(slot);
      const e = this.entries.data;
      let last = -1;
      for (let i = at; i < at + n; i += 2) {
        const f = this.fieldList[e[i]!]!;
        f.values[e[i + 1]! >> 1]!.posting.remove(slot);
        if (e[i] !== last) {
          f.holders.remove(slot);
          f.version++;
          last = e[i]!;
        }
      }
    }
    const k = this.terms.length(slot);
    const at = this.terms.start(slot);
    const t = this.terms.data;
    for (let i = at; i < at + k; i++) this.termPostings[t[i]!]!.remove(slot);
  }

  /** Sets (or replaces) the item stored under `pk`. */
  put(pk: number, item: ItemState, rows: ValueRow[], terms: string[]): void {
    const isNew = !this.slotOfPk.has(pk);
    const slot = this.slotFor(pk);
    this.unindex(slot);
    if (
      isNew ||
      this.ids[slot] !== item.id ||
      this.created[slot] !== item.createdAt ||
      this.updated[slot] !== item.updatedAt
    )
      this.slotVersion++;
    this.ids[slot] = item.id;
    this.created[slot] = item.createdAt;
    this.updated[slot] = item.updatedAt;
    if (item.processed) set(this.processed, slot);
    else clear(this.processed, slot);
    if (item.pending) set(this.pending, slot);
    else clear(this.pending, slot);

    // Rows grouped by field, so holders count each slot once per field.
    const byField = new Map<FieldIndex, number[]>();
    for (const r of rows) {
      const f = this.fieldFor(r.field);
      const id = f.idOf(r.vtype, r.sval, r.nval);
      let list = byField.get(f);
      if (!list) byField.set(f, (list = []));
      const code = (id << 1) | (r.isArray ? 1 : 0);
      if (!list.some((c) => c >> 1 === id)) list.push(code);
    }
    const e: number[] = [];
    for (const [f, codes] of byField) {
      f.holders.add(slot);
      f.version++;
      for (const c of codes) {
        f.values[c >> 1]!.posting.add(slot);
        e.push(f.no, c);
      }
    }
    this.entries.set(slot, e);
    const ids: number[] = [];
    for (const t of new Set(terms)) {
      let id = this.termIds.get(t);
      if (id === undefined) {
        id = this.termPostings.length;
        this.termIds.set(t, id);
        this.termPostings.push(new Posting());
      }
      this.termPostings[id]!.add(slot);
      ids.push(id);
    }
    this.terms.set(slot, ids);
    this.version++;
  }

  /** Forgets the item stored under `pk` (deleted, or moved to another dataset). */
  remove(pk: number): void {
    const slot = this.slotOfPk.get(pk);
    if (slot === undefined) return;
    this.unindex(slot);
    this.entries.clear(slot);
    this.terms.clear(slot);
    this.slotOfPk.delete(pk);
    clear(this.processed, slot);
    clear(this.pending, slot);
    clear(this.alive, slot);
    this.ids[slot] = '';
    this.free.push(slot);
    this.slotVersion++;
    this.version++;
  }

  /** The id of the item's scalar value of `field` (not an array element), or -1. */
  scalarValueId(slot: number, field: FieldIndex): number {
    const n = this.entries.length(slot);
    const at = this.entries.start(slot);
    const e = this.entries.data;
    for (let i = at; i < at + n; i += 2)
      if (e[i] === field.no && !(e[i + 1]! & 1)) return e[i + 1]! >> 1;
    return -1;
  }

  /** The value of `field` an item sorts by: a scalar number or string (booleans, arrays: none). */
  sortValue(slot: number, field: FieldIndex): FieldValue | undefined {
    const id = this.scalarValueId(slot, field);
    if (id < 0) return undefined;
    const v = field.values[id]!;
    return v.vtype === 'b' ? undefined : v;
  }

  /** A cached value computed from the index as it is now. */
  cached<T>(key: string, version: string, make: () => T): T {
    const c = this.caches.get(key);
    if (c && c.version === version) return c.value as T;
    const value = make();
    this.caches.set(key, { version, value });
    return value;
  }

  /** Approximate heap bytes (measurements and the report). */
  bytes(): number {
    let n = this.capacity * 8 * 3 + (this.processed.byteLength + this.alive.byteLength);
    for (let s = 0; s < this.size; s++) n += (this.ids[s]?.length ?? 0) * 2 + 16;
    n += this.entries.bytes() + this.terms.bytes();
    n += this.slotOfPk.size * 40;
    for (const f of this.fieldList) {
      n += f.holders.bytes();
      for (const v of f.values) n += v.posting.bytes() + v.text.length * 2 + 64 + 40;
    }
    for (const [t, id] of this.termIds) n += t.length * 2 + 40 + this.termPostings[id]!.bytes();
    return n;
  }
}
