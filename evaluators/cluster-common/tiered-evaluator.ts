// The evaluation engine shared by the cluster-network-policy and
// admin-network-policy modules. One instance evaluates one tier: the policies
// selecting the subject pod, by ascending priority (name breaks ties), each
// policy's rules in order; the first rule whose peer and port match decides.
// Accept -> Accept, Deny -> Deny, Pass -> Pass (a Next that names its rule),
// no match -> Next.
//
// Everything that depends only on cluster state (which policies select a pod,
// which addresses a nodes/domainNames peer stands for) is computed when that
// state changes, so a decision is a cache lookup and a walk over arrays.

import { Evaluator, Decision, Verdict, PodInfo, JValue, JKind, pods, log, Attribution, packRule, rulePeer, rulePort } from "../../sdk/index";
import { PodTable } from "../../sdk/pod-table";
import { Policy, Rule, Peer, PeerKind, comparePolicies, matchedAt } from "./policy";
import { KindStore } from "./kind-store";
import { NodeEntry, ResolvedName } from "./cluster-objects";
import { AddressSetBuilder } from "./address-set";
import { indexTierRules, peerIndex, reasonOf, verdictOf, ruleOf, NO_PEER } from "./rule-index";
import { PortIndex } from "../../sdk/port-index";
import { ruleIndexEnabled } from "../../sdk/rule-index-switch";
import { SubjectIndex } from "./subject-index";
import { PodPolicies, PolicyListTable } from "./policy-lists";
import { TierIndex } from "./tier-index";

// Reason codes are (rule id << 1) | tie, where tie says the deciding policy
// shared its priority with another policy selecting the pod.

/** Distinct policy lists kept for sharing; past the bound the table starts over. */
const SHARED_LISTS = 4096;
/** Pairs of label sets whose list is remembered; past the bound the map starts over. */
const LABEL_SETS = 16384;

const NO_POLICIES = new PodPolicies();

/**
 * Subject matches a full rebuild may spend filling every pod's list at once:
 * pods x policies without the subject index, the pods' candidates with it.
 */
const EAGER_FILL_LIMIT: i64 = 1_000_000;

function contains(list: StaticArray<Policy>, p: Policy): bool {
  for (let i = 0; i < list.length; i++) if (list[i] == p) return true;
  return false;
}

/** `list` without `remove`, with `insert` (if any) at its place in evaluation order. */
function replaced(list: StaticArray<Policy>, remove: Policy | null, insert: Policy | null): StaticArray<Policy> {
  const out = new Array<Policy>(0);
  let inserted = insert == null;
  for (let i = 0; i < list.length; i++) {
    const p = list[i];
    if (remove != null && p == remove) continue;
    if (!inserted && comparePolicies(insert!, p) < 0) { out.push(insert!); inserted = true; }
    out.push(p);
  }
  if (!inserted) out.push(insert!);
  return StaticArray.fromArray<Policy>(out);
}

class RuleInfo {
  constructor(public text: string, public policy: string, public priority: i32, public rule: Rule) {}
}

function tieFlags(list: StaticArray<Policy>): StaticArray<u8> {
  const n = list.length;
  const out = new StaticArray<u8>(n);
  for (let i = 0; i < n; i++) {
    const p = list[i].priority;
    if ((i > 0 && list[i - 1].priority == p) || (i + 1 < n && list[i + 1].priority == p)) out[i] = 1;
  }
  return out;
}

export abstract class TieredPolicyEvaluator extends Evaluator {
  /** "Admin" or "Baseline" once configured. */
  tier: string = "";
  /** Stores for the policy kinds, indexed by kind; the slots of the other kinds are never used. */
  protected policyStores: KindStore<Policy>[] = [];
  protected nodes: KindStore<NodeEntry> = new KindStore<NodeEntry>();
  protected names: KindStore<ResolvedName> = new KindStore<ResolvedName>();

