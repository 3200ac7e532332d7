// Kubernetes label selectors (metav1.LabelSelector), compiled once when a
// policy arrives so that matching is a few string compares with no
// allocation. An invalid selector matches nothing: a policy that cannot be
// understood must not widen what is allowed.

import { JValue, JKind } from "./json";
import { Labels } from "./labels";
import { log } from "./log";
import { SharedTable, intern } from "./intern";

const NO_STRINGS = new StaticArray<string>(0);
const NO_REQUIREMENTS = new StaticArray<LabelRequirement>(0);

// Most selectors of a large cluster are one of a few shapes
// ({matchLabels: {app: X}} for a few hundred X): a compiled selector is
// shared by every policy whose selector has the same content. Compiled
// selectors are therefore immutable.
const compiledSelectors = new SharedTable<LabelSelector>(8192);

export enum SelectorOp { In = 0, NotIn = 1, Exists = 2, DoesNotExist = 3 }

export class LabelRequirement {
  constructor(public key: string, public op: SelectorOp, public values: StaticArray<string>) {}

  matches(labels: Labels): bool {
    const v = labels.get(this.key);
    const op = this.op;
    if (op == SelectorOp.Exists) return v != null;
    if (op == SelectorOp.DoesNotExist) return v == null;
    let found = false;
    if (v != null) {
      const vals = this.values;
      for (let i = 0, n = vals.length; i < n; i++) {
        if (unchecked(vals[i]) == v) { found = true; break; }
      }
    }
    // NotIn also holds for objects that lack the key, as upstream.
    return op == SelectorOp.In ? found : !found;
  }
}

let nextSelectorId: u32 = 1;

export class LabelSelector {
  /** Unique per selector object (sdk/selector-memo.ts keys on it); 0 once 2^31 - 1 were made. */
  readonly id: u32;
  /** matchLabels as parallel key/value arrays. */
  keys: StaticArray<string> = NO_STRINGS;
  values: StaticArray<string> = NO_STRINGS;
  requirements: StaticArray<LabelRequirement> = NO_REQUIREMENTS;
  /** Why the selector is invalid; an invalid selector matches nothing. */
  error: string | null = null;

  constructor() {
    this.id = nextSelectorId;
    if (nextSelectorId != 0) nextSelectorId = nextSelectorId < 0x7fffffff ? nextSelectorId + 1 : 0;
  }

  /** `{}`: selects every object. */
  static everything(): LabelSelector { return new LabelSelector(); }

  /** Selects no object (what an invalid selector compiles to). */
  static nothing(reason: string): LabelSelector {
    const s = new LabelSelector();
    s.error = reason;
    return s;
  }

  /**
   * Compiles a JSON LabelSelector. JSON null or a missing value compiles to
   * the empty selector (everything); whether an absent selector means
   * "everything" or "nothing" is the caller's decision, so check for it
   * before calling. `context` (e.g. "networking.k8s.io/v1 NetworkPolicy x/deny
   * spec.podSelector") prefixes the warning logged for an invalid selector.
   */
  static parse(v: JValue | null, context: string = ""): LabelSelector {
    const s = LabelSelector.compile(v);
    if (s.error != null) log.warn((context.length > 0 ? context + ": " : "") + s.error! + "; the selector matches nothing");
    return s;
  }

  /**
   * parse without logging. A valid selector is the shared compiled copy of
   * every selector with the same content: do not modify it.
   */
  static compile(v: JValue | null): LabelSelector {
    const s = LabelSelector.build(v);
    return s.error == null ? compiledSelectors.share(s.contentKey(), s) : s;
  }

  /** One string that is equal for selectors with the same terms in the same order. */
  private contentKey(): string {
    let key = "";
    for (let i = 0, n = this.keys.length; i < n; i++) key += unchecked(this.keys[i]) + "=" + unchecked(this.values[i]) + "\u0000";
    const reqs = this.requirements;
    for (let i = 0, n = reqs.length; i < n; i++) {
      const r = unchecked(reqs[i]);
      key += "\u0001" + r.key + "\u0002" + (<i32>r.op).toString();
      for (let j = 0, m = r.values.length; j < m; j++) key += "\u0002" + unchecked(r.values[j]);
      key += "\u0000";
    }
    return key;
  }

