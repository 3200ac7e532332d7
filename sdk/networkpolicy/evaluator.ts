// The networking.k8s.io/v1 NetworkPolicy evaluator as an SDK class. A pod
// selected by some policy for a direction is isolated in it: a packet is
// accepted when a rule of any of those policies allows it and denied
// otherwise. Other pods are not this stage's business (Next).
//
// Which policies isolate a pod is worked out when pods or policies change, per
// pod and per direction, and kept with the pod in a PodTable; decide only
// walks those policies' rules and allocates nothing.
//
// The built-in `network-policy` module registers this class as it is.
// Evaluators that extend NetworkPolicy semantics subclass it and override the
// hooks (`canBeSubject`, `peerFor`, `policyCompiled`) rather than copying the
// matching logic: the multicluster evaluator keeps subjects local and hides
// pods of other clusters from cluster-local policies that way.

import { Evaluator, Decision, Verdict, JValue, PodInfo, Labels, pods, Attribution, packRule, ruleIsIngress, ruleIndex, rulePeer, rulePort } from "../index";
import { Policy, compilePolicy, policyKey, matchedAt, NO_PEER_MATCH } from "./policy";
import { Isolation, NOT_ISOLATED } from "./podtable";
import { PodTable } from "../pod-table";
import { PortIndex } from "../port-index";
import { peerIndex, flagsOf, serialOf, ruleOf } from "./rule-index";

// Reason codes. Accepts carry the deciding policy's serial (FIRST_SERIAL and
// up); denies carry DENY_FLAG | pod id << 1 | direction, and explain lists the
// pod's isolating policies as they are when asked.
const REASON_NOT_ISOLATED_EGRESS: u32 = 1;
const REASON_NOT_ISOLATED_INGRESS: u32 = 2;
const REASON_NO_SUBJECT: u32 = 3;
const FIRST_SERIAL: u32 = 16;
const DENY_FLAG: u32 = 0x80000000;
const EXPLAIN_MAX_POLICIES = 5;
/**
 * Distinct isolations kept for sharing. Pods of one workload are isolated by
 * the same policies, so they share one Isolation and its rule index; past the
 * bound the table starts over (a pod computed then gets its own copy).
 */
const SHARED_ISOLATIONS = 8192;
/** Distinct isolations a snapshot's SYNCED indexes (takeIndexBudget). */
const SYNC_INDEXES = 4096;

export class NetworkPolicyEvaluator extends Evaluator {
  /** namespace -> name -> policy: the names are the policies' own strings, so no "<ns>/<name>" key is kept per policy. */
  private byName: Map<string, Map<string, Policy>> = new Map<string, Map<string, Policy>>();
  private bySerial: Map<u32, Policy> = new Map<u32, Policy>();
  private byNamespace: Map<string, Array<Policy>> = new Map<string, Array<Policy>>();
  private podsByNamespace: Map<string, Set<u32>> = new Map<string, Set<u32>>();
  private table: PodTable<Isolation> = new PodTable<Isolation>();
  private nextSerial: u32 = FIRST_SERIAL;
  /** Isolations by the serials of their policies: a serial names one compiled policy version. */
  private isolations: Map<u64, Isolation> = new Map<u64, Isolation>();
  /** New isolations that may still get an index in this call; -1: no limit (outside a snapshot's SYNCED). */
  private indexBudget: i32 = -1;
  /** Between RESET and SYNCED: recomputing per object would be quadratic, so it waits for SYNCED. */
  private snapshotting: bool = false;

  // --- hooks for extending evaluators ---

  /** Whether `pod` may be a subject (be isolated) at all; every pod by default. */
  canBeSubject(pod: PodInfo): bool { return true; }

  /**
   * The peer as the rules of a policy whose `flags` are `policyFlags` get to
   * see it: `peer` by default; null makes the rules treat the far end as an
   * address that is no known pod (ipBlocks still apply). It may depend on
   * nothing else of the policy (the rule index keeps only the flags). Called
   * on the decision path: must not allocate.
   */
  peerFor(policyFlags: u32, peer: PodInfo | null): PodInfo | null { return peer; }

