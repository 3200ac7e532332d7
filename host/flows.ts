// The flows file `kwp eval` decides: each flow names its two ends (a pod as
// `namespace/name`, or an IP address), a protocol and a destination port. Flows
// are checked when the file is read, so a typo is reported before any module
// runs, and resolved against the cluster state into the packet the agent
// would see on the wire.

import { readFile } from 'node:fs/promises';
import { Kinds, Protocol, type Packet, type PodInfo } from './contract.js';
import { KwpError } from './errors.js';
import { parseIP, type ParsedIP } from './net/ip.js';
import type { ClusterState } from './state/cluster-state.js';
import { ServiceDirectory, ServiceLookupError, type ServiceRoute } from './services/service-directory.js';

export type FlowProtocol = 'TCP' | 'UDP' | 'SCTP';

/** Any ephemeral port: policies match destination ports, so the source port rarely matters. */
export const DEFAULT_SOURCE_PORT = 40000;

export interface FlowSpec {
  /** `namespace/pod` or an IP address. */
  src: string;
  dst: string;
  protocol: FlowProtocol;
  /** Destination port. */
  port: number;
  srcPort: number;
  /** An optional label for output. */
  name?: string;
  /** What the author expects, for `kwp eval` to compare against. */
  expect?: 'allow' | 'deny';
  /** Where the flow was written, for messages: the file, its 1-based position, and its line in JSON Lines. */
  file: string;
  index: number;
  line?: number;
}

export interface ResolvedFlow {
  packet: Packet;
  /** The pod the agent would find at the source address; absent for external and host-networked ends. */
  srcPod?: PodInfo;
  dstPod?: PodInfo;
  /** Things worth telling the user about how the ends were resolved. */
  notes: string[];
  /** Set when the flow's destination is a Service: the endpoint the Service proxy rewrote it to. */
  via?: ServiceHop;
}

/** One way a Service proxy may send a flow addressed to a Service. */
export interface ServiceHop {
  /** `namespace/name` of the Service. */
  service: string;
  /** The endpoint: `namespace/pod`, or its address when it is not a known pod. */
  endpoint: string;
  address: string;
  /** The target port the destination port was rewritten to. */
  port: number;
  /** The endpoint is the source pod itself: a Service hairpin. */
  hairpin?: true;
}

const FIELDS = ['src', 'dst', 'protocol', 'port', 'srcPort', 'name', 'expect'];
const PROTOCOLS: Record<FlowProtocol, number> = { TCP: Protocol.TCP, UDP: Protocol.UDP, SCTP: Protocol.SCTP };

function flowError(where: string, message: string): KwpError {
  return new KwpError('KWP_ERR_FLOWS', `${where}: ${message}`);
}

/** Where a flow was read, for messages: `file: flow 3 (line 5)`. */
export function locate(file: string, index: number, line?: number): string {
  return line === undefined ? `${file}: flow ${index}` : `${file}: flow ${index} (line ${line})`;
}

/** A wrong value as a message names it: `"x"`, `a list`, `number 0`. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return JSON.stringify(value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function jsonSyntaxError(text: string, err: unknown): string {
  const detail = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');
  const offset = /at position (\d+)/.exec(detail);
  if (!offset) return detail;
  const before = text.slice(0, Number(offset[1]));
  return `${detail}, line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')}`;
}

/** A flow end: an IP address, or `namespace/name`. */
function checkEnd(value: unknown, field: 'src' | 'dst', where: string): ParsedIP | undefined {
  if (typeof value !== 'string' || value.trim() === '') {
    throw flowError(where, `field "${field}" must be "namespace/pod" or an IP address, not ${describe(value)}`);
  }
  const ip = parseIP(value);
  if (ip) return ip;
  const parts = value.split('/');
  if (parts.length === 2 && parseIP(parts[0])) {
    throw flowError(where, `field "${field}" is a CIDR (${value}); a flow end is one address, e.g. ${parts[0]}`);
  }
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    throw flowError(where, `field "${field}" is ${JSON.stringify(value)}; write "namespace/pod" (e.g. default/web) or an IP address`);
  }
  return undefined;
}

