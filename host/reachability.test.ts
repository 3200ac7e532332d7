import { describe, it, expect } from 'vitest';
import { parseMatrixPort, reachabilityMatrix, type MatrixDecider } from './reachability.js';

describe('reachability matrix', () => {
  it('starts over on the new pipeline when the one it began with stops being active between slices', async () => {
    let revision = 1;
    const deciders: number[] = [];
    const decider = (): MatrixDecider => {
      const mine = revision;
      deciders.push(mine);
      return {
        revision: mine,
        // Revision 1 denies everything; revision 2 allows everything.
        allows: () => mine === 2,
        current: () => revision === mine,
      };
    };
    const pods = ['a/1', 'a/2', 'a/3'];
    const computing = reachabilityMatrix(decider, pods, [{ protocol: 'TCP', port: 80 }], { sliceCells: 2 });
    revision = 2; // the swap happens while the first slice waits for its next turn
    const m = await computing;
    expect(deciders).toEqual([1, 2]);
    expect(m).toEqual({ revision: 2, pods, matrices: [{ protocol: 'TCP', port: 80, rows: ['...', '...', '...'] }] });
  });

  it('reads ports as PORT or PORT/PROTOCOL and names the field of one it cannot read', () => {
    expect(parseMatrixPort('443', 'ports[0]')).toEqual({ protocol: 'TCP', port: 443 });
    expect(parseMatrixPort(' 53 / udp ', 'ports[0]')).toEqual({ protocol: 'UDP', port: 53 });
    for (const bad of ['0', '65536', '80/ICMP', 'http', '']) {
      expect(() => parseMatrixPort(bad, 'ports[2]')).toThrow(/ports\[2\]: ".*" is not a port/);
    }
  });
});
