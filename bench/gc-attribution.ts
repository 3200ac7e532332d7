// Which part of a wait of the decision loop was V8's garbage collector: the
// hotSwap section records the main thread's GC entries (PerformanceObserver)
// beside its longest waits, so a figure says whether a swap's stall was a
// collection or work (docs/performance.md, "Swaps and memory").
import { PerformanceObserver, constants } from 'node:perf_hooks';

/** One collection of this thread: when it ran (performance.now() milliseconds) and its kind (perf_hooks' NODE_PERFORMANCE_GC_*). */
export interface GcPause {
  start: number;
  end: number;
  kind: number;
}

/** What the collector took of the interval [from, to]: the milliseconds of pauses inside it and the mark-compacts among them. */
export function gcWithin(pauses: readonly GcPause[], from: number, to: number): { millis: number; markCompacts: number } {
  let millis = 0;
  let markCompacts = 0;
  for (const p of pauses) {
    const overlap = Math.min(p.end, to) - Math.max(p.start, from);
    if (overlap <= 0) continue;
    millis += overlap;
    if (p.kind === constants.NODE_PERFORMANCE_GC_MAJOR) markCompacts++;
  }
  return { millis, markCompacts };
}

/**
 * Records this thread's collections until `stop`. The observer is told
 * about them a turn or more later, so read `pauses` only after the awaited
 * turn that follows the interval of interest.
 */
export function recordGcPauses(): { pauses: GcPause[]; stop(): void } {
  const pauses: GcPause[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push({ start: e.startTime, end: e.startTime + e.duration, kind: (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0 });
  });
  observer.observe({ entryTypes: ['gc'] });
  return { pauses, stop: () => observer.disconnect() };
}
