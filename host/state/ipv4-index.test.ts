import { describe, it, expect } from 'vitest';
import { Ipv4PodIndex } from './ipv4-index.js';
import { seededRandom } from '../dataplane/seeded-random.js';
import type { PodInfo } from '../contract.js';

const info = (id: number) => ({ id }) as unknown as PodInfo;

describe('the IPv4 pod index', () => {
  it('agrees with a Map over random inserts, replacements and deletions, through growth and shrinking runs', () => {
    const random = seededRandom(11);
    const index = new Ipv4PodIndex();
    const model = new Map<number, PodInfo>();
    // Keys drawn from a small range so runs collide, and some with the sign bit set.
    const key = () => (Math.floor(random() * 3000) * 4099) | (random() < 0.3 ? 0x80000000 : 0);
    for (let step = 0; step < 40_000; step++) {
      const k = key();
      if (random() < 0.6) {
        const v = info(step);
        index.set(k, v);
        model.set(k, v);
      } else {
        index.delete(k);
        model.delete(k);
      }
      if (step % 997 === 0) {
        expect(index.size).toBe(model.size);
        for (let probe = 0; probe < 200; probe++) {
          const q = key();
          expect(index.get(q)).toBe(model.get(q));
          expect(index.idOf(q)).toBe(model.get(q)?.id ?? 0);
        }
        for (const [k2, v2] of model) expect(index.get(k2)).toBe(v2);
      }
    }
  });

  it('finds nothing in an empty index and forgets a deleted key', () => {
    const index = new Ipv4PodIndex();
    expect(index.get(0x0a000001)).toBeUndefined();
    expect(index.idOf(0x0a000001)).toBe(0);
    index.set(0x0a000001, info(1));
    expect(index.idOf(0x0a000001)).toBe(1);
    index.delete(0x0a000001);
    expect(index.get(0x0a000001)).toBeUndefined();
    expect(index.size).toBe(0);
  });
});
