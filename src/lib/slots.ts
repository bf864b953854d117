/** What a waiter hears when the slots close under it (and anyone who asks afterwards). */
export class SlotsClosed extends Error {
  constructor() {
    super('no more slots are given out');
    this.name = 'SlotsClosed';
  }
}

/**
 * At most `size` holders at once; the others wait in arrival order. `acquire` answers the
 * holder's release, which may be called more than once (only the first counts). `close` turns
 * the waiters away (SlotsClosed) and every later request; holders keep their slots.
 */
export class Slots {
  private held = 0;
  private closed = false;
  private readonly waiting: Array<{ resolve(): void; reject(e: Error): void }> = [];

  constructor(readonly size: number) {}

  async acquire(): Promise<() => void> {
    if (this.closed) throw new SlotsClosed();
    if (this.held >= this.size)
      await new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
    else this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // the slot passes straight to the next waiter, so `held` never dips and lets a newcomer in
      const next = this.waiting.shift();
      if (next) next.resolve();
      else this.held--;
    };
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.reject(new SlotsClosed());
  }
}
