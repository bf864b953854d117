/**
 * Group commit: while one batch is being written, whatever arrives queues and goes in the next
 * batch. Nothing waits for a timer (a lone request goes at once), and every caller's promise
 * settles with its own outcome once the batch holding it is written: a caller never hears
 * "done" before its write is.
 */
export class GroupCommit<Req, Res> {
  private queue: Array<{ req: Req; resolve(r: Res): void; reject(e: unknown): void }> = [];
  private busy = false;

  constructor(
    /** Writes a batch; answers one outcome per request, in order, or throws for all of them. */
    private readonly commit: (batch: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
  ) {}

  submit(req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      if (!this.busy) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.busy = true;
    try {
      while (this.queue.length) {
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
  ) {}

  submit(key: string, req: Req): Promise<Res> {
    let group = this.groups.get(key);
    if (!group) {
      if (this.groups.size >= this.maxKeys) this.groups.clear();
      group = new GroupCommit((batch: Req[]) => this.commit(key, batch), this.maxBatch);
      this.groups.set(key, group);
    }
    return group.submit(req);
  }
}