  private static build(v: JValue | null): LabelSelector {
    if (v == null || v.kind == JKind.Null) return LabelSelector.everything();
    if (v.kind != JKind.Object) return LabelSelector.nothing("a label selector must be an object");
    const s = new LabelSelector();

    const ml = v.get("matchLabels");
    if (ml != null && ml.kind != JKind.Null) {
      if (ml.kind != JKind.Object) return LabelSelector.nothing("matchLabels must be an object of strings");
      const mk = ml.objectKeys;
      const keys = new StaticArray<string>(mk.length);
      const vals = new StaticArray<string>(mk.length);
      for (let i = 0; i < mk.length; i++) {
        const val = ml.items![i];
        if (val.kind != JKind.String) return LabelSelector.nothing("matchLabels." + mk[i] + " must be a string");
        keys[i] = intern(mk[i]);
        vals[i] = intern(val.s);
      }
      s.keys = keys;
      s.values = vals;
    }

    const me = v.get("matchExpressions");
    if (me != null && me.kind != JKind.Null) {
      if (me.kind != JKind.Array) return LabelSelector.nothing("matchExpressions must be a list");
      const items = me.array;
      const reqs = new StaticArray<LabelRequirement>(items.length);
      for (let i = 0; i < items.length; i++) {
        const at = "matchExpressions[" + i.toString() + "]";
        const e = items[i];
        if (e.kind != JKind.Object) return LabelSelector.nothing(at + " must be an object");
        const key = e.str("key");
        if (key.length == 0) return LabelSelector.nothing(at + ".key is missing");
        const opText = e.str("operator");
        let op: SelectorOp;
        if (opText == "In") op = SelectorOp.In;
        else if (opText == "NotIn") op = SelectorOp.NotIn;
        else if (opText == "Exists") op = SelectorOp.Exists;
        else if (opText == "DoesNotExist") op = SelectorOp.DoesNotExist;
        else return LabelSelector.nothing(at + ".operator \"" + opText + "\" is not one of In, NotIn, Exists, DoesNotExist");
        const rawValues = e.get("values");
        const list = rawValues != null ? rawValues.array : new Array<JValue>(0);
        if (rawValues != null && rawValues.kind != JKind.Null && rawValues.kind != JKind.Array)
          return LabelSelector.nothing(at + ".values must be a list of strings");
        const values = new StaticArray<string>(list.length);
        for (let j = 0; j < list.length; j++) {
          if (list[j].kind != JKind.String) return LabelSelector.nothing(at + ".values[" + j.toString() + "] must be a string");
          values[j] = intern(list[j].s);
        }
        if ((op == SelectorOp.In || op == SelectorOp.NotIn) && values.length == 0)
          return LabelSelector.nothing(at + ": operator " + opText + " needs at least one value");
        if ((op == SelectorOp.Exists || op == SelectorOp.DoesNotExist) && values.length != 0)
          return LabelSelector.nothing(at + ": operator " + opText + " takes no values");
        reqs[i] = new LabelRequirement(intern(key), op, values.length == 0 ? NO_STRINGS : values);
      }
      s.requirements = reqs;
    }
    return s;
  }

  get valid(): bool { return this.error == null; }

  /** True for `{}`: no labels and no expressions (and valid). */
  get matchesEverything(): bool {
    return this.error == null && this.keys.length == 0 && this.requirements.length == 0;
  }

  matches(labels: Labels): bool {
    if (this.error != null) return false;
    const keys = this.keys;
    const vals = this.values;
    for (let i = 0, n = keys.length; i < n; i++) {
      const v = labels.get(unchecked(keys[i]));
      if (v == null || v != unchecked(vals[i])) return false;
    }
    const reqs = this.requirements;
    for (let i = 0, n = reqs.length; i < n; i++) {
      if (!unchecked(reqs[i]).matches(labels)) return false;
    }
    return true;
  }
}