function checkPort(value: unknown, field: 'port' | 'srcPort', where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw flowError(where, `field "${field}" must be a port number from 1 to 65535, not ${describe(value)}`);
  }
  return value;
}

/**
 * Validates one flow object (from a file, or built by a program) into a
 * FlowSpec; `index` is its 1-based position, `line` its line in JSON Lines.
 */
export function toFlowSpec(value: unknown, file: string, index: number, line?: number): FlowSpec {
  const where = locate(file, index, line);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw flowError(where, `a flow is an object like {"src": "default/a", "dst": "default/b", "port": 80}, not ${describe(value)}`);
  }
  const raw = value as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    if (!FIELDS.includes(key)) {
      throw flowError(where, `unknown field "${key}"; a flow has ${FIELDS.map((f) => `"${f}"`).join(', ')}`);
    }
  }
  const srcIP = checkEnd(raw.src, 'src', where);
  const dstIP = checkEnd(raw.dst, 'dst', where);
  if (srcIP && dstIP && srcIP.family !== dstIP.family) {
    throw flowError(where, `field "src" is IPv${srcIP.family} but field "dst" is IPv${dstIP.family}; both ends of a flow use one family`);
  }

  let protocol: FlowProtocol = 'TCP';
  if (raw.protocol !== undefined) {
    const name = typeof raw.protocol === 'string' ? raw.protocol.toUpperCase() : '';
    if (!(name in PROTOCOLS)) {
      throw flowError(where, `field "protocol" must be "TCP", "UDP" or "SCTP", not ${describe(raw.protocol)}`);
    }
    protocol = name as FlowProtocol;
  }

  if (raw.port === undefined) throw flowError(where, 'field "port" is missing; give the destination port, e.g. "port": 80');
  const port = checkPort(raw.port, 'port', where);
  const srcPort = raw.srcPort === undefined ? DEFAULT_SOURCE_PORT : checkPort(raw.srcPort, 'srcPort', where);

  const flow: FlowSpec = { src: raw.src as string, dst: raw.dst as string, protocol, port, srcPort, file, index };
  if (line !== undefined) flow.line = line;
  if (raw.name !== undefined) {
    if (typeof raw.name !== 'string') throw flowError(where, `field "name" must be a string, not ${describe(raw.name)}`);
    flow.name = raw.name;
  }
  if (raw.expect !== undefined) {
    const expected = typeof raw.expect === 'string' ? raw.expect.toLowerCase() : '';
    if (expected !== 'allow' && expected !== 'deny') {
      throw flowError(where, `field "expect" must be "allow" or "deny", not ${describe(raw.expect)}`);
    }
    flow.expect = expected;
  }
  return flow;
}

/**
 * Parses a JSON array of flows, or JSON Lines (one flow per line; blank lines
 * and lines starting with `#` are skipped). Throws KWP_ERR_FLOWS naming the
 * file, the flow and the field.
 */
export function parseFlows(text: string, fileName: string): FlowSpec[] {
  const body = text.replace(/^\uFEFF/, '');
  if (body.trim() === '') {
    throw new KwpError('KWP_ERR_FLOWS', `${fileName} holds no flows; write a JSON array of flows or one flow object per line`);
  }

  if (body.trimStart().startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      throw new KwpError('KWP_ERR_FLOWS', `${fileName} is not valid JSON (${jsonSyntaxError(body, err)}); fix the syntax`);
    }
    if (!Array.isArray(parsed)) {
      throw new KwpError('KWP_ERR_FLOWS', `${fileName} must be a JSON array of flows or JSON Lines`);
    }
    if (parsed.length === 0) {
      throw new KwpError('KWP_ERR_FLOWS', `${fileName} holds an empty list; add at least one flow`);
    }
    return parsed.map((value, i) => toFlowSpec(value, fileName, i + 1));
  }

  const flows: FlowSpec[] = [];
  const lines = body.split(/\r?\n/);
  lines.forEach((lineText, i) => {
    const trimmed = lineText.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const index = flows.length + 1;
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (err) {
      throw flowError(locate(fileName, index, i + 1), `not valid JSON (${jsonSyntaxError(trimmed, err)}); each line holds one flow object`);
    }
    flows.push(toFlowSpec(parsed, fileName, index, i + 1));
  });
  return flows;
}

