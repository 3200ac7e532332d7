// The state's listeners and the events waiting for them. A change queues its
// events while the state is inconsistent (a pod moved between indexes, say)
// and delivers them in one flush once it is consistent again, so a listener
// that reads back sees the state the events describe.

import type { KindKey, KubeObject, ObjectEvent, PodInfo } from '../contract.js';

export interface StateListener {
  /** A pod was added, or anything in its PodInfo changed (labels, namespace or node labels, ports, IPs). */
  podUpserted(pod: PodInfo): void;
  podDeleted(pod: PodInfo): void;
  /** A full snapshot of one kind, Pods, Namespaces and Nodes included. */
  objectsReplaced(kind: KindKey, objects: KubeObject[]): void;
  objectApplied(kind: KindKey, event: ObjectEvent): void;
  /**
   * Optional: told of a flush before its events. Returning true takes the
   * flush's events away from this listener: it will read the state they lead
   * to itself (consistent by the time this is called), in its own time — a
   * stage does so when a relist is too much to deliver on the main thread.
   */
  bulkChange?(events: readonly StateEvent[]): boolean;
}

export type StateEvent =
  | { type: 'podUpserted'; pod: PodInfo }
  | { type: 'podDeleted'; pod: PodInfo }
  | { type: 'objectsReplaced'; kind: KindKey; objects: KubeObject[] }
  | { type: 'objectApplied'; kind: KindKey; event: ObjectEvent };

export class StateEvents {
  private readonly listeners = new Set<StateListener>();
  private pending: StateEvent[] = [];

  subscribe(listener: StateListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Queues an event for the next flush. */
  queue(event: StateEvent): void {
    this.pending.push(event);
  }

  /**
   * Delivers the queued events, in order, to every listener (but those whose
   * bulkChange took this flush). A throwing
   * listener does not stop the others; the first error is rethrown afterwards.
   */
  flush(): void {
    const events = this.pending;
    this.pending = [];
    let firstError: unknown;
    let failed = false;
    const skipped = new Set<StateListener>();
    for (const listener of this.listeners) {
      try {
        if (listener.bulkChange?.(events) === true) skipped.add(listener);
      } catch (err) {
        if (!failed) {
          failed = true;
          firstError = err;
        }
      }
    }
    for (const event of events) {
      for (const listener of [...this.listeners]) {
        if (skipped.has(listener)) continue;
        try {
          switch (event.type) {
            case 'podUpserted':
              listener.podUpserted(event.pod);
              break;
            case 'podDeleted':
              listener.podDeleted(event.pod);
              break;
            case 'objectsReplaced':
              listener.objectsReplaced(event.kind, event.objects);
              break;
            case 'objectApplied':
              listener.objectApplied(event.kind, event.event);
              break;
          }
        } catch (err) {
          if (!failed) {
            failed = true;
            firstError = err;
          }
        }
      }
    }
    if (failed) throw firstError;
  }
}
