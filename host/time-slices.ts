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
   * Whether to `yield()` at item `i` of a tight loop: the slice is due, read
   * only at items with every bit of `mask` set (reading the clock for every
   * item costs more than the item). Used as
   * `if (slices.dueAt(i, 63)) await slices.yield();` so the loop awaits only
   * when it yields: an `await` of anything, undefined too, suspends the async
   * function and resumes it from a microtask, ~150 ns and a few hundred bytes
   * of garbage each (an earlier `await slices.pause(i, mask)` for every item
   * made a stage's snapshot of 11,000 pods and objects about 5 MiB of
   * garbage, collected in the packet path's thread, during every swap).
   */
  dueAt(i: number, mask: number): boolean {
    return (i & mask) === mask && this.due();
  }
}
