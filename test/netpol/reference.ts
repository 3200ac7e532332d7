// A deliberately plain NetworkPolicy model in TypeScript: every policy is
// scanned for every flow, straight from the objects. It exists to cross-check
// the indexed, cached WASM evaluator on large random clusters.
import type { KubeObject } from '../../host/contract.js';
import { parseIP } from '../../host/net/ip.js';

type Labels = Record<string, string>;
interface RefPod { ns: string; name: string; labels: Labels; nsLabels: Labels; ip: string; ports: { name: string; port: number; protocol: string }[]; hostNetwork: boolean }

function selectorMatches(sel: any, labels: Labels): boolean {
  if (!sel) return true;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key]);
    if (e.operator === 'In' && !inValues) return false;
    if (e.operator === 'NotIn' && inValues) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

function inCIDR(cidr: string, ip: string): boolean {
  const [base, lenText] = cidr.split('/');
  const a = parseIP(base);
  const b = parseIP(ip);
  if (!a || !b || a.family !== b.family) return false;
  const len = lenText === undefined ? a.bytes.length * 8 : Number(lenText);
  for (let bit = 0; bit < len; bit++) {
    const mask = 0x80 >> (bit % 8);
    if ((a.bytes[bit >> 3] & mask) !== (b.bytes[bit >> 3] & mask)) return false;
  }
  return true;
}

export class ReferenceModel {
  private readonly pods = new Map<string, RefPod>();
  private readonly policies: any[];
  /** The policies by namespace: only a subject's own namespace's policies can isolate it (100,000 policies, one scan each is too slow). */
  private readonly byNamespace = new Map<string, any[]>();

  constructor(objects: KubeObject[]) {
    const nsLabels = new Map<string, Labels>();
    for (const o of objects) if (o.kind === 'Namespace') nsLabels.set(o.metadata.name, o.metadata.labels ?? {});
    for (const o of objects) {
      if (o.kind !== 'Pod') continue;
      const ns = o.metadata.namespace!;
      this.pods.set(`${ns}/${o.metadata.name}`, {
        ns, name: o.metadata.name, labels: o.metadata.labels ?? {}, nsLabels: nsLabels.get(ns) ?? {},
        ip: o.status.podIP, hostNetwork: o.spec.hostNetwork === true,
        ports: o.spec.containers.flatMap((c: any) => (c.ports ?? []).map((p: any) => ({ name: p.name, port: p.containerPort, protocol: p.protocol ?? 'TCP' }))),
      });
    }
    this.policies = objects.filter((o) => o.kind === 'NetworkPolicy');
    for (const p of this.policies) {
      const list = this.byNamespace.get(p.metadata.namespace) ?? [];
      list.push(p);
      this.byNamespace.set(p.metadata.namespace, list);
    }
  }

  private endpoint(text: string): { pod?: RefPod; ip: string } {
    const pod = this.pods.get(text);
    return pod ? { pod, ip: pod.ip } : { ip: text };
  }

  private types(p: any): { ingress: boolean; egress: boolean } {
    const t: string[] | undefined = p.spec.policyTypes;
    if (t && t.length) return { ingress: t.includes('Ingress'), egress: t.includes('Egress') };
    return { ingress: true, egress: (p.spec.egress ?? []).length > 0 };
  }

  private peerMatches(peer: any, policyNs: string, far: { pod?: RefPod; ip: string }): boolean {
    if (peer.ipBlock) return inCIDR(peer.ipBlock.cidr, far.ip) && !(peer.ipBlock.except ?? []).some((c: string) => inCIDR(c, far.ip));
    if (!far.pod || far.pod.hostNetwork) return false;
    if (peer.namespaceSelector) return selectorMatches(peer.namespaceSelector, far.pod.nsLabels) && selectorMatches(peer.podSelector, far.pod.labels);
    return far.pod.ns === policyNs && selectorMatches(peer.podSelector, far.pod.labels);
  }

  private portMatches(ports: any[] | undefined, protocol: string, port: number, dst?: RefPod): boolean {
    if (!ports || ports.length === 0) return true;
    return ports.some((p) => {
      const proto = p.protocol ?? 'TCP';
      if (proto !== protocol) return false;
      if (p.port === undefined) return true;
      if (typeof p.port === 'string') return !!dst && dst.ports.some((c) => c.name === p.port && c.protocol === proto && c.port === port);
      return port >= p.port && port <= (p.endPort ?? p.port);
    });
  }

  /** One direction: undefined when no policy isolates the subject, else whether some rule allows. */
  private direction(subject: RefPod | undefined, far: { pod?: RefPod; ip: string }, dstPod: RefPod | undefined,
                    dir: 'ingress' | 'egress', protocol: string, port: number): boolean | undefined {
    if (!subject || subject.hostNetwork) return undefined;
    let isolated = false;
    for (const p of this.byNamespace.get(subject.ns) ?? []) {
      if (p.metadata.namespace !== subject.ns || !selectorMatches(p.spec.podSelector, subject.labels) || !this.types(p)[dir]) continue;
      isolated = true;
      for (const rule of p.spec[dir] ?? []) {
        const peers = dir === 'ingress' ? rule.from : rule.to;
        if (!this.portMatches(rule.ports, protocol, port, dstPod)) continue;
        if (!peers || peers.length === 0 || peers.some((peer: any) => this.peerMatches(peer, p.metadata.namespace, far))) return true;
      }
    }
    return isolated ? false : undefined;
  }

  allows(flow: { src: string; dst: string; protocol: string; port: number }): boolean {
    const src = this.endpoint(flow.src);
    const dst = this.endpoint(flow.dst);
    const egress = this.direction(src.pod, dst, dst.pod, 'egress', flow.protocol, flow.port);
    const ingress = this.direction(dst.pod, src, dst.pod, 'ingress', flow.protocol, flow.port);
    return egress !== false && ingress !== false;
  }
}
