/**
 * What this process read in the last moment (a token, a plan, a dataset's readiness, its field
 * catalogue), so that the checks every request makes are not a round trip each time, while
 * another host's change still shows within `ttlMs` (contract §12 allows 2 s).
 *
 * - Only values `keep` accepts are kept (by default: found ones), so a token minted or a
 *   dataset becoming ready on another host shows at once.
 * - A value is never served after `ttlMs` from the moment its read began.
 * - Past half its time a hit is read again in the background and replaced when the new read
 *   comes back: a steady stream of requests never waits for an expiry, which would put a
 *   slow request in the latency tail every `ttlMs`. A background read that
 *   finds nothing drops the entry; one that fails leaves it to expire (and tries no more).
 * - Concurrent misses share one read, a failed read is not kept, and `forget` (this process's
 *   own writes) drops a key at once, also against a background read still under way.
 */
export class RecentReads<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly keep: (v: V | undefined) => boolean = (v) => v !== undefined,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const now = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) {
      if (!hit.refreshing && now >= hit.until - this.ttlMs / 2) this.refresh(key, hit, read);
      return hit.value;
    }
    return this.load(key, read);
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  private load(key: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const started = this.now();
    const value = read();
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const entry: Entry<V> = { value, until: started + this.ttlMs, refreshing: false };
    this.entries.set(key, entry);
    const drop = () => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    };
    value.then((v) => !this.keep(v) && drop(), drop);
    return value;
  }

  private refresh(key: string, hit: Entry<V>, read: () => Promise<V | undefined>): void {
    hit.refreshing = true;
    const started = this.now();
    read().then(
      (v) => {
        if (this.entries.get(key) !== hit) return; // forgotten or replaced meanwhile
        if (!this.keep(v)) this.entries.delete(key);
        else
          this.entries.set(key, {
            value: Promise.resolve(v),
            until: started + this.ttlMs,
            refreshing: false,
          });
      },
      // left to expire: no second background read while the store is failing
      () => undefined,
    );
  }
}

interface Entry<V> {
  value: Promise<V | undefined>;
  until: number;
  refreshing: boolean;
}