  private active: StaticArray<Policy> = new StaticArray<Policy>(0);
  /** `active` by what the subjects select (null: the unindexed evaluation, `ruleIndex: false`). */
  private subjects: SubjectIndex | null = null;
  /** Subject matches the last policiesFor ran. */
  private lastMatches: i32 = 0;
  /**
   * The lists computed since the policies last changed, by the pod's label
   * set and its namespace's (Labels.id, never reused; a Labels object is
   * immutable): which policies select a pod depends on nothing else, and the
   * pods of one workload share both sets, so a rebuild matches each workload
   * once rather than each pod. With the subject index only.
   */
  private byLabels: Map<u64, PodPolicies> = new Map<u64, PodPolicies>();
  private nodePeers: Peer[] = [];
  private domainPeers: Peer[] = [];
  private ruleInfo: Map<u32, RuleInfo> = new Map<u32, RuleInfo>();
  private warnedTies: Set<string> = new Set<string>();
  /** Every pod with its policy list (null: not computed yet). */
  private table: PodTable<PodPolicies> = new PodTable<PodPolicies>();
  private shared: PolicyListTable = new PolicyListTable(SHARED_LISTS);
  private ready: bool = false;
  /**
   * The tier's rules indexed once per direction (tier-index.ts; null: too
   * many rules, too few, or `ruleIndex: false`), rebuilt with the sorted
   * policy list; `tierGen` counts the rebuilds, and a list's bits are valid
   * while its tierGen is this one (stamp).
   */
  private tierEgress: TierIndex | null = null;
  private tierIngress: TierIndex | null = null;
  private tierGen: u32 = 0;
  /** Every pod's policy list was filled at the last rebuild (and is kept filled since). */
  private eager: bool = false;

  /** How many kinds module.json lists. */
  protected abstract kindCount(): i32;
  protected abstract nodeKind(): i32;
  protected abstract resolvedNameKind(): i32;
  /** Compiles a policy object of `kind`; null when this instance's tier does not evaluate it. */
  protected abstract compile(kind: i32, obj: JValue): Policy | null;
  /** How log lines name this instance: "ClusterNetworkPolicy Admin tier". */
  protected abstract instanceName(): string;

  private isPolicyKind(kind: i32): bool {
    return kind >= 0 && kind < this.kindCount() && kind != this.nodeKind() && kind != this.resolvedNameKind();
  }

  private policyStore(kind: i32): KindStore<Policy> {
    while (this.policyStores.length <= kind) this.policyStores.push(new KindStore<Policy>());
    return this.policyStores[kind];
  }

