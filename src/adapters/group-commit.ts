/**
 * How long a worker's result (its item's new state, its image count) may wait for others to
 * share one write. The job's image slot is already free by then (ProcessImageHandler), so the
 * wait costs no throughput, and fewer requests cost the store less (docs/engines.md).
 */
export const WORKER_LINGER_MS = 20;

/**
 * Group commit: while one batch is being written, whatever arrives queues and goes in the next
 * batch. Every caller's promise settles with its own outcome once the batch holding it is
 * written: a caller never hears "done" before its write is.
 *
 * Without `lingerMs` nothing waits for a timer: a lone request goes at once. With it, a batch
 * waits until its oldest request is `lingerMs` old (or the batch is full) before it is written,
 * so writes that arrive a few milliseconds apart share one request: for work whose callers do
 * not wait on it idle (a worker's results, whose image slot is already given to the next job).
 */
export class GroupCommit<Req, Res> {
  private queue: Array<{ req: Req; at: number; resolve(r: Res): void; reject(e: unknown): void }> =
    [];
  private busy = false;
  /** Ends a linger early: the batch filled up. */
  private full?: () => void;

  constructor(
    /** Writes a batch; answers one outcome per request, in order, or throws for all of them. */
    private readonly commit: (batch: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
    private readonly lingerMs = 0,
  ) {}

  submit(req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, at: this.lingerMs ? performance.now() : 0, resolve, reject });
      if (this.queue.length >= this.maxBatch) this.full?.();
      if (!this.busy) void this.drain();
    });
  }

  /** Until the oldest request has waited `lingerMs`, or a batch is full. */
  private async linger(): Promise<void> {
    const wait = this.queue[0]!.at + this.lingerMs - performance.now();
    if (wait <= 0 || this.queue.length >= this.maxBatch) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, wait);
      this.full = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.full = undefined;
  }

  private async drain(): Promise<void> {
    this.busy = true;
    try {
      while (this.queue.length) {
        if (this.lingerMs) await this.linger();
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const out = await this.commit(batch.map((b) => b.req));
          batch.forEach((b, i) => b.resolve(out[i]!));
        } catch (e) {
          batch.forEach((b) => b.reject(e));
        }
      }
    } finally {
      this.busy = false;
    }
  }
}

/**
 * A GroupCommit per key (an organisation's counter, an index, a dataset): batches never mix
 * keys, and each key has at most one commit in flight. The keys are forgotten all at once past
 * `maxKeys`, which bounds the memory; a commit still in flight for a forgotten key finishes.
 */
export class KeyedGroupCommit<Req, Res> {
  private readonly groups = new Map<string, GroupCommit<Req, Res>>();

  constructor(
    private readonly commit: (key: string, batch: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
    private readonly maxKeys = 10_000,
    private readonly lingerMs = 0,
  ) {}

  submit(key: string, req: Req): Promise<Res> {
    let group = this.groups.get(key);
    if (!group) {
      if (this.groups.size >= this.maxKeys) this.groups.clear();
      group = new GroupCommit(
        (batch: Req[]) => this.commit(key, batch),
        this.maxBatch,
        this.lingerMs,
      );
      this.groups.set(key, group);
    }
    return group.submit(req);
  }
}
