import { describe, it, expect } from 'vitest';
import { parseNfqueueStats, readNfqueueStats } from './nfqueue-stats.js';

describe('NFQUEUE statistics from /proc', () => {
  it('each bound queue becomes one record and malformed lines are skipped', () => {
    const text = '    0  2331     0 2 65531     0     0        4  1\n  100  2331    12 2 65531     5    17   988112  1\ngarbage line\n';
    expect(parseNfqueueStats(text)).toEqual([
      { queue: 0, portId: 2331, waiting: 0, queueDropped: 0, userDropped: 0, idSequence: 4 },
      { queue: 100, portId: 2331, waiting: 12, queueDropped: 5, userDropped: 17, idSequence: 988112 },
    ]);
  });

  it('a missing file means no queues', () => {
    expect(readNfqueueStats('/nonexistent/nfnetlink_queue')).toEqual([]);
  });
});
