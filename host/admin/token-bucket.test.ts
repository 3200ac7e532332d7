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

describe('the global upload bucket', () => {
  it('a client cycling through many addresses is held to the global rate, and a refusal says which bucket was empty', () => {
    let now = 0;
    const buckets = new ClientBuckets(5, 0.5, 1024, () => now, { capacity: 20, refillPerSecond: 2 });
    const answers = Array.from({ length: 100 }, (_, i) => buckets.takeFor(`10.0.${i >> 8}.${i & 0xff}`));
    expect(answers.filter((a) => a.wait === 0)).toHaveLength(20);
    expect(answers[20]).toEqual({ wait: 1, bucket: 'global' });
    now += 1000;
    expect(buckets.takeFor('192.0.2.1')).toEqual({ wait: 0 });
  });

  it('a client refused by its own bucket takes nothing from the global one', () => {
    const now = 0;
    const buckets = new ClientBuckets(1, 0.5, 1024, () => now, { capacity: 2, refillPerSecond: 1 });
    expect(buckets.takeFor('a')).toEqual({ wait: 0 });
    for (let i = 0; i < 10; i++) expect(buckets.takeFor('a').bucket).toBe('client');
    expect(buckets.takeFor('b')).toEqual({ wait: 0 });
  });
});
