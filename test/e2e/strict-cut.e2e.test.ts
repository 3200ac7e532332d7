import { describe, it, expect } from 'vitest';
import { runStrictCut } from '../lab/strict-cut.js';

// Strict mode at scale, against a real conntrack table: thousands of accepted
// connections in a namespace of the suite's own (kwpsc-*), the real Dataplane
// judging them with the default WASM pipeline, one NetworkPolicy change.

const base = { tableName: 'kwpsc', queueId: 4300, dnsQueueId: 4301 };

describe('strict mode at scale', () => {
  it('cuts exactly the thousands of connections a policy change denies, in netlink batches, keeping the mark\'s other bits', async () => {
    const r = await runStrictCut({ ...base, affected: 3000, unaffected: 2000 });
    expect(r.path).toBe('netlink');
    expect(r.acceptedBefore).toBe(5000);
    expect({ stillAcceptedAffected: r.stillAcceptedAffected, stillAcceptedUnaffected: r.stillAcceptedUnaffected, wronglyCut: r.wronglyCut, otherBitsChanged: r.otherBitsChanged, sweepCut: r.sweepCut })
      .toEqual({ stillAcceptedAffected: 0, stillAcceptedUnaffected: 2000, wronglyCut: 0, otherBitsChanged: 0, sweepCut: 3000 });
  });

  it('cuts the same way with one conntrack process per connection when the addon is not used', async () => {
    const r = await runStrictCut({ ...base, affected: 40, unaffected: 30, clearer: 'process' });
    expect(r.path).toBe('conntrack-process');
    expect([r.stillAcceptedAffected, r.stillAcceptedUnaffected, r.wronglyCut, r.otherBitsChanged, r.sweepCut]).toEqual([0, 30, 0, 0, 40]);
  });

  it('cuts nothing without strict mode: the denied connections keep their accepted bit', async () => {
    const r = await runStrictCut({ ...base, affected: 2000, unaffected: 1000, strict: false });
    expect([r.path, r.stillAcceptedAffected, r.stillAcceptedUnaffected, r.sweepCut]).toEqual([null, 2000, 1000, 0]);
  });
});
