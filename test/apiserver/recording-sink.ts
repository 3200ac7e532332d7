// An ObjectSink that keeps the state a sink would hold and every call it got,
// for asserting what a source delivered.

import type { KindKey, KubeObject, ObjectEvent, ObjectSink } from '../../host/contract.js';

export type SinkCall = { op: 'replace'; kind: KindKey; objects: KubeObject[] } | { op: 'apply'; kind: KindKey; event: ObjectEvent };

const keyOf = (o: KubeObject) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);

export class RecordingSink implements ObjectSink {
  readonly calls: SinkCall[] = [];
  private readonly state = new Map<KindKey, Map<string, KubeObject>>();

  replace(kind: KindKey, objects: KubeObject[]): void {
    this.calls.push({ op: 'replace', kind, objects: structuredClone(objects) });
    this.state.set(kind, new Map(objects.map((o) => [keyOf(o), structuredClone(o)])));
  }

  apply(kind: KindKey, event: ObjectEvent): void {
    this.calls.push({ op: 'apply', kind, event: structuredClone(event) });
    const objects = this.state.get(kind) ?? new Map<string, KubeObject>();
    this.state.set(kind, objects);
    if (event.type === 'delete') objects.delete(keyOf(event.object));
    else objects.set(keyOf(event.object), structuredClone(event.object));
  }

  /** The objects of a kind the sink holds now, sorted by namespace/name. */
  objects(kind: KindKey): KubeObject[] {
    return [...(this.state.get(kind)?.values() ?? [])].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  }

  /** `namespace/name` (or name) of each held object of a kind, sorted. */
  names(kind: KindKey): string[] {
    return this.objects(kind).map(keyOf);
  }

  get(kind: KindKey, name: string, namespace?: string): KubeObject | undefined {
    return this.state.get(kind)?.get(namespace ? `${namespace}/${name}` : name);
  }

  replaces(kind: KindKey): KubeObject[][] {
    return this.calls.filter((c): c is Extract<SinkCall, { op: 'replace' }> => c.op === 'replace' && c.kind === kind).map((c) => c.objects);
  }
}
