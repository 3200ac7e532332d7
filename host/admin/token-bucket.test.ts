import { describe, it, expect } from 'vitest';
import { ClientBuckets, TokenBucket } from './token-bucket.js';

describe('the upload token bucket', () => {
  it('allows a burst, then says how long to wait, then refills with time', () => {
    let now = 0;
    const bucket = new TokenBucket(3, 0.5, () => now);
    expect([bucket.take(), bucket.take(), bucket.take()]).toEqual([0, 0, 0]);
    expect(bucket.take()).toBe(2);
    now += 1000;
    expect(bucket.take()).toBe(1);
    now += 1000;
    expect(bucket.take()).toBe(0);
    now += 3_600_000;
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([0, 0, 0, 2]);
  });

  it('refuses a bucket that could never hand out a token', () => {
    expect(() => new TokenBucket(0, 1)).toThrow(RangeError);
    expect(() => new TokenBucket(1, 0)).toThrow(RangeError);
  });
});

describe('upload buckets per client', () => {
  it("one client's burst does not use up another client's uploads", () => {
    const now = 0;
    const buckets = new ClientBuckets(2, 0.5, 16, () => now);
    expect([buckets.take('10.0.0.1'), buckets.take('10.0.0.1'), buckets.take('10.0.0.1')]).toEqual([0, 0, 2]);
    expect([buckets.take('10.0.0.2'), buckets.take('10.0.0.2'), buckets.take('10.0.0.2')]).toEqual([0, 0, 2]);
    expect(buckets.take('10.0.0.1')).toBe(2);
  });

  it('keeps at most maxClients buckets, forgetting the one that went longest without an upload', () => {
    const now = 0;
    const buckets = new ClientBuckets(1, 0.5, 3, () => now);
    for (const c of ['a', 'b', 'c']) expect(buckets.take(c)).toBe(0);
    expect(buckets.take('a')).toBe(2); // a is now the most recent
    for (let i = 0; i < 1000; i++) buckets.take(`flood-${i}`);
    expect(buckets.size).toBe(3);
    // Drained buckets that were evicted come back full; that is the price of the bound.
    expect(buckets.take('b')).toBe(0);
  });

  it('refuses settings that could never hand out a token or keep a bucket', () => {
    expect(() => new ClientBuckets(0, 1)).toThrow(RangeError);
    expect(() => new ClientBuckets(1, 1, 0)).toThrow(RangeError);
  });
});