  /** Called once per compiled policy, with its object, before it is used; may set `policy.flags`. */
  policyCompiled(policy: Policy, obj: JValue): void {}

  // --- pods ---

  podUpserted(pod: PodInfo, previous: PodInfo | null): void {
    if (previous != null && previous.namespace != pod.namespace) this.forgetPod(previous.namespace, pod.id);
    let ids: Set<u32>;
    if (this.podsByNamespace.has(pod.namespace)) ids = this.podsByNamespace.get(pod.namespace);
    else {
      ids = new Set<u32>();
      this.podsByNamespace.set(pod.namespace, ids);
    }
    ids.add(pod.id);
    this.table.set(pod, this.isolationOf(pod));
  }

  podDeleted(pod: PodInfo): void {
    this.forgetPod(pod.namespace, pod.id);
    this.table.delete(pod.id);
  }

  private forgetPod(namespace: string, id: u32): void {
    if (!this.podsByNamespace.has(namespace)) return;
    const ids = this.podsByNamespace.get(namespace);
    ids.delete(id);
    if (ids.size == 0) this.podsByNamespace.delete(namespace);
  }

  /**
   * The policies isolating `pod`. With a `memo` (one pass over many pods, the
   * policies unchanged meanwhile), a pod whose label set object and namespace
   * an earlier pod of the pass had gets that pod's answer: past the checks of
   * the pod itself (host network, canBeSubject), which policies select it
   * depends on nothing else (Policy.selects).
   */
  private isolationOf(pod: PodInfo, memo: IsolationMemo | null = null): Isolation {
    if (pod.hostNetwork || !this.byNamespace.has(pod.namespace) || !this.canBeSubject(pod)) return NOT_ISOLATED;
    if (memo == null) return this.matchedIsolation(pod);
    const known = memo.find(pod.labels, pod.namespace);
    if (known != null) return known;
    const iso = this.matchedIsolation(pod);
    memo.remember(pod.labels, pod.namespace, iso);
    return iso;
  }

  /** isolationOf's matching: every policy of the pod's namespace against the pod, for a pod that may be isolated. */
  private matchedIsolation(pod: PodInfo): Isolation {
    const list = this.byNamespace.get(pod.namespace);
    const ingress = new Array<Policy>(0);
    const egress = new Array<Policy>(0);
    for (let i = 0; i < list.length; i++) {
      const p = list[i];
      if (!p.selects(pod)) continue;
      if (p.isolatesIngress) ingress.push(p);
      if (p.isolatesEgress) egress.push(p);
    }
    if (ingress.length == 0 && egress.length == 0) return NOT_ISOLATED;
    // The lists' identity as a hash of the policies' serials (a serial names
    // one compiled policy version); a hash shared by other lists is simply
    // not shared. No strings: a snapshot computes this for every pod.
    let h: u64 = 0xcbf29ce484222325;
    for (let i = 0; i < ingress.length; i++) h = (h ^ <u64>ingress[i].serial) * 0x100000001b3;
    h = (h ^ 0xffffffff) * 0x100000001b3;
    for (let i = 0; i < egress.length; i++) h = (h ^ <u64>egress[i].serial) * 0x100000001b3;
    const shared = this.isolations;
    if (shared.has(h)) {
      const known = shared.get(h);
      if (sameList(ingress, known.ingress) && sameList(egress, known.egress)) return known;
      return new Isolation(toStatic(ingress), toStatic(egress), this.takeIndexBudget());
    }
    const iso = new Isolation(toStatic(ingress), toStatic(egress), this.takeIndexBudget());
    if (shared.size >= SHARED_ISOLATIONS) shared.clear();
    shared.set(h, iso);
    return iso;
  }

