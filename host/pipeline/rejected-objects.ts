// The objects a stage's module refused or warned about when it took them
// (the `rejected` field of its log lines, host/runtime/instance.ts), until a
// later delivery replaces or removes them. Replays into a rebuilt instance
// add the same keys again, so the count is of objects, not of deliveries:
// what kwp_objects_rejected shows.
import type { KubeObject } from '../contract.js';
import type { RejectedObject } from '../runtime/instance.js';

function keyOf(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}\n${namespace ?? ''}\n${name}`;
}

export class RejectedObjects {
  private readonly byKey = new Map<string, RejectedObject>();

  add(r: RejectedObject): void {
    this.byKey.set(keyOf(r.kind, r.namespace, r.name), r);
  }

  /** The object is delivered again (or deleted): whatever the module says next decides. */
  forget(obj: KubeObject): void {
    this.byKey.delete(keyOf(obj.kind, obj.metadata.namespace || undefined, obj.metadata.name));
  }

  /** Every object of `kind` (the object's kind, e.g. "NetworkPolicy") is delivered anew. */
  forgetKind(kind: string): void {
    for (const [key, r] of this.byKey) if (r.kind === kind) this.byKey.delete(key);
  }

  /** How many objects of each kind are refused now. */
  countsByKind(): Map<string, number> {
    const out = new Map<string, number>();
    for (const r of this.byKey.values()) out.set(r.kind, (out.get(r.kind) ?? 0) + 1);
    return out;
  }
}
