import { describe, expect, it } from 'vitest';
import { Protocol, type PodInfo } from '../contract.js';
import { encodePodInfo } from './podinfo-codec.js';
import { parseIP } from '../net/ip.js';

/** The record layout of ABI.md written the plain way, one TextEncoder call per string. */
function reference(pod: PodInfo): number[] {
  const out: number[] = [];
  const u16 = (v: number) => out.push(v & 0xff, v >> 8);
  const str = (s: string) => {
    const b = new TextEncoder().encode(s);
    u16(b.length);
    out.push(...b);
  };
  const labels = (l: Record<string, string>) => {
    u16(Object.keys(l).length);
    for (const [k, v] of Object.entries(l)) { str(k); str(v); }
  };
  out.push(pod.id & 0xff, (pod.id >> 8) & 0xff, (pod.id >> 16) & 0xff, pod.id >>> 24, pod.hostNetwork ? 1 : 0, 0, 0, 0);
  str(pod.name); str(pod.namespace); str(pod.nodeName); str(pod.clusterId);
  labels(pod.podLabels); labels(pod.namespaceLabels); labels(pod.nodeLabels);
  u16(pod.containerPorts.length);
  for (const p of pod.containerPorts) { str(p.name); u16(p.port); out.push(p.protocol, 0); }
  out.push(pod.ips.length);
  for (const ip of pod.ips) {
    const bytes = ip.split('.').map(Number);
    out.push(4, ...bytes, ...new Array(12).fill(0));
  }
  return out;
}

describe('the PodInfo record', () => {
  it('carries names and labels outside ASCII as UTF-8, like ASCII ones', () => {
    const pod: PodInfo = {
      id: 70_000,
      name: 'café-0',
      namespace: 'équipe',
      podLabels: { app: 'web', 'owner': '日本語', emoji: 'ok🚀' },
      namespaceLabels: { 'kubernetes.io/metadata.name': 'équipe' },
      nodeName: 'node-1',
      nodeLabels: {},
      clusterId: '',
      containerPorts: [{ name: 'http', port: 8080, protocol: Protocol.TCP }, { name: 'ñ', port: 53, protocol: Protocol.UDP }],
      hostNetwork: false,
      ips: ['10.0.0.7'],
    };
    expect([...encodePodInfo(pod)]).toEqual(reference(pod));
  });

  it('one pod encoded twice in a row gives the same bytes, and the next pod its own', () => {
    const a: PodInfo = { id: 1, name: 'a', namespace: 'x', podLabels: {}, namespaceLabels: {}, nodeName: '', nodeLabels: {}, clusterId: '', containerPorts: [], hostNetwork: false, ips: ['10.0.0.1'] };
    const b: PodInfo = { ...a, id: 2, name: 'bb', ips: ['10.0.0.2'] };
    expect([...encodePodInfo(a)]).toEqual(reference(a));
    expect([...encodePodInfo(a)]).toEqual(reference(a));
    expect([...encodePodInfo(b)]).toEqual(reference(b));
  });

  it('writes each address that parses, IPv4 or IPv6, zero-padded to 16 bytes, leaves out what does not, and keeps the first 255', () => {
    const many = Array.from({ length: 300 }, (_, i) => `10.${i >> 8}.${i & 255}.1`);
    const ips = ['2001:db8::7', '10.0.0.010', 'not-an-ip', '::ffff:192.0.2.1', '10.0.0.256', '', '192.168.1.2', ...many];
    const pod: PodInfo = { id: 3, name: 'p', namespace: 'x', podLabels: { a: 'b' }, namespaceLabels: {}, nodeName: '', nodeLabels: {}, clusterId: '', containerPorts: [], hostNetwork: false, ips };
    const expected = reference({ ...pod, ips: [] });
    const parsed = ips.map((ip) => parseIP(ip)).filter((x) => x !== undefined).slice(0, 255);
    expected[expected.length - 1] = parsed.length;
    for (const ip of parsed) expected.push(ip!.family, ...ip!.bytes, ...new Array(16 - ip!.bytes.length).fill(0));
    expect(parsed.length).toBe(255);
    expect(parsed[0]!.family).toBe(6);
    expect([...encodePodInfo(pod)]).toEqual(expected);
  });
});
