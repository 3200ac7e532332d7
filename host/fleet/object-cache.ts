// The fleet's view of its kinds: an ObjectSink (what the Kubernetes source's
// informers write into) that keeps the objects of each kind by name and calls
// back after every change, so the node and the rollout controller reconcile
// from the same list+watch machinery the policy objects come through.
import type { KindKey, KubeObject, ObjectEvent, ObjectSink } from '../contract.js';

export class ObjectCache implements ObjectSink {
  private readonly kinds = new Map<KindKey, Map<string, KubeObject>>();

  constructor(private readonly onChange: (kind: KindKey) => void = () => {}) {}

  replace(kind: KindKey, objects: KubeObject[]): void {
    this.kinds.set(kind, new Map(objects.map((o) => [o.metadata.name, o])));
    this.onChange(kind);
  }

  apply(kind: KindKey, event: ObjectEvent): void {
    let m = this.kinds.get(kind);
    if (!m) this.kinds.set(kind, (m = new Map()));
    if (event.type === 'delete') m.delete(event.object.metadata.name);
    else m.set(event.object.metadata.name, event.object);
    this.onChange(kind);
  }

  list(kind: KindKey): KubeObject[] {
    return [...(this.kinds.get(kind)?.values() ?? [])];
  }

  get(kind: KindKey, name: string): KubeObject | undefined {
    return this.kinds.get(kind)?.get(name);
  }
}
