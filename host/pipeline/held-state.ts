// What one stage instance holds: the pods and objects it accepted, and how
// many bytes the host delivered for them. A stage sizes an instance's memory
// cap from these bytes, and when a module breaks on a delivery and cannot
// hold the current state, it rebuilds the instance from this snapshot: the
// last state the stage answered with, never a half-applied one.
//
// Objects and PodInfos are immutable once ClusterState stores them, so the
// snapshot holds references, and their delivered sizes are remembered per
// object rather than serialized again for every rebuild.
import type { KubeObject, ObjectEvent, PodInfo } from '../contract.js';
import { encodePodInfo } from '../abi/podinfo-codec.js';
import { objectKeyOf } from '../state/cluster-state.js';

const encoder = new TextEncoder();
const sizes = new WeakMap<object, number>();

/** Bytes the host delivers for a PodInfo (its record) or an object (its UTF-8 JSON). */
export function deliveredBytes(item: PodInfo | KubeObject, encoded?: Uint8Array): number {
  let n = sizes.get(item);
  if (n === undefined) {
    n = encoded?.length ?? (isPod(item) ? encodePodInfo(item).length : encoder.encode(JSON.stringify(item)).length);
    sizes.set(item, n);
  }
  return n;
}

function isPod(item: PodInfo | KubeObject): item is PodInfo {
  return typeof (item as PodInfo).id === 'number' && (item as KubeObject).apiVersion === undefined;
}

export class HeldState {
  readonly pods = new Map<number, PodInfo>();
  /** Per kind index (the module's meta.kinds order): key → object. */
  readonly objects: Array<Map<string, KubeObject>>;
  bytes = 0;

  constructor(kinds: number) {
    this.objects = Array.from({ length: kinds }, () => new Map());
  }

  /** A snapshot of `pods` and, per kind index, `objects[i]`. */
  static of(pods: Iterable<PodInfo>, objects: Array<Iterable<KubeObject>>): HeldState {
    const held = new HeldState(objects.length);
    for (const pod of pods) held.upsertPod(pod);
    objects.forEach((list, i) => held.replace(i, list));
    return held;
  }

  /** Adds an object of kind index `kind` that this snapshot does not hold yet (building one in slices). */
  addObject(kind: number, obj: KubeObject): void {
    this.objects[kind].set(objectKeyOf(obj), obj);
    this.bytes += deliveredBytes(obj);
  }

  upsertPod(pod: PodInfo): void {
    const old = this.pods.get(pod.id);
    if (old) this.bytes -= deliveredBytes(old);
    this.pods.set(pod.id, pod);
    this.bytes += deliveredBytes(pod);
  }

  deletePod(pod: PodInfo): void {
    const old = this.pods.get(pod.id);
    if (!old) return;
    this.bytes -= deliveredBytes(old);
    this.pods.delete(pod.id);
  }

  replace(kind: number, objects: Iterable<KubeObject>): void {
    const map = this.objects[kind];
    for (const obj of map.values()) this.bytes -= deliveredBytes(obj);
    map.clear();
    for (const obj of objects) {
      map.set(objectKeyOf(obj), obj);
      this.bytes += deliveredBytes(obj);
    }
  }

  apply(kind: number, event: ObjectEvent): void {
    const map = this.objects[kind];
    const key = objectKeyOf(event.object);
    const old = map.get(key);
    if (old) this.bytes -= deliveredBytes(old);
    if (event.type === 'delete') map.delete(key);
    else {
      map.set(key, event.object);
      this.bytes += deliveredBytes(event.object);
    }
  }

  /** Bytes after `upsertPod(pod)`, without changing anything. */
  bytesIfPodUpserted(pod: PodInfo): number {
    const old = this.pods.get(pod.id);
    return this.bytes - (old ? deliveredBytes(old) : 0) + deliveredBytes(pod);
  }

  /** Bytes after `apply(kind, event)` of an upsert, without changing anything. */
  bytesIfApplied(kind: number, event: ObjectEvent): number {
    const old = this.objects[kind].get(objectKeyOf(event.object));
    return this.bytes - (old ? deliveredBytes(old) : 0) + deliveredBytes(event.object);
  }

  /** Bytes after `replace(kind, objects)`, without changing anything. */
  bytesIfReplaced(kind: number, objects: readonly KubeObject[]): number {
    let n = this.bytes;
    for (const obj of this.objects[kind].values()) n -= deliveredBytes(obj);
    for (const obj of objects) n += deliveredBytes(obj);
    return n;
  }

  get objectCount(): number {
    let n = 0;
    for (const m of this.objects) n += m.size;
    return n;
  }
}
