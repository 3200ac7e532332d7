import { describe, it, expect } from 'vitest';
import { constants } from 'node:perf_hooks';
import { gcWithin, recordGcPauses, type GcPause } from './gc-attribution.js';

const MAJOR = constants.NODE_PERFORMANCE_GC_MAJOR;
const MINOR = constants.NODE_PERFORMANCE_GC_MINOR;

describe('gcWithin', () => {
  it('counts only the part of each pause inside the interval, and the mark-compacts that overlap it', () => {
    const pauses: GcPause[] = [
      { start: 0, end: 4, kind: MINOR }, // before
      { start: 9, end: 12, kind: MINOR }, // 1 ms inside
      { start: 13, end: 15, kind: MAJOR }, // 2 ms inside
      { start: 19, end: 25, kind: MAJOR }, // 1 ms inside
      { start: 20, end: 30, kind: MINOR }, // after
    ];
    expect(gcWithin(pauses, 11, 20)).toEqual({ millis: 4, markCompacts: 2 });
    expect(gcWithin(pauses, 4, 9)).toEqual({ millis: 0, markCompacts: 0 });
  });

  it('sees a collection this thread makes once the observer has been told', async () => {
    const recorder = recordGcPauses();
    const from = performance.now();
    // Enough short-lived garbage for several scavenges.
    let sink = 0;
    for (let i = 0; i < 200_000; i++) sink += new Array(16).fill(i).length;
    const to = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 50));
    recorder.stop();
    expect(sink).toBeGreaterThan(0);
    expect(recorder.pauses.length).toBeGreaterThan(0);
    expect(gcWithin(recorder.pauses, from, to).millis).toBeGreaterThan(0);
  });
});
