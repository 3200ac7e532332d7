// service-policy: policies written in terms of Services instead of pod labels,
// whatever the CNI. A ServicePolicy (policy.kwp.example/v1alpha1) says
//
//   spec:
//     priority: 10               # lower wins; 0-1000
//     action: Allow | Deny
//     from: {service: web}       # namespace: defaults to the policy's own
//     to:   {service: db, namespace: data}
//     ports: [{protocol: TCP, port: 5432}]   # optional; absent = every port
//
// A pod belongs to a Service when the Service's spec.selector matches its
// labels in the Service's namespace. A flow from a member of `from` to a
// member of `to` gets the action of the matching policy with the lowest
// priority (ties: by namespace/name), in both directions, so an Allow
// overrides later NetworkPolicy stages and a Deny cannot be undone by them.
// Flows no policy matches go on to the next stage (Next).
//
// Per packet the work is two cache lookups and a merge of two short sorted
// lists: which policies a pod is a `from` or a `to` member of is computed
// once per pod (PodCache) and recomputed only when that pod, a Service or a
// ServicePolicy changes.
import {
  Evaluator, Decision, Verdict, PodInfo, PodCache, JValue, JKind, LabelSelector,
  PortMatcher, portsMatch, portError, log, register,
} from "../../../index"; // your project: "kube-wasm-policies/sdk"

const KIND_SERVICE: i32 = 0;
const KIND_POLICY: i32 = 1;
const MAX_PRIORITY: i64 = 1000;

class ServiceRef {
  constructor(public namespace: string, public name: string) {}
  get key(): string { return this.namespace + "/" + this.name; }
}

class Policy {
  namespace: string = "";
  name: string = "";
  priority: i32 = 0;
  deny: bool = false;
  from: ServiceRef = new ServiceRef("", "");
  to: ServiceRef = new ServiceRef("", "");
  ports: StaticArray<PortMatcher> = new StaticArray<PortMatcher>(0);
  get key(): string { return this.namespace + "/" + this.name; }
}

/** Null with a logged warning when the object is not a usable ServicePolicy. */
function parsePolicy(obj: JValue): Policy | null {
  const p = new Policy();
  const meta = obj.get("metadata");
  p.name = meta != null ? meta.str("name") : "";
  p.namespace = meta != null ? meta.str("namespace", "default") : "default";
  const where = "ServicePolicy " + p.key + ": ";
  const spec = obj.get("spec");
  if (spec == null || spec.kind != JKind.Object) { log.warn(where + "spec is missing; the policy is ignored"); return null; }

  const action = spec.str("action");
  if (action != "Allow" && action != "Deny") { log.warn(where + "spec.action must be Allow or Deny; the policy is ignored"); return null; }
  p.deny = action == "Deny";

  const prio = spec.get("priority");
  if (prio == null || prio.kind != JKind.Number || prio.n != Math.floor(prio.n) || prio.n < 0 || prio.n > <f64>MAX_PRIORITY) {
    log.warn(where + "spec.priority must be an integer from 0 to 1000; the policy is ignored");
    return null;
  }
  p.priority = <i32>prio.n;

  const from = parseRef(spec.get("from"), p.namespace);
  const to = parseRef(spec.get("to"), p.namespace);
  if (from == null || to == null) { log.warn(where + "spec.from and spec.to must each name a service: {service: NAME}; the policy is ignored"); return null; }
  p.from = from;
  p.to = to;

  const ports = spec.get("ports");
  if (ports != null && ports.kind != JKind.Null) {
    if (ports.kind != JKind.Array) { log.warn(where + "spec.ports must be a list; the policy is ignored"); return null; }
    const list = ports.array;
    const out = new StaticArray<PortMatcher>(list.length);
    for (let i = 0; i < list.length; i++) {
      const m = PortMatcher.parseNetworkPolicyPort(list[i]);
      if (m == null) { log.warn(where + "spec.ports[" + i.toString() + "]: " + portError + "; the policy is ignored"); return null; }
      out[i] = m;
    }
    p.ports = out;
  }
  return p;
}

function parseRef(v: JValue | null, defaultNamespace: string): ServiceRef | null {
  if (v == null || v.kind != JKind.Object) return null;
  const name = v.str("service");
  if (name.length == 0) return null;
  return new ServiceRef(v.str("namespace", defaultNamespace), name);
}

/** A Service's spec.selector as a LabelSelector; a Service without one selects no pod. */
function serviceSelector(obj: JValue): LabelSelector {
  const sel = obj.path("spec.selector");
  if (sel == null || sel.kind != JKind.Object || sel.objectKeys.length == 0) return LabelSelector.nothing("no selector");
  const keys = sel.objectKeys;
  const s = new LabelSelector();
  const k = new StaticArray<string>(keys.length);
  const v = new StaticArray<string>(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const item = sel.items![i];
    if (item.kind != JKind.String) return LabelSelector.nothing("spec.selector." + keys[i] + " is not a string");
    k[i] = keys[i];
    v[i] = item.s;
  }
  s.keys = k;
  s.values = v;
  return s;
}

