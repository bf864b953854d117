/**
 * At most `size` holders at once; the others wait in arrival order. `acquire` answers the
 * holder's release, which may be called more than once (only the first counts).
 */
export class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  async acquire(): Promise<() => void> {
    if (this.held >= this.size) await new Promise<void>((r) => this.waiting.push(r));
    else this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // the slot passes straight to the next waiter, so `held` never dips and lets a newcomer in
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    };
  }
}
