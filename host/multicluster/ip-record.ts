// The one shape the IP tracker writes into etcd and the agents read back: one
// key per pod IP under a prefix, holding the pod's identity and the labels
// selectors need. Both sides go through this file, so the wire format has a
// single definition and a reader never trusts a value it has not checked.

import type { ContainerPort, PodInfo } from '../contract.js';
import { normalizeIP } from '../net/ip.js';
import type { RemotePod } from '../state/cluster-state.js';

export const DEFAULT_PREFIX = '/kwp/ips/';

/** The JSON value under `<prefix><ip>`. Version 1; a reader skips other versions. */
/** The pod's shape (PodInfo) without the host's id and hostNetwork (such pods publish nothing), with its uid. */
export interface IpRecord extends Omit<PodInfo, 'id' | 'hostNetwork'> {
  v: 1;
  uid: string;
  /** Every IP of the pod (each has its own key); the reader groups keys by pod. */
  ips: string[];
}

/** A prefix always ends in `/`, so `/kwp/ips` and `/kwp/ips/` name the same keys. */
export function normalizePrefix(prefix: string): string {
  return prefix.endsWith('/') ? prefix : `${prefix}/`;
}

/**
 * The records for one pod, keyed by etcd key. Host-networked pods publish
 * nothing: their address is their node's, and a selector must not match it.
 */
export function recordsForPod(prefix: string, pod: PodInfo, clusterId: string, uid: string): Map<string, string> {
  const out = new Map<string, string>();
  if (pod.hostNetwork || pod.ips.length === 0) return out;
  const record: IpRecord = {
    v: 1,
    clusterId,
    name: pod.name,
    namespace: pod.namespace,
    uid,
    podLabels: { ...pod.podLabels },
    namespaceLabels: { ...pod.namespaceLabels },
    nodeName: pod.nodeName,
    nodeLabels: { ...pod.nodeLabels },
    containerPorts: pod.containerPorts.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol })),
    ips: [...pod.ips],
  };
  const value = JSON.stringify(record);
  for (const ip of pod.ips) out.set(`${prefix}${ip}`, value);
  return out;
}

function isStringMap(v: unknown): v is Record<string, string> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');
}

function isPort(v: unknown): v is ContainerPort {
  const p = v as ContainerPort;
  return typeof p === 'object' && p !== null && typeof p.name === 'string' &&
    Number.isInteger(p.port) && p.port >= 1 && p.port <= 65535 && Number.isInteger(p.protocol);
}

export type DecodedRecord = { ok: true; ip: string; record: IpRecord } | { ok: false; problem: string };

/** Checks one key/value read from etcd; `problem` says what is wrong, for a warning naming the key. */
export function decodeRecord(prefix: string, key: string, value: string): DecodedRecord {
  if (!key.startsWith(prefix)) return { ok: false, problem: `key is outside the prefix ${prefix}` };
  const ip = normalizeIP(key.slice(prefix.length));
  if (!ip) return { ok: false, problem: 'the key does not end in an IP address' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return { ok: false, problem: 'the value is not JSON' };
  }
  const r = parsed as IpRecord;
  if (typeof r !== 'object' || r === null) return { ok: false, problem: 'the value is not a JSON object' };
  if (r.v !== 1) return { ok: false, problem: `record version ${JSON.stringify(r.v)} is not 1` };
  for (const field of ['clusterId', 'name', 'namespace', 'uid', 'nodeName'] as const) {
    if (typeof r[field] !== 'string') return { ok: false, problem: `"${field}" must be a string` };
  }
  if (r.clusterId === '' || r.name === '' || r.namespace === '') return { ok: false, problem: 'clusterId, name and namespace must not be empty' };
  for (const field of ['podLabels', 'namespaceLabels', 'nodeLabels'] as const) {
    if (!isStringMap(r[field])) return { ok: false, problem: `"${field}" must map strings to strings` };
  }
  if (!Array.isArray(r.containerPorts) || !r.containerPorts.every(isPort)) return { ok: false, problem: '"containerPorts" must be a list of {name, port, protocol}' };
  if (!Array.isArray(r.ips) || !r.ips.every((x) => typeof x === 'string')) return { ok: false, problem: '"ips" must be a list of addresses' };
  return { ok: true, ip, record: r };
}

/** Which pod a record belongs to: keys of one pod (one per IP) fold into one remote pod. */
export function remotePodKey(record: IpRecord): string {
  return `${record.clusterId}/${record.namespace}/${record.name}/${record.uid}`;
}

/** The remote pod for a set of keys of the same pod: the newest record's fields, the IPs that have keys. */
export function remotePodOf(record: IpRecord, ipsWithKeys: Iterable<string>): RemotePod {
  // Field by field: a record may carry keys a newer writer added, which the agent does not keep.
  const { clusterId, name, namespace, uid, podLabels, namespaceLabels, nodeName, nodeLabels, containerPorts } = record;
  return { clusterId, name, namespace, uid, podLabels, namespaceLabels, nodeName, nodeLabels, containerPorts, ips: [...ipsWithKeys] };
}