/** Reads and parses a flows file; a missing or unreadable file is KWP_ERR_FLOWS too. */
export async function readFlowsFile(path: string): Promise<FlowSpec[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? String(err)})`;
    throw new KwpError('KWP_ERR_FLOWS', `flows file ${path} ${reason}; give the path of a JSON or JSON Lines file`);
  }
  return parseFlows(text, path);
}

interface PodEnd {
  field: 'src' | 'dst';
  ref: string;
  pod: PodInfo;
  addresses: ParsedIP[];
}

function podEnd(flow: FlowSpec, field: 'src' | 'dst', state: ClusterState): PodEnd {
  const ref = flow[field];
  const [namespace, name] = ref.split('/');
  const where = locate(flow.file, flow.index, flow.line);
  const pod = state.podByName(namespace, name);
  if (!pod) {
    if (state.object(Kinds.Service, ref)) {
      throw flowError(where, `field "${field}": ${ref} is a Service; only a flow's destination may name a Service`);
    }
    if (state.object(Kinds.Pod, `${namespace}/${name}`)) {
      throw flowError(where, `field "${field}": pod ${ref} has no IP; add status.podIPs to its manifest`);
    }
    throw flowError(where, `field "${field}": there is no pod ${ref}; check the namespace and name, or add the pod to the manifests`);
  }
  return { field, ref, pod, addresses: pod.ips.map((ip) => parseIP(ip)!) };
}

function addressOfFamily(end: PodEnd, family: 4 | 6, flow: FlowSpec, other: string): Uint8Array {
  const address = end.addresses.find((a) => a.family === family);
  if (!address) {
    throw flowError(
      locate(flow.file, flow.index, flow.line),
      `field "${end.field}": pod ${end.ref} has no IPv${family} address, but ${other} is IPv${family}; use an address of the same family`,
    );
  }
  return address.bytes;
}

/**
 * Turns a flow into the packet the agent would see. A pod reference becomes
 * the pod's first IP (of the family the other end dictates when that end is an
 * address, or of the source's first family the other pod has too); each end's pod is then whoever the agent would find at that
 * address, so `kwp eval` predicts the agent's decision, host-networked pods
 * (seen as their node) included.
 */
export function resolveFlow(flow: FlowSpec, state: ClusterState): ResolvedFlow {
  const srcIP = parseIP(flow.src);
  const dstIP = parseIP(flow.dst);
  const srcPodEnd = srcIP ? undefined : podEnd(flow, 'src', state);
  const dstPodEnd = dstIP ? undefined : podEnd(flow, 'dst', state);

  const protocol = PROTOCOLS[flow.protocol];
  if (protocol === undefined) {
    throw flowError(locate(flow.file, flow.index, flow.line), `field "protocol" must be "TCP", "UDP" or "SCTP", not ${describe(flow.protocol)}`);
  }

  // Two pods: the first family of the source's that the destination has too (a dual-stack pod reaches an IPv6-only one over IPv6).
  const shared = srcPodEnd && dstPodEnd ? srcPodEnd.addresses.find((a) => dstPodEnd.addresses.some((b) => b.family === a.family))?.family : undefined;
  const family: 4 | 6 = srcIP?.family ?? dstIP?.family ?? shared ?? srcPodEnd!.addresses[0].family;
  const src = srcIP?.bytes ?? addressOfFamily(srcPodEnd!, family, flow, `field "dst"`);
  const dst = dstIP?.bytes ?? addressOfFamily(dstPodEnd!, family, flow, `field "src"`);

  const notes: string[] = [];
  for (const end of [srcPodEnd, dstPodEnd]) {
    if (end?.pod.hostNetwork) {
      notes.push(`${end.field} ${end.ref} is host-networked: the agent sees its traffic as the node's, not a pod's`);
    }
  }

  return {
    packet: {
      family,
      protocol,
      src,
      dst,
      srcPort: flow.srcPort,
      dstPort: flow.port,
      icmpType: 0,
      icmpCode: 0,
    },
    srcPod: state.podByIP(src),
    dstPod: state.podByIP(dst),
    notes,
  };
}

