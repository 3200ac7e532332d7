import { describe, it, expect } from 'vitest';
import { TokenBucket } from './token-bucket.js';

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
