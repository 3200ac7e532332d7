// The module's view of every pod, by host id.

import { PodInfo } from "./podinfo";

export class PodRegistry {
  private byId: Map<u32, PodInfo> = new Map<u32, PodInfo>();

  lookup(id: u32): PodInfo | null {
    if (id == 0 || !this.byId.has(id)) return null;
    return this.byId.get(id);
  }
  put(pod: PodInfo): PodInfo | null {
    const prev = this.lookup(pod.id);
    this.byId.set(pod.id, pod);
    return prev;
  }
  remove(id: u32): PodInfo | null {
    const prev = this.lookup(id);
    if (prev != null) this.byId.delete(id);
    return prev;
  }
  all(): PodInfo[] { return this.byId.values(); }
  get size(): i32 { return this.byId.size; }
}

export const pods = new PodRegistry();