/**
 * The packets a flow becomes on the wire. A flow to a pod or an address is one
 * packet (resolveFlow). A flow to a Service (`namespace/name` of a Service, one
 * of its ClusterIPs, or a node address and NodePort) becomes one packet per
 * endpoint, each as the Service proxy rewrites it: destination the endpoint's
 * address and target port, the source untouched (the agent judges before any
 * source rewrite), and the Service hairpin flag when the endpoint is the
 * source pod itself.
 */
export function resolveFlowRoutes(flow: FlowSpec, state: ClusterState): ResolvedFlow[] {
  const where = locate(flow.file, flow.index, flow.line);
  const services = new ServiceDirectory(state);
  const dstIP = parseIP(flow.dst);
  let route: ServiceRoute | undefined;
  try {
    if (dstIP) {
      const byIP = services.byClusterIP(flow.dst);
      if (byIP) route = services.route(byIP, flow.protocol, flow.port);
      else if (!state.podByIP(dstIP.bytes) && isNodeAddress(state, flow.dst)) {
        const byNodePort = services.byNodePort(flow.port, flow.protocol);
        if (byNodePort) route = services.route(byNodePort, flow.protocol, flow.port, true);
      }
    } else {
      // A pod of that name wins (flows written before Services were understood
      // keep their meaning); its Service is then named by its ClusterIP.
      const service = services.byName(flow.dst);
      if (service && !state.object(Kinds.Pod, flow.dst)) route = services.route(service, flow.protocol, flow.port);
    }
  } catch (err) {
    if (err instanceof ServiceLookupError) throw flowError(where, `field "dst": ${err.message}; use one of its ports`);
    throw err;
  }
  if (!route) return [resolveFlow(flow, state)];

  const srcIP = parseIP(flow.src);
  const srcEnd = srcIP ? undefined : podEnd(flow, 'src', state);
  const families = new Set<4 | 6>(srcIP ? [srcIP.family] : srcEnd!.addresses.map((a) => a.family));
  // One family per connection: the source's first address decides it, as a dual-stack client would connect over IPv4 first.
  const family: 4 | 6 = srcIP?.family ?? srcEnd!.addresses[0].family;
  const endpoints = route.endpoints.filter((e) => parseIP(e.address)!.family === family);
  if (endpoints.length === 0) {
    const why = route.endpoints.length === 0 ? 'no ready endpoints' : `no IPv${family} endpoints (the source is IPv${[...families].join('/IPv')})`;
    throw flowError(
      where,
      `field "dst": Service ${route.service} has ${why} for ${flow.protocol}/${route.servicePort.port}, so a Service proxy would reject the connection and there is nothing to decide; add its EndpointSlices (discovery.k8s.io/v1) or pods its selector matches`,
    );
  }
  return endpoints.map((endpoint) => {
    const hop: FlowSpec = { ...flow, dst: endpoint.address, port: endpoint.port };
    const resolved = resolveFlow(hop, state);
    const hairpin = resolved.srcPod !== undefined && endpoint.pod !== undefined && resolved.srcPod.id === endpoint.pod.id;
    if (hairpin) {
      resolved.packet.serviceHairpin = true;
      resolved.notes.push(`${flow.src} reaches itself through Service ${route!.service}: a Service hairpin, which ClusterNetworkPolicy and AdminNetworkPolicy judge (docs/semantics.md, "Hairpin")`);
    }
    resolved.via = { service: route!.service, endpoint: endpoint.label, address: endpoint.address, port: endpoint.port, ...(hairpin ? { hairpin: true as const } : {}) };
    return resolved;
  });
}

function isNodeAddress(state: ClusterState, address: string): boolean {
  return state.nodes().some((node) => Array.isArray(node.status?.addresses) && node.status.addresses.some((a: { address?: unknown }) => a?.address === address));
}
