// Objects of one kind, keyed by name, with the ABI's snapshot protocol: a
// RESET starts a fresh snapshot that is only swapped in at SYNCED, so a
// relist never leaves decisions looking at half a list.

export class KindStore<T> {
  live: Map<string, T> = new Map<string, T>();
  private staging: Map<string, T> | null = null;
  /** A snapshot has completed at least once. */
  everSynced: bool = false;

  /** Whether changes land in the live map (and so must be applied now). */
  get applyingLive(): bool { return this.staging == null; }

  /** The live object named `name`, or null. */
  get(name: string): T | null {
    return this.live.has(name) ? this.live.get(name) : null;
  }

  reset(): void { this.staging = new Map<string, T>(); }

  upsert(name: string, value: T): void {
    const s = this.staging;
    if (s != null) s.set(name, value); else this.live.set(name, value);
  }

  remove(name: string): void {
    const s = this.staging;
    const m = s != null ? s : this.live;
    if (m.has(name)) m.delete(name);
  }

  synced(): void {
    const s = this.staging;
    if (s != null) this.live = s;
    this.staging = null;
    this.everSynced = true;
  }

  values(): T[] { return this.live.values(); }
}
