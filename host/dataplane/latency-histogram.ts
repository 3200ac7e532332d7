// Decision times on the packet path. Recording is one Math.log and one array
// increment, with no allocation; percentiles are computed on demand from
// geometric buckets (each 25% wider than the last), so a reported p99 is the
// upper edge of the bucket holding it: never under, at most 25% over.

const GROWTH = 1.25;
const SMALLEST_MICROS = 0.5;
/** 0.5 µs × 1.25^90 ≈ 2.5 × 10^8 µs: beyond any sane decision. */
const BUCKETS = 91;

export class LatencyHistogram {
  private readonly counts = new Float64Array(BUCKETS);
  private total = 0;
  private sum = 0;
  private max = 0;

  record(micros: number): void {
    let index = micros <= SMALLEST_MICROS ? 0 : Math.ceil(Math.log(micros / SMALLEST_MICROS) / Math.log(GROWTH));
    if (index >= BUCKETS) index = BUCKETS - 1;
    this.counts[index]++;
    this.total++;
    this.sum += micros;
    if (micros > this.max) this.max = micros;
  }

  /** Forget everything recorded, e.g. between two phases of a benchmark sharing one dataplane. */
  reset(): void {
    this.counts.fill(0);
    this.total = 0;
    this.sum = 0;
    this.max = 0;
  }

  get count(): number {
    return this.total;
  }

  get meanMicros(): number {
    return this.total === 0 ? 0 : this.sum / this.total;
  }

  get maxMicros(): number {
    return this.max;
  }

  /** Upper bound of the bucket holding the q-quantile (0 < q ≤ 1), in µs; 0 when empty. */
  percentile(q: number): number {
    if (this.total === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= rank) return Math.min(SMALLEST_MICROS * GROWTH ** i, this.max);
    }
    return this.max;
  }

  p50(): number {
    return this.percentile(0.5);
  }

  p99(): number {
    return this.percentile(0.99);
  }

  /** Cumulative counts per upper bound, for exporting as a Prometheus histogram. */
  cumulativeBuckets(): Array<{ leMicros: number; count: number }> {
    const out: Array<{ leMicros: number; count: number }> = [];
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      out.push({ leMicros: SMALLEST_MICROS * GROWTH ** i, count: seen });
    }
    return out;
  }
}
