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