function objectKey(obj: JValue): string {
  const meta = obj.get("metadata");
  if (meta == null) return "";
  return meta.str("namespace", "default") + "/" + meta.str("name");
}

function byPriorityThenName(a: Policy, b: Policy): i32 {
  if (a.priority != b.priority) return a.priority - b.priority;
  const ak = a.key, bk = b.key;
  return ak < bk ? -1 : ak > bk ? 1 : 0;
}

const NONE = new StaticArray<i32>(0);

class ServicePolicyEvaluator extends Evaluator {
  private services: Map<string, LabelSelector> = new Map<string, LabelSelector>();
  private policiesByKey: Map<string, Policy> = new Map<string, Policy>();
  /** Sorted by priority then name; a policy's index here is its rank and its reason code - 1. */
  private ranked: StaticArray<Policy> = new StaticArray<Policy>(0);
  private syncing: StaticArray<bool> = new StaticArray<bool>(2);
  /** Per pod: ranks of the policies whose `from` (resp. `to`) Service selects it, ascending. */
  private asSource: PodCache<StaticArray<i32>> = new PodCache<StaticArray<i32>>();
  private asDestination: PodCache<StaticArray<i32>> = new PodCache<StaticArray<i32>>();

  objectsReset(kind: i32): void {
    this.syncing[kind] = true;
    if (kind == KIND_SERVICE) this.services.clear();
    else this.policiesByKey.clear();
  }

  objectsSynced(kind: i32): void {
    this.syncing[kind] = false;
    this.rebuild();
  }

  objectUpserted(kind: i32, obj: JValue): void {
    const key = objectKey(obj);
    if (kind == KIND_SERVICE) this.services.set(key, serviceSelector(obj));
    else {
      const p = parsePolicy(obj);
      if (p != null) this.policiesByKey.set(key, p);
      else if (this.policiesByKey.has(key)) this.policiesByKey.delete(key);
    }
    if (!this.syncing[kind]) this.rebuild();
  }

  objectDeleted(kind: i32, obj: JValue): void {
    const key = objectKey(obj);
    if (kind == KIND_SERVICE) { if (this.services.has(key)) this.services.delete(key); }
    else if (this.policiesByKey.has(key)) this.policiesByKey.delete(key);
    if (!this.syncing[kind]) this.rebuild();
  }

  /** Off the packet path: after every change to Services or policies. */
  private rebuild(): void {
    const list = this.policiesByKey.values();
    list.sort(byPriorityThenName);
    const ranked = new StaticArray<Policy>(list.length);
    for (let i = 0; i < list.length; i++) ranked[i] = list[i];
    this.ranked = ranked;
    this.asSource.clear();
    this.asDestination.clear();
  }

  private member(pod: PodInfo, ref: ServiceRef): bool {
    if (pod.namespace != ref.namespace) return false;
    const key = ref.key;
    if (!this.services.has(key)) return false;
    return this.services.get(key).matches(pod.labels);
  }

  private ranksFor(pod: PodInfo, asFrom: bool): StaticArray<i32> {
    const cache = asFrom ? this.asSource : this.asDestination;
    if (cache.has(pod.id)) return cache.get(pod.id);
    const ranks = new Array<i32>(0);
    const ranked = this.ranked;
    for (let i = 0; i < ranked.length; i++) {
      const p = ranked[i];
      if (this.member(pod, asFrom ? p.from : p.to)) ranks.push(i);
    }
    const out = ranks.length == 0 ? NONE : StaticArray.fromArray<i32>(ranks);
    cache.set(pod.id, out);
    return out;
  }

  decide(d: Decision): Verdict {
    if (this.ranked.length == 0) return Verdict.Next;
    const src = d.srcPod;
    const dst = d.dstPod;
    if (src == null || dst == null) return Verdict.Next;
    const a = this.ranksFor(src, true);
    const b = this.ranksFor(dst, false);
    // Both lists ascend by rank: the first common rank whose ports match is the winner.
    let i = 0, j = 0;
    while (i < a.length && j < b.length) {
      const ra = unchecked(a[i]), rb = unchecked(b[j]);
      if (ra < rb) { i++; continue; }
      if (rb < ra) { j++; continue; }
      const p = unchecked(this.ranked[ra]);
      if (portsMatch(p.ports, d.protocol, d.dstPort, dst)) {
        d.reason = <u32>ra + 1;
        return p.deny ? Verdict.Deny : Verdict.Accept;
      }
      i++; j++;
    }
    return Verdict.Next;
  }

  explain(reason: u32): string {
    if (reason == 0 || <i32>reason > this.ranked.length) return "";
    const p = this.ranked[<i32>reason - 1];
    return "ServicePolicy " + p.key + " (priority " + p.priority.toString() + "): " + (p.deny ? "Deny " : "Allow ") + p.from.key + " -> " + p.to.key;
  }
}

register(new ServicePolicyEvaluator());
export * from "../../../exports"; // your project: "kube-wasm-policies/sdk/exports"
