// Labels as a flat list of key/value pairs. Pods carry a handful of labels, so
// a linear scan beats a hash map in both memory and speed, and PodInfo stays
// small enough for every stage to hold every pod.

// Every Labels object gets a serial (never reused while the module runs), so
// memo tables can key on "this label set" without holding it: a PodInfo and
// its Labels are immutable, and pods of one workload share one Labels object.
let nextLabelsId: u32 = 1;

export class Labels {
  /** Unique per Labels object; 0 once 2^32 - 1 objects were made (memo tables then skip it). */
  readonly id: u32;

  constructor(public pairs: StaticArray<string> = new StaticArray<string>(0)) {
    this.id = nextLabelsId;
    if (nextLabelsId != 0) nextLabelsId++;
  }

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
