// Counts failures inside a sliding time window: the trigger for automatic
// rollback. One window per stage; timestamps older than the window are
// dropped as new ones arrive, so memory stays bounded by the threshold.
export class FailureWindow {
  private readonly times: number[] = [];
  traps = 0;
  fuel = 0;
  deadlines = 0;

  constructor(private readonly threshold: number, private readonly windowMs: number) {}

  /** Records one failure at `now`; true when the window now holds `threshold` failures. */
  record(kind: 'trap' | 'fuel' | 'deadline', now: number): boolean {
    if (kind === 'trap') this.traps++;
    else if (kind === 'deadline') this.deadlines++;
    else this.fuel++;
    this.times.push(now);
    while (this.times.length && this.times[0] <= now - this.windowMs) this.times.shift();
    if (this.times.length > this.threshold) this.times.splice(0, this.times.length - this.threshold);
    return this.times.length >= this.threshold;
  }

  get count(): number { return this.times.length; }
}
