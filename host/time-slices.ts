// Long host work (a list of 100,000 objects, a stage's feed, a memory image's
// copy) runs in slices of a few milliseconds with a turn of the event loop
// between them, so the packet path, /healthz and the admin API wait for one
// slice at most. One clock for every such loop, so they all slice alike.

export class TimeSlices {
  private started = performance.now();

  constructor(private readonly sliceMs: number) {}

  /** Whether the current slice has run its time. */
  due(): boolean {
    return performance.now() - this.started >= this.sliceMs;
  }

  /** Gives the event loop a turn, then starts a new slice. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.started = performance.now();
  }

  /**
   * `yield()` when the slice is due, checked only at items `i` with every bit
   * of `mask` set (reading the clock for every item of a tight loop costs more
   * than the item); otherwise undefined, so `await` costs nothing.
   */
  pause(i: number, mask: number): Promise<void> | undefined {
    if ((i & mask) !== mask || !this.due()) return undefined;
    return this.yield();
  }
}