  /**
   * Whether the next new isolation gets a rule index. A snapshot computes
   * every pod's isolation in one call (SYNCED), under one call's fuel: it
   * indexes at most SYNC_INDEXES distinct lists, and the rest are scanned
   * until a change recomputes them (an index is an optimisation; the scan
   * gives the same answers).
   */
  private takeIndexBudget(): bool {
    if (this.indexBudget == 0) return false;
    if (this.indexBudget > 0) this.indexBudget--;
    return true;
  }

  /**
   * After `before` was replaced by `after` (either may be null) in their
   * namespace: only pods one of them selects can have changed isolation, so a
   * policy change costs one selector match per pod of the namespace plus a
   * full recompute for the pods it touches.
   */
  private policyChanged(before: Policy | null, after: Policy | null): void {
    const namespace = after != null ? after.namespace : before != null ? before.namespace : "";
    if (this.snapshotting || !this.podsByNamespace.has(namespace)) return;
    const ids = this.podsByNamespace.get(namespace).values();
    for (let i = 0; i < ids.length; i++) {
      const at = this.table.slot(ids[i]);
      if (at < 0) continue;
      const pod = this.table.podAt(at);
      if ((before != null && before.selects(pod)) || (after != null && after.selects(pod))) this.table.setValueAt(at, this.isolationOf(pod));
    }
  }

  private recomputeAll(): void {
    const all = pods.all();
    this.isolations.clear();
    this.indexBudget = SYNC_INDEXES;
    // Every pod at once (a snapshot's SYNCED): pods of one workload share one
    // label set, so each set is matched against its namespace's policies once.
    const memo = new IsolationMemo();
    for (let i = 0; i < all.length; i++) {
      const at = this.table.slot(all[i].id);
      if (at >= 0) this.table.setValueAt(at, this.isolationOf(this.table.podAt(at), memo));
    }
    this.indexBudget = -1;
  }

  // --- policies ---

  objectUpserted(kind: i32, obj: JValue): void {
    const policy = compilePolicy(obj, this.nextSerial);
    if (policy == null) return;
    this.policyCompiled(policy!, obj);
    if (this.nextSerial >= DENY_FLAG - 1) {
      // Serials start over: a shared isolation keyed by an old serial must not be found for a new policy.
      this.nextSerial = FIRST_SERIAL;
      this.isolations.clear();
    } else this.nextSerial++;
    const before = this.remove(policy.namespace, policy.name);
    let names: Map<string, Policy>;
    if (this.byName.has(policy.namespace)) names = this.byName.get(policy.namespace);
    else {
      names = new Map<string, Policy>();
      this.byName.set(policy.namespace, names);
    }
    names.set(policy.name, policy);
    this.bySerial.set(policy.serial, policy);
    let list: Array<Policy>;
    if (this.byNamespace.has(policy.namespace)) list = this.byNamespace.get(policy.namespace);
    else {
      list = new Array<Policy>(0);
      this.byNamespace.set(policy.namespace, list);
    }
    list.push(policy);
    this.policyChanged(before, policy);
  }

  objectDeleted(kind: i32, obj: JValue): void {
    if (policyKey(obj) == null) return;
    const meta = obj.get("metadata")!;
    const removed = this.remove(meta.str("namespace"), meta.str("name"));
    if (removed != null) this.policyChanged(removed, null);
  }

  private remove(namespace: string, name: string): Policy | null {
    if (!this.byName.has(namespace)) return null;
    const names = this.byName.get(namespace);
    if (!names.has(name)) return null;
    const old = names.get(name);
    names.delete(name);
    if (names.size == 0) this.byName.delete(namespace);
    this.bySerial.delete(old.serial);
    const list = this.byNamespace.get(old.namespace);
    const at = list.indexOf(old);
    if (at >= 0) list.splice(at, 1);
    if (list.length == 0) this.byNamespace.delete(old.namespace);
    return old;
  }

  objectsReset(kind: i32): void {
    // The isolation cache keeps answering with the previous snapshot's
    // policies until SYNCED, so a relist never opens a window of "allow".
    this.byName.clear();
    this.bySerial.clear();
    this.byNamespace.clear();
    this.snapshotting = true;
  }

  objectsSynced(kind: i32): void {
    this.snapshotting = false;
    this.recomputeAll();
  }

