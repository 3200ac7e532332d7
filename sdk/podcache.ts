// Per-pod memo tables. Selector results depend on a pod's labels, which only
// change with a PodInfo upsert, so the SDK drops a pod's entries in every cache
// on upsert/delete; an evaluator clears a cache itself when its policies change.

export abstract class PodCacheBase {
  abstract invalidate(id: u32): void;
  abstract clear(): void;
}

const caches = new Array<PodCacheBase>();

export class PodCache<T> extends PodCacheBase {
  private entries: Map<u32, T> = new Map<u32, T>();

  constructor() {
    super();
    caches.push(this);
  }

  has(id: u32): bool { return this.entries.has(id); }
  /** Only valid after has(id) returned true. */
  get(id: u32): T { return this.entries.get(id); }
  set(id: u32, value: T): void { this.entries.set(id, value); }
  invalidate(id: u32): void { if (this.entries.has(id)) this.entries.delete(id); }
  clear(): void { if (this.entries.size > 0) this.entries.clear(); }
  get size(): i32 { return this.entries.size; }
}

/** Called by the ABI layer when a pod changes or goes away. */
export function invalidatePodCaches(id: u32): void {
  for (let i = 0, n = caches.length; i < n; i++) unchecked(caches[i]).invalidate(id);
}
