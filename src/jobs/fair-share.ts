/** A download slower than this marks its host as slow (the ones that hold worker slots). */
export const SLOW_HOST_MS = 1000;
/** An organisation whose jobs this worker took this recently competes for its slots. */
const ACTIVE_ORG_MS = 10_000;
/** Weight of the newest download in a host's moving average. */
const EWMA = 0.3;

interface HostState {
  /** Start times of the downloads running now, oldest first. */
  running: number[];
  avgMs?: number;
}

/**
 * Per-process shares of the worker's download slots, so one tenant cannot stall the others.
 * A slow image host may hold at most half the slots, and so may a host not yet seen to be fast
 * (a fast one is not limited: its downloads free their slot quickly). While several organisations have jobs, each may hold at most its
 * equal share; alone, one may use every slot. A job over its share steps aside (is deferred
 * in the queue), which also lets the worker reach other tenants' jobs queued behind it.
 */
export class FairShare {
  private readonly hosts = new Map<string, HostState>();
  private readonly orgs = new Map<string, { inFlight: number; seenAt: number }>();

  constructor(
    private readonly slots: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * An organisation with a job waiting for this worker: it counts as active at once, so the
   * jobs of others already waiting step aside for it when their turn comes.
   */
  noteWaiting(org: string): void {
    const now = this.now();
    this.seen(org, now);
    this.forget(now);
  }

  /** The organisation's state, marked active as of `now`. */
  private seen(org: string, now: number): { inFlight: number; seenAt: number } {
    const o = this.orgs.get(org) ?? { inFlight: 0, seenAt: now };
    o.seenAt = now;
    this.orgs.set(org, o);
    return o;
  }

  /** A slot for one download (call the returned function when it ends), or undefined. */
  tryAcquire(host: string, org: string): (() => void) | undefined {
    const now = this.now();
    const h = this.hosts.get(host) ?? { running: [] };
    const o = this.seen(org, now);
    this.hosts.set(host, h);
    if (h.running.length >= this.hostCap(h, now) || o.inFlight >= this.orgCap(now)) {
      this.forget(now);
      return undefined;
    }
    o.inFlight++;
    h.running.push(now);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      o.inFlight--;
      // Downloads end in any order: this one's own start, not the oldest.
      h.running.splice(h.running.indexOf(now), 1);
      const ms = this.now() - now;
      h.avgMs = h.avgMs === undefined ? ms : h.avgMs * (1 - EWMA) + ms * EWMA;
    };
  }

  private hostCap(h: HostState, now: number): number {
    // A host is taken for slow until a download from it finished quickly: otherwise the first
    // round of a slow host's jobs would hold every slot. A download running long is evidence
    // before any has finished.
    const slow =
      (h.avgMs ?? SLOW_HOST_MS) >= SLOW_HOST_MS || (h.running[0] ?? now) <= now - SLOW_HOST_MS;
    return slow ? Math.max(1, Math.floor(this.slots / 2)) : this.slots;
  }

  private orgCap(now: number): number {
    let active = 0;
    for (const o of this.orgs.values())
      if (o.inFlight > 0 || now - o.seenAt < ACTIVE_ORG_MS) active++;
    return active > 1 ? Math.max(1, Math.ceil(this.slots / active)) : this.slots;
  }

  /** Bounded memory: idle hosts and organisations are dropped. */
  private forget(now: number): void {
    if (this.hosts.size + this.orgs.size < 10_000) return;
    for (const [k, h] of this.hosts) if (!h.running.length) this.hosts.delete(k);
    for (const [k, o] of this.orgs)
      if (o.inFlight === 0 && now - o.seenAt >= ACTIVE_ORG_MS) this.orgs.delete(k);
  }
}

/** How long a job that stepped aside waits: doubling per deferral, from a fixed set of delays. */
export const deferDelayMs = (deferrals: number): number => 500 * 2 ** Math.min(deferrals, 5);
