import { describe, it, expect } from 'vitest';
import { BusyPoll } from './busy-poll.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the busy poll after a packet', () => {
  it('keeps the loop turning until the window after the last packet has passed, then lets it sleep', async () => {
    let clock = 0;
    const poll = new BusyPoll(1000, () => clock);
    poll.packet(0);
    expect(poll.active).toBe(true);
    await turn();
    await turn();
    const turnsBefore = poll.turns;
    expect(turnsBefore).toBeGreaterThan(0);
    clock = 0.5;
    poll.packet(0.5); // a second packet restarts the window: it now ends at 1.5 ms
    clock = 1.4;
    await turn();
    await turn();
    expect(poll.active).toBe(true);
    expect(poll.turns).toBeGreaterThan(turnsBefore);
    clock = 1.6;
    await turn();
    await turn();
    expect(poll.active).toBe(false);
    const turnsIdle = poll.turns;
    await turn();
    expect(poll.turns).toBe(turnsIdle);
  });

  it('never polls with a window of 0, and stops for good when stopped', async () => {
    let clock = 0;
    const off = new BusyPoll(0, () => clock);
    off.packet(0);
    await turn();
    expect(off.active).toBe(false);
    expect(off.turns).toBe(0);

    const poll = new BusyPoll(1000, () => clock);
    poll.packet(0);
    await turn();
    poll.stop();
    await turn();
    await turn();
    expect(poll.active).toBe(false);
    poll.packet(0);
    expect(poll.active).toBe(false);
  });
});
