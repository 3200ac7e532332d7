// The rules of one subject's isolating policies in one direction, flattened
// in the order the evaluator walks them (policy by policy, rule by rule) and
// indexed by destination port and protocol (sdk/port-index.ts). Pods isolated
// by the same policies share one set of these (PodTable's Isolation is shared
// by content), so the index costs memory per distinct policy list, not per pod.
//
// The peers of the rules are copied into words after the port tables, in the
// index's own array: a first-time decision then reads one contiguous array
// and the selector memo
// (sdk/selector-memo.ts) instead of chasing a Rule, its peer list and each
// Peer object of every candidate — at ten thousand policies those objects are
// spread over tens of MiB and every chase is a cache miss.
//   per rule (RULE_WORDS): its policy's flags, its first peer's word offset,
//     policy index << 16 | rule index, its policy's serial (the Accept's
//     reason, so an Accept reads no Policy object)
//   per peer (PEER_WORDS): kind (| V4_PREFIX), then
//     podSelector peer: the selector (sdk/peer-words.ts: pointer and serial)
//     namespaceSelector peer: that selector, then the podSelector (0: none)
//     ipBlock: the IPBlock's pointer, then for an IPv4 block its prefix and
//       whether it has exceptions (a packet outside the prefix is decided
//       from the words; one inside without exceptions too)
// Pointers are raw: the selectors and blocks belong to the policies, which the
// Isolation holding this index keeps alive. Word offsets are absolute.

import { PortIndex, PortIndexBuilder, PortMode } from "../port-index";
import { PodInfo, IPBlock, LabelSelector } from "../index";
import { putSelector, hasSelectorAt, selectorAt, putV4Prefix, insideV4Prefix, V4_PREFIX } from "../peer-words";
import { ruleIndexEnabled } from "../rule-index-switch";
import { Policy, PEER_PODS, PEER_NAMESPACES, PEER_IPBLOCK, NO_PEER_MATCH } from "./policy";

/**
 * Fewer rules than this are scanned as they are: for one or two rules the
 * index would cost more memory than the scan costs time.
 */
export const INDEX_MIN_RULES = 4;
const RULE_WORDS = 4;
const PEER_WORDS = 5;

/** Rule `flat`'s policy's flags, in the index `data` of its list. */
@inline export function flagsOf(data: StaticArray<u32>, flat: i32): u32 {
  return unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS]);
}
/** The serial of rule `flat`'s policy (the reason of an Accept by it). */
@inline export function serialOf(data: StaticArray<u32>, flat: i32): u32 {
  return unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS + 3]);
}
/** Rule `flat`'s index among its policy's rules of the direction. */
@inline export function ruleOf(data: StaticArray<u32>, flat: i32): i32 {
  return <i32>(unchecked(data[PortIndex.extra(data) + flat * RULE_WORDS + 2]) & 0xffff);
}

/**
 * Rule.peerIndex over the flat copy: the first peer of rule `flat` that
 * matches (-1: the rule has no peer list), NO_PEER_MATCH when none does.
 * `namespace` is the policy's namespace as the subject PodInfo carries it
 * (every isolating policy is in its subject's namespace), `pod` the far end
 * as the policy sees it (null: an address that is no pod the policy may
 * see). Both are decoded PodInfos, whose namespace strings are the module's
 * one copy of each name (sdk/podinfo.ts interns them), so the names are
 * equal exactly when the strings are the same object.
 */
