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

/**
 * One TokenBucket per client key, so one client's burst cannot use up the
 * uploads of another. At most `maxClients` buckets are kept: a new client
 * past that evicts the one that went longest without an upload. Its bucket
 * has had the longest time to refill, so forgetting it costs the least; a
 * client that could cycle through more than `maxClients` addresses within a
 * refill period gets fresh bursts, but never more memory.
 */
export class ClientBuckets {
  // A Map iterates in insertion order; take() re-inserts, so the first key is the least recently used.
  private readonly buckets = new Map<string, TokenBucket>();

  /**
   * A bucket every client draws from as well, so a client with many
   * addresses (each with a fresh burst) is still held to a total rate.
   */
  readonly global: TokenBucket | undefined;

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    readonly maxClients = 1024,
    private readonly now: () => number = Date.now,
    global?: { capacity: number; refillPerSecond: number },
  ) {
    if (!(capacity >= 1) || !(refillPerSecond > 0)) throw new RangeError('a token bucket needs capacity >= 1 and a positive refill rate');
    if (!Number.isInteger(maxClients) || maxClients < 1) throw new RangeError(`maxClients must be a positive integer, got ${maxClients}`);
    this.global = global ? new TokenBucket(global.capacity, global.refillPerSecond, now) : undefined;
  }

  /**
   * Takes a token from `client`'s bucket and from the global one; returns 0
   * on success, or the seconds until one is available and which bucket was
   * empty. A client refused by its own bucket takes nothing from the global one.
   */
  takeFor(client: string): { wait: number; bucket?: 'client' | 'global' } {
    const own = this.take(client);
    if (own > 0) return { wait: own, bucket: 'client' };
    const wait = this.global?.take() ?? 0;
    return wait > 0 ? { wait, bucket: 'global' } : { wait: 0 };
  }

  /** Takes a token from `client`'s bucket only; returns 0 on success or the seconds until one is available. */
  take(client: string): number {
    let bucket = this.buckets.get(client);
    if (bucket) this.buckets.delete(client);
    else {
      if (this.buckets.size >= this.maxClients) this.buckets.delete(this.buckets.keys().next().value!);
      bucket = new TokenBucket(this.capacity, this.refillPerSecond, this.now);
    }
    this.buckets.set(client, bucket);
    return bucket.take();
  }

  get size(): number { return this.buckets.size; }
}
