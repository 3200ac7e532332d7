// The one contract every part of the host is written against: the object model
// that sources feed, the PodInfo and packet shapes the pipeline consumes, and
// the verdicts it returns. Sources, the dataplane, the admin API and the CLI
// meet only here, so any of them can be swapped without touching the others.

/** A Kubernetes object as sources deliver it (JSON shape, `managedFields` trimmed). */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    [key: string]: unknown;
  };
  spec?: any;
  status?: any;
  [key: string]: unknown;
}

/** `apiVersion/Kind`, e.g. `v1/Pod`, `networking.k8s.io/v1/NetworkPolicy`: how the ABI names a kind. */
export type KindKey = string;

export function kindKeyOf(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): KindKey {
  return `${obj.apiVersion}/${obj.kind}`;
}

export const Kinds = {
  Pod: 'v1/Pod',
  Namespace: 'v1/Namespace',
  Node: 'v1/Node',
  Service: 'v1/Service',
  EndpointSlice: 'discovery.k8s.io/v1/EndpointSlice',
  NetworkPolicy: 'networking.k8s.io/v1/NetworkPolicy',
  ClusterNetworkPolicy: 'policy.networking.k8s.io/v1alpha2/ClusterNetworkPolicy',
  AdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1/AdminNetworkPolicy',
  BaselineAdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1/BaselineAdminNetworkPolicy',
  ResolvedName: 'dns.kwp.io/v1/ResolvedName',
} as const;

/**
 * The kinds the built-in evaluators read, in the order a source delivers them
 * (namespaces and nodes before the pods whose PodInfo they label; Services
 * and EndpointSlices for DNS names and ClusterIP walkthroughs): what the
 * Kubernetes source watches unless told otherwise, and what a manifest
 * source always delivers, found or not.
 */
export const CLUSTER_INPUT_KINDS: readonly KindKey[] = [
  Kinds.Namespace,
  Kinds.Node,
  Kinds.Pod,
  Kinds.Service,
  Kinds.EndpointSlice,
  Kinds.NetworkPolicy,
  Kinds.ClusterNetworkPolicy,
  Kinds.AdminNetworkPolicy,
  Kinds.BaselineAdminNetworkPolicy,
];

export type ObjectEvent = { type: 'upsert' | 'delete'; object: KubeObject };

/**
 * Where sources write. `replace` is a full snapshot of one kind (a list or a
 * relist); `apply` is one watch event. Implemented by ClusterState.
 */
export interface ObjectSink {
  replace(kind: KindKey, objects: KubeObject[]): void;
  apply(kind: KindKey, event: ObjectEvent): void;
}

/** Something that learns objects: a manifest directory, a Kubernetes API server, an IP tracker. */
export interface ObjectSource {
  readonly name: string;
  /** Kinds this source can deliver; `undefined` for "whatever it finds" (manifests). */
  start(sink: ObjectSink): Promise<void>;
  stop(): Promise<void>;
  /** True once the first full snapshot of every kind it serves has been delivered. */
  ready(): boolean;
  /**
   * Set while the source refuses its current input (a manifest file that
   * does not validate) and keeps delivering the last good state; /readyz
   * and the metrics report it.
   */
  refusal?(): SourceRefusal | undefined;
  /** Inputs refused since the start, by error code. */
  readonly refusedLoads?: ReadonlyMap<string, number>;
}

export interface SourceRefusal {
  source: string;
  code: string;
  /** The files (or paths) the problems are in; empty when the source cannot tell. */
  files: string[];
  message: string;
}

export interface ContainerPort {
  name: string;
  port: number;
  /** IANA protocol number: 6 TCP, 17 UDP, 132 SCTP. */
  protocol: number;
}

/**
 * What the pipeline knows about the pod at one end of a packet
 * (kube-network-policies' PodInfo). The host's one pod shape: a remote pod
 * (RemotePod) and the IP tracker's etcd record (IpRecord) are this shape
 * without the host's id, plus the pod's uid.
 */
export interface PodInfo {
  /** Host identity of this pod, never 0, not reused while the host runs. */
  id: number;
  name: string;
  namespace: string;
  podLabels: Record<string, string>;
  namespaceLabels: Record<string, string>;
  nodeName: string;
  nodeLabels: Record<string, string>;
  clusterId: string;
  containerPorts: ContainerPort[];
  hostNetwork: boolean;
  ips: string[];
}

export const Protocol = { ICMP: 1, TCP: 6, UDP: 17, ICMPv6: 58, SCTP: 132 } as const;

/** One packet's header fields: the ABI's decision record before the pod ids are filled in. */
export interface Packet {
  family: 4 | 6;
  /** IANA protocol number. */
  protocol: number;
  /** 4 bytes for IPv4, 16 for IPv6. */
  src: Uint8Array;
  dst: Uint8Array;
  srcPort: number;
  dstPort: number;
  icmpType: number;
  icmpCode: number;
  /**
   * The source reached itself through a Service: the Service proxy sent the
   * connection back to the pod that opened it (ABI 1.2 record flag bit 0).
   * Never set for a pod's traffic to its own address, which no Service proxy
   * touches. docs/semantics.md, "Hairpin".
   */
  serviceHairpin?: boolean;
}

// The verdict values are the ABI's (host/abi/verdict.ts); every part of the host reads them from here.
import type { VerdictName } from './abi/verdict.js';
import type { Attribution } from './abi/attribution.js';
export type { Attribution } from './abi/attribution.js';
export { Verdict, verdictName, type VerdictName } from './abi/verdict.js';
export { RecordFlag } from './abi/record.js';

export type Direction = 'egress' | 'ingress';
export type FailurePolicy = 'fail-open' | 'fail-closed';
export type StageMode = 'enforce' | 'audit';

/** One step of a walk, for explanations. */
export interface StageTrace {
  stage: string;
  /** Short label for walkthroughs, e.g. `NP`, `CNP:Admin`. */
  label: string;
  verdict: VerdictName;
  mode: StageMode;
  /** The module's explanation of its reason code, when it gave one. */
  reason?: string;
  /** Set when the verdict came from the failure policy, not the module. */
  failure?: 'trap' | 'fuel' | 'deadline' | 'unavailable';
  /** Which policy and rule decided (ABI 1.3 attribution; the reason text as the policy for older modules). */
  attribution?: Attribution;
}

export interface DirectionResult {
  allowed: boolean;
  trace: StageTrace[];
}

export interface Decision {
  allowed: boolean;
  egress: DirectionResult;
  ingress: DirectionResult;
}