export function peerIndex(w: StaticArray<u32>, flat: i32, namespace: string, pod: PodInfo | null, family: u8, addr: usize): i32 {
  const at = PortIndex.extra(w) + flat * RULE_WORDS + 1;
  const start = <i32>unchecked(w[at]);
  const end = <i32>unchecked(w[at + RULE_WORDS]);
  if (start == end) return -1;
  // Host-networked pods answer to ipBlocks only (Peer.matches).
  const known = pod != null && !pod.hostNetwork;
  for (let k = start; k < end; k += PEER_WORDS) {
    const head = unchecked(w[k]);
    const kind = <u8>head;
    let hit = false;
    if (kind == PEER_IPBLOCK) {
      if ((head & V4_PREFIX) != 0) {
        hit = insideV4Prefix(w, k + 2, family, addr) && (unchecked(w[k + 4]) == 0 || changetype<IPBlock>(<usize>unchecked(w[k + 1])).contains(family, addr));
      } else hit = changetype<IPBlock>(<usize>unchecked(w[k + 1])).contains(family, addr);
    } else if (known) {
      const p = pod!;
      if (kind == PEER_PODS) {
        hit = changetype<usize>(p.namespace) == changetype<usize>(namespace) && selectorAt(w, k + 1, p.labels);
      } else if (kind == PEER_NAMESPACES) {
        hit = selectorAt(w, k + 1, p.namespaceLabels);
        if (hit && hasSelectorAt(w, k + 3)) hit = selectorAt(w, k + 3, p.labels);
      }
    }
    if (hit) return (k - start) / PEER_WORDS;
  }
  return NO_PEER_MATCH;
}

/**
 * The index over `policies`' rules of one direction, with the rules' words
 * after its port tables; null when there are too few rules to index.
 */
export function indexRules(policies: StaticArray<Policy>, ingress: bool): PortIndex | null {
  if (!ruleIndexEnabled()) return null;
  let total = 0;
  let peers = 0;
  for (let i = 0; i < policies.length; i++) {
    const list = ingress ? policies[i].ingress : policies[i].egress;
    // Positions are kept in 16 bits each.
    if (list.length > 0xffff) return null;
    total += list.length;
    for (let j = 0; j < list.length; j++) peers += list[j].peers.length;
  }
  // Entries keep a rule's position in 24 bits, and the policy's in 16.
  if (total < INDEX_MIN_RULES || total >= 0xffffff || policies.length > 0xffff) return null;
  const b = new PortIndexBuilder();
  for (let i = 0; i < policies.length; i++) {
    const list = ingress ? policies[i].ingress : policies[i].egress;
    // Rule.matches: all-invalid ports match nothing; no ports, every port and protocol.
    for (let j = 0; j < list.length; j++) {
      const r = list[j];
      b.add(r.ports, r.portsInvalid ? PortMode.Nothing : r.ports.length == 0 ? PortMode.Every : PortMode.List);
    }
  }
  // One more rule record closes the last rule's peer range.
  const rulesWords = (total + 1) * RULE_WORDS;
  const x = b.build(rulesWords + peers * PEER_WORDS);
  const w = x.data;
  const base = PortIndex.extra(w);
  let flat = 0;
  let k = base + rulesWords;
  for (let i = 0; i < policies.length; i++) {
    const list = ingress ? policies[i].ingress : policies[i].egress;
    for (let j = 0; j < list.length; j++) {
      const r = list[j];
      const at = base + flat * RULE_WORDS;
      w[at] = policies[i].flags;
      w[at + 1] = <u32>k;
      w[at + 2] = (<u32>i << 16) | <u32>j;
      w[at + 3] = policies[i].serial;
      for (let q = 0; q < r.peers.length; q++) {
        const peer = r.peers[q];
        w[k] = peer.kind;
        if (peer.kind == PEER_PODS) putSelector(w, k + 1, peer.podSelector);
        else if (peer.kind == PEER_NAMESPACES) {
          putSelector(w, k + 1, peer.namespaceSelector);
          putSelector(w, k + 3, peer.podSelector);
        } else if (peer.kind == PEER_IPBLOCK) {
          const block = peer.ipBlock!;
          w[k + 1] = <u32>changetype<usize>(block);
          if (putV4Prefix(w, k + 2, block.cidr)) {
            w[k] |= V4_PREFIX;
            w[k + 4] = block.except.length > 0 ? 1 : 0;
          }
        }
        k += PEER_WORDS;
      }
      flat++;
    }
  }
  w[base + flat * RULE_WORDS + 1] = <u32>k;
  return x;
}