  // --- decisions ---

  decide(d: Decision): Verdict {
    const ingress = d.isIngress;
    const subjectId = ingress ? d.dstPodId : d.srcPodId;
    const slot = this.table.slot(subjectId);
    if (slot < 0) {
      d.reason = REASON_NO_SUBJECT;
      return Verdict.Next;
    }
    const iso = this.table.valueAt(slot)!;
    const policies = ingress ? iso.ingress : iso.egress;
    const indexed = ingress ? iso.ingressRules : iso.egressRules;
    // An indexed list is never empty; not reading its length spares a cache line.
    const n = indexed != null ? 1 : policies.length;
    if (n == 0) {
      d.reason = ingress ? REASON_NOT_ISOLATED_INGRESS : REASON_NOT_ISOLATED_EGRESS;
      return Verdict.Next;
    }
    const subject = this.table.podAt(slot);
    const peerPod = this.table.pod(ingress ? d.srcPodId : d.dstPodId);
    // A host-networked peer is the node as far as NetworkPolicy goes: no pod
    // selector matches it and its container ports do not name ports.
    const peer = peerPod != null && !peerPod.hostNetwork ? peerPod : null;
    const dstPod = ingress ? subject : peer;
    const family = d.family;
    const peerAddr = ingress ? d.srcAddr : d.dstAddr;
    const protocol = d.protocol;
    const dstPort = d.dstPort;
    if (indexed != null) {
      // Only the rules whose ports can match, in the order the scan below
      // would try them: the first whose peer matches is the scan's answer.
      const data = indexed!;
      PortIndex.begin(data, protocol, dstPort, dstPod);
      while (true) {
        const flat = PortIndex.next();
        if (flat < 0) break;
        const at = peerIndex(data, flat, subject.namespace, this.peerFor(flagsOf(data, flat), peer), family, peerAddr);
        if (at == NO_PEER_MATCH) continue;
        d.reason = serialOf(data, flat);
        d.rule = packRule(ingress, ruleOf(data, flat), at, PortIndex.portAt);
        return Verdict.Accept;
      }
      d.reason = DENY_FLAG | ((subjectId & 0x3fffffff) << 1) | (ingress ? 1 : 0);
      return Verdict.Deny;
    }
    for (let i = 0; i < n; i++) {
      const p = unchecked(policies[i]);
      const rules = ingress ? p.ingress : p.egress;
      // Named ports still resolve against the real destination pod: scope
      // hides who the peer is, not which port it listens on.
      const seen = this.peerFor(p.flags, peer);
      for (let j = 0, m = rules.length; j < m; j++) {
        if (unchecked(rules[j]).matches(p.namespace, seen, family, peerAddr, protocol, dstPort, dstPod)) {
          d.reason = p.serial;
          d.rule = packRule(ingress, j, matchedAt.peer, matchedAt.port);
          return Verdict.Accept;
        }
      }
    }
    d.reason = DENY_FLAG | ((subjectId & 0x3fffffff) << 1) | (ingress ? 1 : 0);
    return Verdict.Deny;
  }

  explain(reason: u32): string {
    if (reason == REASON_NO_SUBJECT) return "not a pod this stage knows";
    if (reason == REASON_NOT_ISOLATED_INGRESS) return "no NetworkPolicy selects the pod for ingress";
    if (reason == REASON_NOT_ISOLATED_EGRESS) return "no NetworkPolicy selects the pod for egress";
    if ((reason & DENY_FLAG) != 0) {
      const id = (reason & ~DENY_FLAG) >> 1;
      const ingress = (reason & 1) != 0;
      const dir = ingress ? "ingress" : "egress";
      const at = this.table.slot(id);
      if (at < 0) return "no " + dir + " rule matched (the pod is gone)";
      const iso = this.table.valueAt(at)!;
      const list = ingress ? iso.ingress : iso.egress;
      let names = "";
      for (let i = 0; i < list.length && i < EXPLAIN_MAX_POLICIES; i++) names += (i > 0 ? ", " : "") + list[i].key;
      if (list.length > EXPLAIN_MAX_POLICIES) names += " and " + (list.length - EXPLAIN_MAX_POLICIES).toString() + " more";
      return "no " + dir + " rule of " + names + " matched";
    }
    if (this.bySerial.has(reason)) return this.bySerial.get(reason).key;
    return reason >= FIRST_SERIAL ? "a NetworkPolicy since changed or deleted" : "";
  }