  configure(config: JValue): string | null {
    const usage = "expected {\"tier\": \"Admin\"} or {\"tier\": \"Baseline\"}";
    if (config.kind != JKind.Object) return "the stage config must be a JSON object: " + usage;
    const keys = config.objectKeys;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] != "tier") return "unknown config key \"" + keys[i] + "\": " + usage;
    }
    const t = config.get("tier");
    if (t == null || t.kind != JKind.String) return "config.tier is missing: " + usage;
    if (t.s != "Admin" && t.s != "Baseline") return "config.tier \"" + t.s + "\" is not a tier: " + usage;
    this.tier = t.s;
    for (let k = 0; k < this.kindCount(); k++) if (this.isPolicyKind(k)) this.policyStore(k);
    return null;
  }

  // ---- object delivery ----

  objectsReset(kind: i32): void {
    if (kind == this.nodeKind()) this.nodes.reset();
    else if (kind == this.resolvedNameKind()) this.names.reset();
    else if (this.isPolicyKind(kind)) this.policyStore(kind).reset();
  }

  objectUpserted(kind: i32, obj: JValue): void {
    if (kind == this.nodeKind()) {
      const n = NodeEntry.parse(obj);
      this.nodes.upsert(n.name, n);
      if (this.nodes.applyingLive) this.refreshNodePeers();
    } else if (kind == this.resolvedNameKind()) {
      const r = ResolvedName.parse(obj);
      this.names.upsert(r.name, r);
      if (this.names.applyingLive) this.refreshDomainPeers(r.name);
    } else if (this.isPolicyKind(kind)) {
      const store = this.policyStore(kind);
      const meta = obj.get("metadata");
      const name = meta != null ? meta.str("name") : "";
      const previous = store.applyingLive ? store.get(name) : null;
      const p = this.compile(kind, obj);
      if (p == null) store.remove(name); else store.upsert(name, p);
      if (store.applyingLive) this.policyChanged(previous, p);
    }
  }

  objectDeleted(kind: i32, obj: JValue): void {
    const meta = obj.get("metadata");
    const name = meta != null ? meta.str("name") : "";
    if (kind == this.nodeKind()) {
      this.nodes.remove(name);
      if (this.nodes.applyingLive) this.refreshNodePeers();
    } else if (kind == this.resolvedNameKind()) {
      const r = ResolvedName.parse(obj);
      this.names.remove(r.name);
      if (this.names.applyingLive) this.refreshDomainPeers(r.name);
    } else if (this.isPolicyKind(kind)) {
      const store = this.policyStore(kind);
      const previous = store.applyingLive ? store.get(name) : null;
      store.remove(name);
      if (store.applyingLive) this.policyChanged(previous, null);
    }
  }

  objectsSynced(kind: i32): void {
    if (kind == this.nodeKind()) { this.nodes.synced(); this.refreshNodePeers(); }
    else if (kind == this.resolvedNameKind()) { this.names.synced(); this.refreshDomainPeers(null); }
    else if (this.isPolicyKind(kind)) { this.policyStore(kind).synced(); this.rebuild(); return; }
    // The last kind to finish its first snapshot makes the instance ready.
    if (!this.ready && this.allSynced()) this.rebuild();
  }

  private allSynced(): bool {
    if (!this.nodes.everSynced || !this.names.everSynced) return false;
    for (let k = 0; k < this.kindCount(); k++) {
      if (this.isPolicyKind(k) && !this.policyStore(k).everSynced) return false;
    }
    return true;
  }

  podUpserted(pod: PodInfo, previous: PodInfo | null): void {
    this.table.set(pod, this.ready ? this.stamp(this.policiesFor(pod, true)) : null);
  }

  podDeleted(pod: PodInfo): void {
    this.table.delete(pod.id);
  }

  // ---- derived state ----

  /** Recomputes everything derived from the set of policies, every pod's list included. Off the packet path. */
  private rebuild(): void {
    this.refreshActive();
    const wasReady = this.ready;
    this.ready = this.allSynced();
    if (!this.ready) return;
    if (!wasReady) log.info(this.instanceName() + ": " + this.active.length.toString() + " policies in effect");
    this.shared = new PolicyListTable(SHARED_LISTS);
    const all = pods.all();
    // Filling every pod's list now keeps the first decision for each pod free
    // of allocation (and lets the host skip traffic no policy's subject is
    // part of), but costs one subject match per pod and candidate policy in
    // one call: pods x policies without the subject index. Past a bound that
    // fuel would not cover, the pods not filled yet fill in on first use.
    if (this.subjects == null && <i64>all.length * <i64>this.active.length > EAGER_FILL_LIMIT) {
      this.fillLazily(all, 0);
      return;
    }
    this.eager = true;
    let spent: i64 = 0;
    for (let i = 0; i < all.length; i++) {
      if (spent > EAGER_FILL_LIMIT) { this.fillLazily(all, i); return; }
      this.table.set(all[i], this.stamp(this.policiesFor(all[i], true)));
      spent += this.lastMatches;
    }
  }

  /** Pods from `from` on get their list at their first decision. */
  private fillLazily(all: PodInfo[], from: i32): void {
    this.eager = false;
    for (let i = from; i < all.length; i++) this.table.set(all[i], null);
    log.info(this.instanceName() + ": " + all.length.toString() + " pods x " + this.active.length.toString()
      + " policies: computing the policy lists of " + (all.length - from).toString() + " pods at their first decision instead of now");
  }

  /**
   * One policy was added, changed or removed while live: only the pods whose
   * lists held the old version or are selected by the new one are touched,
   * so a change costs one selector match per pod rather than one per pod and
   * policy.
   */
  private policyChanged(previous: Policy | null, next: Policy | null): void {
    if (previous == null && next == null) return;
    if (!this.ready) { this.rebuild(); return; }
    this.refreshActive();
    const all = pods.all();
    for (let i = 0; i < all.length; i++) {
      const pod = all[i];
      // A pod without a list computes it, from the new set, at its first decision.
      const slot = this.table.slot(pod.id);
      if (slot < 0) continue;
      const known = this.table.valueAt(slot);
      if (known == null) continue;
      const pp = known!;
      const held = previous != null && (contains(pp.egress, previous) || contains(pp.ingress, previous));
      const selected = next != null && next.selects(pod);
      // Its list is unchanged, but the tier's rules were numbered anew.
      if (!held && !selected) { this.stamp(pp); continue; }
      const egress = replaced(pp.egress, previous, selected && next!.egress.length > 0 ? next : null);
      const ingress = replaced(pp.ingress, previous, selected && next!.ingress.length > 0 ? next : null);
      this.table.setValueAt(slot, this.stamp(this.podPolicies(pod, egress, ingress, true)));
    }
  }

  /** The sorted policy list and what hangs off it: rule texts, nodes/domainNames peers and their addresses. */
  private refreshActive(): void {
    const list = new Array<Policy>(0);
    for (let k = 0; k < this.policyStores.length; k++) {
      if (!this.isPolicyKind(k)) continue;
      const vals = this.policyStores[k].values();
      for (let i = 0; i < vals.length; i++) list.push(vals[i]);
    }
    list.sort(comparePolicies);
    this.active = StaticArray.fromArray<Policy>(list);
    this.subjects = ruleIndexEnabled() ? new SubjectIndex(this.active) : null;
    // Every list's bits are of the previous numbering from here on (stamp).
    this.tierGen++;
    // A list stamped 2^32 generations ago must not pass for current: after
    // a wrap no list kept for sharing is reused (the pods' own are restamped
    // by every change and every rebuild).
    if (this.tierGen == 0) { this.tierGen = 1; this.shared = new PolicyListTable(SHARED_LISTS); }
    this.tierEgress = ruleIndexEnabled() ? TierIndex.build(this.active, true, this.tierGen) : null;
    this.tierIngress = ruleIndexEnabled() ? TierIndex.build(this.active, false, this.tierGen) : null;
    this.byLabels.clear();

    this.ruleInfo.clear();
    this.nodePeers = [];
    this.domainPeers = [];
    for (let i = 0; i < list.length; i++) {
      const p = list[i];
      this.collect(p, p.ingress);
      this.collect(p, p.egress);
    }
    this.refreshNodePeers();
    this.refreshDomainPeers(null);
  }

  private collect(p: Policy, rules: StaticArray<Rule>): void {
    for (let r = 0; r < rules.length; r++) {
      const rule = rules[r];
      let text = rule.label;
      if (rule.failClosed) text += " (fails closed: " + rule.problem + ")";
      this.ruleInfo.set(rule.id, new RuleInfo(text, p.name, p.priority, rule));
      const peers = rule.peers;
      for (let i = 0; i < peers.length; i++) {
        if (peers[i].kind == PeerKind.Nodes) this.nodePeers.push(peers[i]);
        else if (peers[i].kind == PeerKind.DomainNames) this.domainPeers.push(peers[i]);
      }
    }
  }

  private refreshNodePeers(): void {
    if (this.nodePeers.length == 0) return;
    const nodes = this.nodes.values();
    for (let i = 0; i < this.nodePeers.length; i++) {
      const peer = this.nodePeers[i];
      const b = new AddressSetBuilder();
      for (let j = 0; j < nodes.length; j++) {
        if (!peer.nodeSelector.matches(nodes[j].labels)) continue;
        const addrs = nodes[j].addresses;
        for (let k = 0; k < addrs.length; k++) b.add(addrs[k]);
      }
      peer.addresses = b.build();
    }
  }

  /** `changed`: the one name that changed (only peers matching it are refreshed); null for all. */
  private refreshDomainPeers(changed: string | null): void {
    if (this.domainPeers.length == 0) return;
    let names: ResolvedName[] | null = null;
    for (let i = 0; i < this.domainPeers.length; i++) {
      const peer = this.domainPeers[i];
      if (changed != null && !patternsMatch(peer, changed)) continue;
      if (names == null) names = this.names.values();
      const b = new AddressSetBuilder();
      for (let j = 0; j < names.length; j++) {
        if (!patternsMatch(peer, names[j].name)) continue;
        const addrs = names[j].addresses;
        for (let k = 0; k < addrs.length; k++) b.add(addrs[k]);
      }
      peer.addresses = b.build();
    }
  }

  /** policiesFor's lists while it walks the policies: reused, since a rebuild walks every pod and most pods share a known list. */
  private egScratch: Policy[] = [];
  private ingScratch: Policy[] = [];

  private policiesFor(pod: PodInfo, warnTies: bool): PodPolicies {
    const eg = this.egScratch;
    const ing = this.ingScratch;
    eg.length = 0;
    ing.length = 0;
    const active = this.active;
    const index = this.subjects;
    if (index != null) {
      this.lastMatches = 0;
      if (pod.hostNetwork) return NO_POLICIES;
      const labelsKey = pod.labels.id == 0 || pod.namespaceLabels.id == 0 ? 0
        : (<u64>pod.labels.id << 32) | <u64>pod.namespaceLabels.id;
      if (labelsKey != 0 && this.byLabels.has(labelsKey)) return this.byLabels.get(labelsKey);
      // Only the policies whose subject can select the pod, in evaluation order.
      const candidates = index.candidates(pod);
      this.lastMatches = candidates.length;
      for (let i = 0, n = candidates.length; i < n; i++) {
        const p = unchecked(active[unchecked(candidates[i])]);
        if (!p.selects(pod)) continue;
        if (p.egress.length > 0) eg.push(p);
        if (p.ingress.length > 0) ing.push(p);
      }
      const pp = this.listFor(pod, warnTies);
      if (labelsKey != 0) {
        if (this.byLabels.size >= LABEL_SETS) this.byLabels.clear();
        this.byLabels.set(labelsKey, pp);
      }
      return pp;
    } else {
      this.lastMatches = active.length;
      for (let i = 0; i < active.length; i++) {
        const p = active[i];
        if (!p.selects(pod)) continue;
        if (p.egress.length > 0) eg.push(p);
        if (p.ingress.length > 0) ing.push(p);
      }
    }
    return this.listFor(pod, warnTies);
  }

  /** The shared entry for the lists policiesFor collected. */
  private listFor(pod: PodInfo, warnTies: bool): PodPolicies {
    const eg = this.egScratch;
    const ing = this.ingScratch;
    if (eg.length == 0 && ing.length == 0) return NO_POLICIES;
    // A known list is shared as it is (podPolicies): the lists are copied only
    // for a new one. Its ties were warned about when it was new (warnedTies
    // says each pair of policies once, whichever pod it names).
    const known = this.shared.get<Policy[]>(PolicyListTable.key<Policy[]>(eg, ing), eg, ing);
    if (known != null) return known;
    return this.podPolicies(pod, StaticArray.fromArray<Policy>(eg), StaticArray.fromArray<Policy>(ing), warnTies);
  }

  private podPolicies(pod: PodInfo, egress: StaticArray<Policy>, ingress: StaticArray<Policy>, warnTies: bool): PodPolicies {
    // Most pods are selected by no cluster-wide policy: they share one empty entry.
    if (egress.length == 0 && ingress.length == 0) return NO_POLICIES;
    const key = PolicyListTable.key<StaticArray<Policy>>(egress, ingress);
    const known = this.shared.get<StaticArray<Policy>>(key, egress, ingress);
    if (known != null) return known;
    if (warnTies) {
      this.warnTies<StaticArray<Policy>>(pod, egress, "egress");
      this.warnTies<StaticArray<Policy>>(pod, ingress, "ingress");
    }
    const pp = new PodPolicies();
    pp.egress = egress;
    pp.ingress = ingress;
    pp.egressTie = tieFlags(egress);
    pp.ingressTie = tieFlags(ingress);
    this.shared.add(key, pp);
    return pp;
  }

  /**
   * Makes `pp` ready for decisions with the tier's current rule numbering:
   * its bits over the tier index of each direction that has one, else its
   * own per-list index (built when missing). Every list the pod table hands
   * to decide passes through here after the policies last changed.
   */
  private stamp(pp: PodPolicies): PodPolicies {
    if (pp == NO_POLICIES || pp.tierGen == this.tierGen) return pp;
    const eg = this.tierEgress;
    const ing = this.tierIngress;
    if (eg != null) pp.egressBits = eg.bitsFor(pp.egress, pp.egressTie, true, pp.egressBits);
    else {
      pp.egressBits = null;
      if (pp.egressIndex == null) {
        pp.egressIndex = indexTierRules(pp.egress, pp.egressTie, true);
        if (pp.egressIndex != null) pp.egressRules = pp.egressIndex!.data;
      }
    }
    if (ing != null) pp.ingressBits = ing.bitsFor(pp.ingress, pp.ingressTie, false, pp.ingressBits);
    else {
      pp.ingressBits = null;
      if (pp.ingressIndex == null) {
        pp.ingressIndex = indexTierRules(pp.ingress, pp.ingressTie, false);
        if (pp.ingressIndex != null) pp.ingressRules = pp.ingressIndex!.data;
      }
    }
    pp.tierGen = this.tierGen;
    return pp;
  }

  private warnTies<L>(pod: PodInfo, list: L, dir: string): void {
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1];
      const b = list[i];
      if (a.priority != b.priority) continue;
      const key = dir + "|" + a.name + "|" + b.name;
      if (this.warnedTies.has(key)) continue;
      this.warnedTies.add(key);
      log.warn(this.instanceName() + ": " + a.kindName + " \"" + a.name + "\" and \"" + b.name + "\" both have priority "
        + a.priority.toString() + " and select pod " + pod.namespace + "/" + pod.name + " (" + dir + "); \"" + a.name
        + "\" is evaluated first because its name sorts first. Give them distinct priorities to make the order explicit.");
    }
  }

  // ---- decisions ----

  // Subjects let the host skip records between pods no policy of this tier
  // selects (most traffic, when the tier is used sparingly; all of it when
  // the tier is empty). Only once every pod's list is known: before the first
  // sync, or when lists fill in lazily, naming subjects would mean computing
  // every list in one call.
  needsAllTraffic(): bool { return !this.ready || !this.eager; }
  isSubject(pod: PodInfo): bool {
    const slot = this.table.slot(pod.id);
    if (slot < 0) return true;
    const pp = this.table.valueAt(slot);
    return pp == null || pp != NO_POLICIES;
  }

  // A verdict reads only the two pods' PodInfos, the policies, nodes and
  // resolved names (all delivered objects) and the record.
  cachesDecisions(): bool { return true; }

  decide(d: Decision): Verdict {
    const egress = d.isEgress;
    const subjectId = egress ? d.srcPodId : d.dstPodId;
    if (subjectId == 0) return Verdict.Next;
    const family = d.family;
    // Hairpin, as network-policy-api defines it (PR #390, site-src/api-overview.md;
    // issue #343): these policies are enforced logically outside the pod's
    // network namespace, so a pod connecting to its own pod IP is not subject
    // to them, but a pod reaching itself through a Service IP that the Service
    // proxy load-balances back to it is. AdminNetworkPolicy and
    // BaselineAdminNetworkPolicy follow the same rule. docs/semantics.md, "Hairpin".
    // No reason code: walkthroughs show a Next with a reason as a Pass.
    if (!d.isServiceHairpin && (d.srcPodId == d.dstPodId || sameAddress(family, d.srcAddr, d.dstAddr))) return Verdict.Next;
    const slot = this.table.slot(subjectId);
    if (slot < 0) return Verdict.Next;
    const subject = this.table.podAt(slot);
    let known = this.table.valueAt(slot);
    if (known == null) {
      // Only when lists fill in lazily (subject matches past EAGER_FILL_LIMIT at the last rebuild).
      known = this.stamp(this.policiesFor(subject, false));
      this.table.setValueAt(slot, known);
    }
    const pp = known!;
    const list = egress ? pp.egress : pp.ingress;
    const n = list.length;
    if (n == 0) return Verdict.Next;
    const ties = egress ? pp.egressTie : pp.ingressTie;
    const dst = egress ? this.table.pod(d.dstPodId) : subject;
    const other = egress ? dst : this.table.pod(d.srcPodId);
    const addr = egress ? d.dstAddr : d.srcAddr;
    const protocol = d.protocol;
    const port = d.dstPort;
    const tier = egress ? this.tierEgress : this.tierIngress;
    if (tier != null) {
      // The tier's one index: the list's candidates are its bits ANDed with
      // the port lists' (tier-index.ts), lowest rule number first.
      const t = tier!;
      const mine = (egress ? pp.egressBits : pp.ingressBits)!;
      const words = t.words;
      t.begin(protocol, port, dst);
      const sure = t.sure;
      const bits = t.bits;
      const data = t.data;
      for (let w = 0; w < words; w++) {
        const s = unchecked(sure[w]);
        let c = (s | unchecked(bits[words + w])) & unchecked(mine[w]);
        while (c != 0) {
          const b = <i32>ctz(c);
          c &= c - 1;
          const flat = (w << 6) | b;
          const certain = ((s >> <u64>b) & 1) != 0;
          // A rule only in the other-protocol list: its own matchers decide.
          if (!certain && t.firstPort(flat, protocol, port, dst) < 0) continue;
          const peer = peerIndex(data, flat, other, family, addr);
          if (peer == NO_PEER) continue;
          d.reason = reasonOf(data, flat) | <u32>((unchecked(mine[words + w]) >> <u64>b) & 1);
          const at = t.portless(flat) ? -1 : t.firstPort(flat, protocol, port, dst);
          d.rule = packRule(!egress, ruleOf(data, flat), peer, at);
          return verdictOf(data, flat);
        }
      }
      return Verdict.Next;
    }
    const indexed = egress ? pp.egressRules : pp.ingressRules;
    if (indexed != null) {
      // Only the rules whose ports can match, in evaluation order: the first
      // whose peer matches is the one the scan below would find.
      const data = indexed!;
      PortIndex.begin(data, protocol, port, dst);
      while (true) {
        const flat = PortIndex.next();
        if (flat < 0) break;
        const peer = peerIndex(data, flat, other, family, addr);
        if (peer == NO_PEER) continue;
        d.reason = reasonOf(data, flat);
        d.rule = packRule(!egress, ruleOf(data, flat), peer, PortIndex.portAt);
        return verdictOf(data, flat);
      }
      return Verdict.Next;
    }
    for (let i = 0; i < n; i++) {
      const p = unchecked(list[i]);
      const rules = egress ? p.egress : p.ingress;
      for (let r = 0, m = rules.length; r < m; r++) {
        const rule = unchecked(rules[r]);
        if (!rule.matches(other, family, addr, protocol, port, dst)) continue;
        d.reason = (rule.id << 1) | <u32>unchecked(ties[i]);
        d.rule = packRule(!egress, r, matchedAt.peer, matchedAt.port);
        return rule.verdict;
      }
    }
    return Verdict.Next;
  }

  /** The policy's name, the rule's name (or `ingress rule N`), and the peer and port entries that matched. */
  attribution(reason: u32, rule: u32): Attribution | null {
    const id = reason >> 1;
    if (reason == 0 || !this.ruleInfo.has(id)) return null;
    const info = this.ruleInfo.get(id);
    const r = info.rule;
    return new Attribution(info.policy, r.ruleName, r.describePeer(rulePeer(rule)), r.describePort(rulePort(rule)));
  }

  explain(reason: u32): string {
    const id = reason >> 1;
    if (!this.ruleInfo.has(id)) return "a rule that has since been changed or removed";
    const info = this.ruleInfo.get(id);
    if ((reason & 1) == 0) return info.text;
    return info.text + "; note: policy \"" + info.policy + "\" shares priority " + info.priority.toString()
      + " with another policy selecting this pod, and the tie was broken by name";
  }
}

function patternsMatch(peer: Peer, name: string): bool {
  const doms = peer.domains;
  for (let i = 0; i < doms.length; i++) if (doms[i].matches(name)) return true;
  return false;
}

function sameAddress(family: u8, a: usize, b: usize): bool {
  if (family == 4) return load<u32>(a) == load<u32>(b);
  return load<u64>(a) == load<u64>(b) && load<u64>(a + 8) == load<u64>(b + 8);
}
