// When a stage tries again to build an instance that holds the current state
// after a build failed. A module that could not hold a state will not hold
// the same state on the next try, so a retry waits for the state to change,
// and consecutive failures wait longer and longer (never a hot loop of
// multi-second rebuilds).

export const RETRY_FIRST_MS = 2_000;
export const RETRY_MAX_MS = 300_000;

export class RetryBackoff {
  private delayMs = 0;
  private lastFailureAt = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Failed builds since the last success. */
  failures = 0;

  constructor(private readonly firstMs = RETRY_FIRST_MS, private readonly maxMs = RETRY_MAX_MS, private readonly now: () => number = Date.now) {}

  failed(): void {
    this.failures++;
    this.delayMs = this.delayMs === 0 ? this.firstMs : Math.min(this.maxMs, this.delayMs * 2);
    this.lastFailureAt = this.now();
  }

  succeeded(): void {
    this.failures = 0;
    this.delayMs = 0;
    this.cancel();
  }

  /** How long the next try must still wait. */
  get waitMs(): number {
    return Math.max(0, this.lastFailureAt + this.delayMs - this.now());
  }

  get nextDelayMs(): number { return this.delayMs; }

  /** The state changed: run `retry` once the back-off allows (one pending retry at a time). */
  stateChanged(retry: () => void): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      retry();
    }, this.waitMs);
    this.timer.unref?.();
  }

  get pending(): boolean { return this.timer !== undefined; }

  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
