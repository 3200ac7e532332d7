// Which policies of a tier can select a pod, found from the pod's own labels
// instead of by matching every policy's subject against it.
//
// A policy's subject selects a pod only if every term of its selectors holds
// (AND), so any one term that names a label the pod must carry is a necessary
// condition: `key=value` in matchLabels, `key In (v1, v2)`, `key Exists`, on
// the pod's labels or on its namespace's. Each policy is filed under one such
// term (its anchor), the one likely to name the fewest pods; a pod's candidates
// are the buckets its label pairs and keys name, and the full subject match
// (Policy.selects) still decides, so the index only ever skips policies that
// cannot select the pod. Subjects with no such term — `{}`, NotIn and
// DoesNotExist only — go to the bucket every pod looks at; subjects that
// cannot be understood, or whose selector is invalid, select nothing and are
// filed nowhere.
//
// Candidates are positions in the tier's evaluation order, so sorting them
// gives the order the full scan would find the policies in. A pod has one
// value per key, so it meets a policy through at most one bucket of its
// anchor: no candidate comes twice.

import { PodInfo, Labels } from "../../sdk/index";
import { LabelSelector, SelectorOp } from "../../sdk/selector";
import { Policy } from "./policy";

/** The buckets of one side (the pod's labels or its namespace's). */
class SideBuckets {
  /** key -> value -> positions, ascending. */
  byValue: Map<string, Map<string, i32[]>> = new Map<string, Map<string, i32[]>>();
  /** key -> positions, ascending (Exists anchors). */
  byKey: Map<string, i32[]> = new Map<string, i32[]>();

  valueBucket(key: string, value: string): i32[] | null {
    if (!this.byValue.has(key)) return null;
    const m = this.byValue.get(key);
    return m.has(value) ? m.get(value) : null;
  }

  valueBucketFor(key: string, value: string): i32[] {
    if (!this.byValue.has(key)) this.byValue.set(key, new Map<string, i32[]>());
    const m = this.byValue.get(key);
    if (!m.has(value)) m.set(value, new Array<i32>(0));
    return m.get(value);
  }

  keyBucketFor(key: string): i32[] {
    if (!this.byKey.has(key)) this.byKey.set(key, new Array<i32>(0));
    return this.byKey.get(key);
  }

  /** Adds the candidates `labels` meets to `out`; how many buckets contributed. */
  collect(labels: Labels, out: i32[]): i32 {
    let sources = 0;
    for (let i = 0, n = labels.size; i < n; i++) {
      const key = labels.keyAt(i);
      if (this.byValue.has(key)) {
        const m = this.byValue.get(key);
        const v = labels.valueAt(i);
        if (m.has(v)) { append(out, m.get(v)); sources++; }
      }
      if (this.byKey.has(key)) { append(out, this.byKey.get(key)); sources++; }
    }
    return sources;
  }
}

function append(out: i32[], bucket: i32[]): void {
  for (let i = 0, n = bucket.length; i < n; i++) out.push(unchecked(bucket[i]));
}

/** Positions are added in ascending order: a repeat (an In listing a value twice) is the last one. */
function addTo(bucket: i32[], at: i32): void {
  const n = bucket.length;
  if (n == 0 || unchecked(bucket[n - 1]) != at) bucket.push(at);
}

const NO_ANCHOR: i32 = -1;
const ANCHOR_VALUES: i32 = 0;
const ANCHOR_KEY: i32 = 1;

export class SubjectIndex {
  private pods: SideBuckets = new SideBuckets();
  private namespaces: SideBuckets = new SideBuckets();
  /** Subjects with no term a pod's label must satisfy: every pod's candidates. */
  private always: i32[] = [];
  /** The candidates of the last `candidates` call (reused). */
  private scratch: i32[] = [];

  /** The index over `active`, the tier's policies in evaluation order. */
  constructor(active: StaticArray<Policy>) {
    for (let i = 0; i < active.length; i++) this.add(unchecked(active[i]), i);
  }

