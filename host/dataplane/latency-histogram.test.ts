import { describe, it, expect } from 'vitest';
import { LatencyHistogram } from './latency-histogram.js';

describe('LatencyHistogram', () => {
  it('reports zero for every percentile before anything is recorded', () => {
    const h = new LatencyHistogram();
    expect([h.p50(), h.p99(), h.count]).toEqual([0, 0, 0]);
  });

  it('puts p50 and p99 within 25% above the true quantiles of a uniform sample', () => {
    const h = new LatencyHistogram();
    for (let micros = 1; micros <= 1000; micros++) h.record(micros);
    expect(h.p50()).toBeGreaterThanOrEqual(500);
    expect(h.p50()).toBeLessThanOrEqual(625);
    expect(h.p99()).toBeGreaterThanOrEqual(990);
    expect(h.p99()).toBeLessThanOrEqual(1000);
    expect(h.meanMicros).toBeCloseTo(500.5);
  });

  it('after a reset reports only what was recorded since', () => {
    const h = new LatencyHistogram();
    for (let i = 0; i < 100; i++) h.record(5000);
    h.reset();
    expect([h.count, h.p99(), h.maxMicros]).toEqual([0, 0, 0]);
    h.record(10);
    expect(h.count).toBe(1);
    expect(h.maxMicros).toBe(10);
    expect(h.p99()).toBeLessThanOrEqual(10);
  });

  it('lets a few slow decisions show in p99 but not in p50', () => {
    const h = new LatencyHistogram();
    for (let i = 0; i < 980; i++) h.record(3);
    for (let i = 0; i < 20; i++) h.record(5000);
    expect(h.p50()).toBeLessThan(4);
    expect(h.p99()).toBeGreaterThan(4000);
    expect(h.maxMicros).toBe(5000);
  });

  it('keeps cumulative bucket counts ending at the total', () => {
    const h = new LatencyHistogram();
    [0.1, 2, 2, 80, 1e12].forEach((m) => h.record(m));
    const buckets = h.cumulativeBuckets();
    expect(buckets.at(-1)!.count).toBe(5);
    expect(buckets[0]).toEqual({ leMicros: 0.5, count: 1 });
  });
});
