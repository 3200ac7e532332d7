import { describe, it, expect } from 'vitest';
import { compareReachability, formatComparison } from './compare.js';
import type { ReachabilityResult } from './lab.js';

const observed: ReachabilityResult[] = [
  { src: 'a/web', dst: 'a/db', protocol: 'TCP', port: 80, reachable: true, ms: 1 },
  { src: 'a/web', dst: 'a/db', protocol: 'UDP', port: 5353, reachable: true, ms: 1 },
  { src: 'b/mon', dst: 'a/db', protocol: 'TCP', port: 80, reachable: false, ms: 800, error: 'timeout' },
];

describe('compareReachability', () => {
  it('marks a flow that passed although denied, and nothing else, as a mismatch', () => {
    const rows = compareReachability(observed, [
      { src: 'a/web', dst: 'a/db', protocol: 'TCP', port: 80, verdict: 'allow' },
      { src: 'a/web', dst: 'a/db', protocol: 'UDP', port: 5353, verdict: 'deny' },
      { src: 'b/mon', dst: 'a/db', protocol: 'TCP', port: 80, verdict: 'deny' },
    ]);
    expect(rows.map((r) => r.agrees)).toEqual([true, false, true]);
    const text = formatComparison(rows);
    expect(text.split('\n').filter((l) => l.includes('MISMATCH'))).toEqual([expect.stringContaining('a/web -> a/db UDP/5353')]);
    expect(text).toContain('3 flows, 1 mismatch');
  });

  it('refuses a measured flow nobody predicted', () => {
    expect(() => compareReachability(observed, [])).toThrow(/no prediction for a\/web -> a\/db TCP\/80/);
  });
});