  /** How many policies every pod must be matched against, whatever its labels. */
  get unindexed(): i32 { return this.always.length; }

  /**
   * The positions (in evaluation order, ascending) of the policies that may
   * select `pod`: a superset of those that do. Valid until the next call.
   */
  candidates(pod: PodInfo): i32[] {
    const out = this.scratch;
    out.length = 0;
    // Host-networked pods are never subjects (Policy.selects).
    if (pod.hostNetwork) return out;
    append(out, this.always);
    let sources = this.always.length > 0 ? 1 : 0;
    sources += this.pods.collect(pod.labels, out);
    sources += this.namespaces.collect(pod.namespaceLabels, out);
    // Each bucket is ascending: one bucket is already in order.
    if (sources > 1) out.sort();
    return out;
  }

  private add(p: Policy, at: i32): void {
    if (!p.subjectValid) return;
    const ns = p.subjectNamespaces;
    const pods = p.subjectPods;
    // An invalid selector matches nothing (LabelSelector.matches).
    if (!ns.valid || (pods != null && !pods.valid)) return;
    // The anchor: a label value on the pod, else one on its namespace (all
    // the pods of a namespace share its labels, so a namespace value names
    // more pods), else a key the pod, then its namespace, must carry; among
    // terms of one class the one whose buckets hold the fewest policies now.
    // Static ranks, not pod counts: the anchor is picked when policies change,
    // and pods come and go without refiling anything.
    let best: i32 = NO_ANCHOR;
    let bestRank: i32 = i32.MAX_VALUE;
    let bestCost: i32 = i32.MAX_VALUE;
    let bestSide: SideBuckets = this.pods;
    let bestKey = "";
    let bestValues: StaticArray<string> = new StaticArray<string>(0);
    for (let side = 0; side < 2; side++) {
      const sel: LabelSelector | null = side == 0 ? pods : ns;
      if (sel == null) continue;
      const buckets = side == 0 ? this.pods : this.namespaces;
      const s = sel!;
      // Ranks: 0 pod value, 1 namespace value, 2 pod key, 3 namespace key.
      const valueRank = side;
      const keyRank = 2 + side;
      for (let i = 0; i < s.keys.length; i++) {
        const bucket = buckets.valueBucket(s.keys[i], s.values[i]);
        const cost = bucket == null ? 0 : bucket.length;
        if (valueRank < bestRank || (valueRank == bestRank && cost < bestCost)) {
          best = ANCHOR_VALUES; bestRank = valueRank; bestCost = cost; bestSide = buckets; bestKey = s.keys[i];
          bestValues = StaticArray.fromArray<string>([s.values[i]]);
        }
      }
      const reqs = s.requirements;
      for (let i = 0; i < reqs.length; i++) {
        const r = reqs[i];
        if (r.op == SelectorOp.In) {
          let cost = 0;
          for (let j = 0; j < r.values.length; j++) {
            const bucket = buckets.valueBucket(r.key, r.values[j]);
            if (bucket != null) cost += bucket.length;
          }
          if (valueRank < bestRank || (valueRank == bestRank && cost < bestCost)) {
            best = ANCHOR_VALUES; bestRank = valueRank; bestCost = cost; bestSide = buckets; bestKey = r.key; bestValues = r.values;
          }
        } else if (r.op == SelectorOp.Exists) {
          const cost = buckets.byKey.has(r.key) ? buckets.byKey.get(r.key).length : 0;
          if (keyRank < bestRank || (keyRank == bestRank && cost < bestCost)) {
            best = ANCHOR_KEY; bestRank = keyRank; bestCost = cost; bestSide = buckets; bestKey = r.key;
          }
        }
      }
    }
    if (best == ANCHOR_VALUES) {
      for (let j = 0; j < bestValues.length; j++) addTo(bestSide.valueBucketFor(bestKey, bestValues[j]), at);
    } else if (best == ANCHOR_KEY) {
      addTo(bestSide.keyBucketFor(bestKey), at);
    } else {
      this.always.push(at);
    }
  }
}
