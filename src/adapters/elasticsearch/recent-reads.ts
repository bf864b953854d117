/**
 * What this process read by id in the last moment, so that the token lookup every request makes
 * is not a realtime round trip each time. Only found records
 * are kept (a token minted on another host must work at once, contract §12), for less than the
 * 2 s in which a revocation must reach every host; this process's own writes forget the key at
 * once. Concurrent misses share one read, and a failed read is not kept.
 */
export class RecentReads<V> {
  private readonly entries = new Map<string, { value: Promise<V | undefined>; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = this.entries.get(key);
    if (hit && hit.until > this.now()) return hit.value;
    const value = read();
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const entry = { value, until: this.now() + this.ttlMs };
    this.entries.set(key, entry);
    const drop = () => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    };
    value.then((v) => v === undefined && drop(), drop);
    return value;
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
