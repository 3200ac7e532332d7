// The rules of the policies selecting one pod in one direction, in evaluation
// order (policies by priority, then name; rules in list order), flattened and
// indexed by destination port and protocol (sdk/port-index.ts). A first-time
// decision walks only the rules whose ports can match, in that same order, so
// the first that matches is the one the full scan would find; the peer clauses
// are copied into one array of words and matched through the selector memo
// (sdk/selector-memo.ts), so a candidate costs a few reads of contiguous
// memory instead of chasing a Rule, its peers and their selectors. The words
// follow the port tables in the index's own array (PortIndex.extra).
//   per rule (RULE_WORDS): reason code (rule id << 1 | tie), verdict, index in
//     its policy's rules of the direction, first peer's word offset
//   per peer (PEER_WORDS): kind (| V4_PREFIX), then
//     Namespaces: namespace selector; Pods: namespace and pod selector (each
//     as sdk/peer-words.ts keeps one: pointer and serial, so a memo hit
//     reads no selector object); Networks: the CIDR list, and for a list of
//     one IPv4 CIDR its prefix (tested from the words); Nodes, DomainNames:
//     the Peer itself, whose address set changes with Nodes and
//     ResolvedNames (read at decide time)
// Pointers are raw: what they point at belongs to the policies, which the
// PodPolicies holding this index keeps alive.

import { PodInfo, Verdict } from "../../sdk/index";
import { LabelSelector } from "../../sdk/selector";
import { CIDR } from "../../sdk/cidr";
import { putSelector, selectorAt, putV4Prefix, insideV4Prefix, V4_PREFIX } from "../../sdk/peer-words";
import { PortIndex, PortIndexBuilder, PortMode } from "../../sdk/port-index";
import { ruleIndexEnabled } from "../../sdk/rule-index-switch";
import { Policy, Peer, PeerKind, Action } from "./policy";

/** Fewer rules than this are scanned as they are (Rule.matches). */
export const INDEX_MIN_RULES = 4;
const RULE_WORDS = 4;
const PEER_WORDS = 5;
/** Verdict word: the rule fails closed as Deny or Pass and so matches every peer and port. */
const MATCHES_ALL: u32 = 0x100;
/** peerIndex: no peer matches. */
export const NO_PEER: i32 = -2;

@inline export function reasonOf(data: StaticArray<u32>, flat: i32): u32 {
  return unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS]);
}
@inline export function verdictOf(data: StaticArray<u32>, flat: i32): Verdict {
  return <Verdict>(unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS + 1]) & 0xff);
}
@inline export function ruleOf(data: StaticArray<u32>, flat: i32): i32 {
  return <i32>unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS + 2]);
}

/**
 * Rule.matches' peer half for rule `flat` of an index's `data`, whose ports
 * matched: the index of the first matching peer, -1 for a fail-closed rule
 * that matches everything, NO_PEER when no peer matches.
 */
export function peerIndex(w: StaticArray<u32>, flat: i32, other: PodInfo | null, family: u8, addr: usize): i32 {
  const at = PortIndex.extra(w) + flat * RULE_WORDS;
  if ((unchecked(w[at + 1]) & MATCHES_ALL) != 0) return -1;
  const start = <i32>unchecked(w[at + 3]);
  const end = <i32>unchecked(w[at + RULE_WORDS + 3]);
  // Host-networked pods match Namespaces and Pods peers never (Peer.matches).
  const pod = other != null && !other.hostNetwork ? other : null;
  for (let k = start; k < end; k += PEER_WORDS) {
    const head = unchecked(w[k]);
    const kind = <i32>(head & 0xff);
    let hit = false;
    if (kind == PeerKind.Namespaces) {
      hit = pod != null && selectorAt(w, k + 1, pod.namespaceLabels);
    } else if (kind == PeerKind.Pods) {
      hit = pod != null && selectorAt(w, k + 1, pod.namespaceLabels) && selectorAt(w, k + 3, pod.labels);
    } else if (kind == PeerKind.Networks) {
      if ((head & V4_PREFIX) != 0) hit = insideV4Prefix(w, k + 2, family, addr);
      else {
        const nets = changetype<StaticArray<CIDR>>(<usize>unchecked(w[k + 1]));
        for (let i = 0, n = nets.length; i < n; i++) if (unchecked(nets[i]).contains(family, addr)) { hit = true; break; }
      }
    } else {
      hit = changetype<Peer>(<usize>unchecked(w[k + 1])).addresses.contains(family, addr);
    }
    if (hit) return (k - start) / PEER_WORDS;
  }
  return NO_PEER;
}

/**
 * The index over the rules of `list` in one direction (`ties[i]`: policy i
 * shares its priority with a neighbour); null when there are too few rules.
 */
export function indexTierRules(list: StaticArray<Policy>, ties: StaticArray<u8>, egress: bool): PortIndex | null {
  if (!ruleIndexEnabled()) return null;
  let total = 0;
  let peers = 0;
  for (let i = 0; i < list.length; i++) {
    const rules = egress ? list[i].egress : list[i].ingress;
    total += rules.length;
    for (let j = 0; j < rules.length; j++) peers += rules[j].peers.length;
  }
  // Entries keep a rule's position in 24 bits.
  if (total < INDEX_MIN_RULES || total >= 0xffffff) return null;
  const b = new PortIndexBuilder();
  for (let i = 0; i < list.length; i++) {
    const rules = egress ? list[i].egress : list[i].ingress;
    for (let j = 0; j < rules.length; j++) {
      const r = rules[j];
      // Rule.matches: a fail-closed Accept matches nothing, a fail-closed Deny
      // or Pass everything; otherwise the ports (none: every port and protocol).
      b.add(r.ports, r.failClosed ? (r.action == Action.Accept ? PortMode.Nothing : PortMode.Every) : PortMode.List);
    }
  }
  // One more rule record closes the last rule's peer range.
  const rulesWords = (total + 1) * RULE_WORDS;
  const x = b.build(rulesWords + peers * PEER_WORDS);
  const w = x.data;
  const base = PortIndex.extra(w);
  let flat = 0;
  let k = base + rulesWords;
  for (let i = 0; i < list.length; i++) {
    const rules = egress ? list[i].egress : list[i].ingress;
    for (let j = 0; j < rules.length; j++) {
      const r = rules[j];
      const at = base + flat * RULE_WORDS;
      w[at] = (r.id << 1) | <u32>ties[i];
      w[at + 1] = <u32>r.verdict | (r.failClosed ? MATCHES_ALL : 0);
      w[at + 2] = <u32>j;
      w[at + 3] = <u32>k;
      for (let q = 0; q < r.peers.length; q++) {
        const p = r.peers[q];
        w[k] = <u32>p.kind;
        if (p.kind == PeerKind.Namespaces) putSelector(w, k + 1, p.namespaceSelector);
        else if (p.kind == PeerKind.Pods) {
          putSelector(w, k + 1, p.namespaceSelector);
          putSelector(w, k + 3, p.podSelector);
        } else if (p.kind == PeerKind.Networks) {
          w[k + 1] = <u32>changetype<usize>(p.networks);
          if (p.networks.length == 1 && putV4Prefix(w, k + 2, p.networks[0])) w[k] |= V4_PREFIX;
        } else w[k + 1] = <u32>changetype<usize>(p);
        k += PEER_WORDS;
      }
      flat++;
    }
  }
  w[base + flat * RULE_WORDS + 3] = <u32>k;
  return x;
}
