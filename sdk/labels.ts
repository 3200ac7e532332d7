// Labels as a flat list of key/value pairs. Pods carry a handful of labels, so
// a linear scan beats a hash map in both memory and speed, and PodInfo stays
// small enough for every stage to hold every pod.

export class Labels {
  constructor(public pairs: StaticArray<string> = new StaticArray<string>(0)) {}

  get size(): i32 { return this.pairs.length >> 1; }

  keyAt(i: i32): string { return unchecked(this.pairs[i << 1]); }
  valueAt(i: i32): string { return unchecked(this.pairs[(i << 1) + 1]); }

  has(key: string): bool { return this.indexOf(key) >= 0; }

  /** The value for key, or null when the key is absent. */
  get(key: string): string | null {
    const i = this.indexOf(key);
    return i < 0 ? null : unchecked(this.pairs[i + 1]);
  }

  private indexOf(key: string): i32 {
    const p = this.pairs;
    for (let i = 0, n = p.length; i < n; i += 2) {
      if (unchecked(p[i]) == key) return i;
    }
    return -1;
  }

  static fromPairs(keys: string[], values: string[]): Labels {
    const p = new StaticArray<string>(keys.length << 1);
    for (let i = 0; i < keys.length; i++) {
      p[i << 1] = keys[i];
      p[(i << 1) + 1] = values[i];
    }
    return new Labels(p);
  }

  equals(other: Labels): bool {
    if (other.size != this.size) return false;
    for (let i = 0, n = this.size; i < n; i++) {
      const v = other.get(this.keyAt(i));
      if (v == null || v != this.valueAt(i)) return false;
    }
    return true;
  }
}

export const NO_LABELS = new Labels();
