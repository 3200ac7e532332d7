// The compiled form every cluster-wide policy kind (ClusterNetworkPolicy,
// AdminNetworkPolicy, BaselineAdminNetworkPolicy) is turned into when it
// arrives. The decision path only walks these arrays: no JSON, no strings
// built, no allocation.

import { PodInfo, Verdict } from "../../sdk/index";
import { LabelSelector } from "../../sdk/selector";
import { selectorMatches } from "../../sdk/selector-memo";
import { CIDR } from "../../sdk/cidr";
import { PortMatcher } from "../../sdk/ports";
import { describeSelector, describePort, matchedAt } from "../../sdk/attribution";
export { matchedAt } from "../../sdk/attribution";
import { AddressSet, EMPTY_ADDRESS_SET } from "./address-set";
import { DomainPattern } from "./domain-name";

export enum PeerKind { Namespaces = 0, Pods = 1, Nodes = 2, Networks = 3, DomainNames = 4 }

export class Peer {
  kind: PeerKind = PeerKind.Namespaces;
  namespaceSelector: LabelSelector = LabelSelector.everything();
  podSelector: LabelSelector = LabelSelector.everything();
  nodeSelector: LabelSelector = LabelSelector.everything();
  networks: StaticArray<CIDR> = new StaticArray<CIDR>(0);
  domains: StaticArray<DomainPattern> = new StaticArray<DomainPattern>(0);
  /** Nodes and DomainNames peers: the addresses they currently stand for. */
  addresses: AddressSet = EMPTY_ADDRESS_SET;

  /**
   * `other` is the pod at the far end (null when the address is not a known
   * pod); `family`/`addr` its address. Host-networked pods share their node's
   * address, so they never match namespace or pod peers but do match Nodes
   * and Networks peers through that address.
   */
  matches(other: PodInfo | null, family: u8, addr: usize): bool {
    switch (this.kind) {
      case PeerKind.Namespaces:
        return other != null && !other.hostNetwork && selectorMatches(this.namespaceSelector, other.namespaceLabels);
      case PeerKind.Pods:
        return other != null && !other.hostNetwork
          && selectorMatches(this.namespaceSelector, other.namespaceLabels)
          && selectorMatches(this.podSelector, other.labels);
      case PeerKind.Networks: {
        const nets = this.networks;
        for (let i = 0, n = nets.length; i < n; i++) if (unchecked(nets[i]).contains(family, addr)) return true;
        return false;
      }
      default:
        return this.addresses.contains(family, addr);
    }
  }

  /** The peer as attribution names it: `namespaces team=x`, `pods team=x + app=web`, `networks 10.0.0.0/8`. */
  describe(): string {
    switch (this.kind) {
      case PeerKind.Namespaces: return "namespaces " + describeSelector(this.namespaceSelector);
      case PeerKind.Pods: return "pods " + describeSelector(this.namespaceSelector) + " + " + describeSelector(this.podSelector);
      case PeerKind.Nodes: return "nodes " + describeSelector(this.nodeSelector);
      case PeerKind.Networks: {
        let text = "networks ";
        for (let i = 0; i < this.networks.length; i++) text += (i > 0 ? "," : "") + this.networks[i].text;
        return text;
      }
      default: {
        let text = "domainNames ";
        for (let i = 0; i < this.domains.length; i++) text += (i > 0 ? "," : "") + this.domains[i].text;
        return text;
      }
    }
  }
}


export enum Action { Accept = 0, Deny = 1, Pass = 2 }

export class Rule {
  /** Unique among the rules this instance has compiled; reason codes refer to it. */
  id: u32 = 0;
  action: Action = Action.Deny;
  peers: StaticArray<Peer> = new StaticArray<Peer>(0);
  /** Empty: every port and protocol. */
  ports: StaticArray<PortMatcher> = new StaticArray<PortMatcher>(0);
  /**
   * Set when part of the rule could not be understood (an unknown or empty
   * peer, an unknown port entry or action). Upstream's "fail closed": an
   * Accept/Allow rule then matches nothing; a Deny or Pass rule becomes
   * "deny everything", ports and other peers notwithstanding.
   */
  failClosed: bool = false;
  /** What made it fail closed, for explanations. */
  problem: string = "";
  /** The rule as walkthroughs name it: its name, or `policy, ingress rule N` when unnamed. */
  label: string = "";
  /** The rule as attribution names it: its name, or `ingress rule N` / `egress rule N` when unnamed. */
  ruleName: string = "";

  get verdict(): Verdict {
    if (this.failClosed) return Verdict.Deny;
    // Pass hands the packet to the next tier; the engine treats it as Next.
    return this.action == Action.Accept ? Verdict.Accept : this.action == Action.Deny ? Verdict.Deny : Verdict.Pass;
  }

  /** `dst` is the destination pod, which resolves named ports. */
  matches(other: PodInfo | null, family: u8, addr: usize, protocol: u8, dstPort: u16, dst: PodInfo | null): bool {
    if (this.failClosed) return this.action != Action.Accept && matchedAt.set(-1, -1);
    const ports = this.ports;
    let port = -1;
    if (ports.length > 0) {
      for (let i = 0, n = ports.length; i < n; i++) {
        if (unchecked(ports[i]).matches(protocol, dstPort, dst)) { port = i; break; }
      }
      if (port < 0) return false;
    }
    const peers = this.peers;
    for (let i = 0, n = peers.length; i < n; i++) {
      if (unchecked(peers[i]).matches(other, family, addr)) return matchedAt.set(i, port);
    }
    return false;
  }

  describePeer(peer: i32): string {
    if (this.failClosed) return "fails closed: " + this.problem;
    return peer >= 0 && peer < this.peers.length ? this.peers[peer].describe() : "";
  }

  describePort(port: i32): string {
    if (port < 0) return this.ports.length == 0 && !this.failClosed ? "any port" : "";
    return port < this.ports.length ? describePort(this.ports[port]) : "";
  }
}

export class Policy {
  /** The kind as users write it, for messages: "ClusterNetworkPolicy". */
  kindName: string = "";
  name: string = "";
  priority: i32 = 0;
  /** False when the subject could not be understood: the policy then selects no pod. */
  subjectValid: bool = true;
  /** Subject `namespaces` selector, or the namespace half of subject `pods`. */
  subjectNamespaces: LabelSelector = LabelSelector.everything();
  /** Subject `pods` pod selector; null for a `namespaces` subject. */
  subjectPods: LabelSelector | null = null;
  ingress: StaticArray<Rule> = new StaticArray<Rule>(0);
  egress: StaticArray<Rule> = new StaticArray<Rule>(0);
  /** The number of this policy's first rule in the tier index of each direction (tier-index.ts), set when it is built. */
  ingressFlat: i32 = 0;
  egressFlat: i32 = 0;

  /** Host-networked pods are never subjects. */
  selects(pod: PodInfo): bool {
    if (!this.subjectValid || pod.hostNetwork) return false;
    if (!this.subjectNamespaces.matches(pod.namespaceLabels)) return false;
    const pods = this.subjectPods;
    return pods == null || pods.matches(pod.labels);
  }
}

/** Evaluation order inside a tier: ascending priority, then name so that ties are deterministic. */
export function comparePolicies(a: Policy, b: Policy): i32 {
  if (a.priority != b.priority) return a.priority < b.priority ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