  /**
   * An Accept names its policy and the rule, peer and port that matched
   * (`y/allow-web`, `ingress rule 0`, `namespaceSelector team=frontend`,
   * `http`); a Deny is the default deny of the first policy isolating the pod
   * in that direction, as it is when asked.
   */
  attribution(reason: u32, rule: u32): Attribution | null {
    if ((reason & DENY_FLAG) != 0) {
      const id = (reason & ~DENY_FLAG) >> 1;
      const at = this.table.slot(id);
      if (at < 0) return null;
      const iso = this.table.valueAt(at)!;
      const list = (reason & 1) != 0 ? iso.ingress : iso.egress;
      return list.length > 0 ? new Attribution(list[0].key, "default deny") : null;
    }
    // Below FIRST_SERIAL: a Next (no policy decided). An unknown serial: the policy changed since.
    if (reason < FIRST_SERIAL) return null;
    if (!this.bySerial.has(reason)) return super.attribution(reason, rule);
    const p = this.bySerial.get(reason);
    const index = ruleIndex(rule);
    if (index < 0) return new Attribution(p.key);
    const ingress = ruleIsIngress(rule);
    const rules = ingress ? p.ingress : p.egress;
    const dir = ingress ? "ingress" : "egress";
    if (index >= rules.length) return new Attribution(p.key, dir + " rule " + index.toString());
    const r = rules[index];
    return new Attribution(p.key, dir + " rule " + index.toString(), r.describePeer(rulePeer(rule)), r.describePort(rulePort(rule)));
  }

  needsAllTraffic(): bool { return false; }
  // A verdict reads only the two pods' PodInfos, the policies and the record.
  cachesDecisions(): bool { return true; }

  isSubject(pod: PodInfo): bool {
    const at = this.table.slot(pod.id);
    return at >= 0 && this.table.valueAt(at)!.any;
  }
}

function sameList(a: Array<Policy>, b: StaticArray<Policy>): bool {
  if (a.length != b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] != b[i]) return false;
  return true;
}

function toStatic(a: Array<Policy>): StaticArray<Policy> {
  const s = new StaticArray<Policy>(a.length);
  for (let i = 0; i < a.length; i++) s[i] = a[i];
  return s;
}

/** One label set's answer in one namespace (IsolationMemo); the same set in another namespace chains on. */
class MemoEntry {
  constructor(public namespace: string, public isolation: Isolation, public next: MemoEntry | null) {}
}

/**
 * Isolations by the label set object and namespace of a pod, for one pass
 * over pods (recomputeAll). PodInfos share a label set object between pods
 * whose labels the host sent with the same bytes (sdk/podinfo.ts), so the
 * object's address stands for the set; two equal sets that are different
 * objects are only matched twice. The pods hold their sets for the whole
 * pass, so an address cannot be reused by another set meanwhile.
 */
class IsolationMemo {
  private byLabels: Map<usize, MemoEntry> = new Map<usize, MemoEntry>();

  find(labels: Labels, namespace: string): Isolation | null {
    const key = changetype<usize>(labels);
    if (!this.byLabels.has(key)) return null;
    for (let e: MemoEntry | null = this.byLabels.get(key); e != null; e = e.next) {
      if (e.namespace == namespace) return e.isolation;
    }
    return null;
  }

  remember(labels: Labels, namespace: string, isolation: Isolation): void {
    const key = changetype<usize>(labels);
    const next = this.byLabels.has(key) ? this.byLabels.get(key) : null;
    this.byLabels.set(key, new MemoEntry(namespace, isolation, next));
  }
}
