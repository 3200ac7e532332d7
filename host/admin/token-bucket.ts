// A small token bucket for uploads: each upload compiles and runs a module, so
// a burst is allowed but a sustained flood is not.
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(private readonly capacity: number, private readonly refillPerSecond: number, private readonly now: () => number = Date.now) {
    if (!(capacity >= 1) || !(refillPerSecond > 0)) throw new RangeError('a token bucket needs capacity >= 1 and a positive refill rate');
    this.tokens = capacity;
    this.last = now();
  }

  /** Takes a token; returns 0 on success or the seconds until one is available. */
  take(): number {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.last) / 1000) * this.refillPerSecond);
    this.last = t;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil((1 - this.tokens) / this.refillPerSecond);
  }
}
