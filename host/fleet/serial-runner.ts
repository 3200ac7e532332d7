// Runs one async task at a time: a request while it runs makes it run once
// more afterwards, however many requests came (a thousand status events are
// one more pass, not a thousand). The node's reconcile and the rollout
// controller's pass both run this way.
export class SerialRunner {
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly task: () => Promise<void>, private readonly onError: (err: unknown) => void) {}

  request(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    // Cleared in a callback: a task that finishes without awaiting would otherwise clear it before it is set.
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.task();
        } catch (err) {
          this.onError(err);
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.running = undefined;
    });
  }

  /** No more runs; resolves when the one in progress has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}
