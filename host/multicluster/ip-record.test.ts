import { describe, it, expect } from 'vitest';
import type { PodInfo } from '../contract.js';
import { decodeRecord, normalizePrefix, recordsForPod, remotePodKey, remotePodOf } from './ip-record.js';

const PREFIX = '/kwp/ips/';

function podInfo(overrides: Partial<PodInfo> = {}): PodInfo {
  return {
    id: 7, name: 'web', namespace: 'frontend', podLabels: { app: 'web' }, namespaceLabels: { 'kubernetes.io/metadata.name': 'frontend' },
    nodeName: 'n1', nodeLabels: { zone: 'z' }, clusterId: '', containerPorts: [{ name: 'http', port: 80, protocol: 6 }],
    hostNetwork: false, ips: ['10.2.0.5', 'fd00::5'], ...overrides,
  };
}

describe('IP tracker records', () => {
  it('writes one key per IP, each holding the whole pod with the cluster id and uid', () => {
    const records = recordsForPod(PREFIX, podInfo(), 'b', 'uid-1');
    expect([...records.keys()]).toEqual(['/kwp/ips/10.2.0.5', '/kwp/ips/fd00::5']);
    const decoded = decodeRecord(PREFIX, '/kwp/ips/fd00::5', records.get('/kwp/ips/fd00::5')!);
    expect(decoded).toMatchObject({ ok: true, ip: 'fd00::5', record: { clusterId: 'b', uid: 'uid-1', name: 'web', ips: ['10.2.0.5', 'fd00::5'] } });
  });

  it('writes nothing for a host-networked pod or a pod without an IP', () => {
    expect(recordsForPod(PREFIX, podInfo({ hostNetwork: true }), 'b', 'u').size).toBe(0);
    expect(recordsForPod(PREFIX, podInfo({ ips: [] }), 'b', 'u').size).toBe(0);
  });

  it('folds a pod back together from the IPs that still have keys', () => {
    const value = recordsForPod(PREFIX, podInfo(), 'b', 'uid-1').get('/kwp/ips/10.2.0.5')!;
    const decoded = decodeRecord(PREFIX, '/kwp/ips/10.2.0.5', value);
    if (!decoded.ok) throw new Error(decoded.problem);
    expect(remotePodKey(decoded.record)).toBe('b/frontend/web/uid-1');
    expect(remotePodOf(decoded.record, ['10.2.0.5'])).toMatchObject({ clusterId: 'b', name: 'web', ips: ['10.2.0.5'], nodeLabels: { zone: 'z' } });
  });

  it.each([
    ['/other/10.2.0.5', '{}', /outside the prefix/],
    ['/kwp/ips/web', '{}', /does not end in an IP/],
    ['/kwp/ips/10.2.0.5', 'nope', /not JSON/],
    ['/kwp/ips/10.2.0.5', '{"v":2}', /version 2 is not 1/],
    ['/kwp/ips/10.2.0.5', '{"v":1,"clusterId":"b","name":"w","namespace":"n","uid":"u","nodeName":"","podLabels":{"a":1},"namespaceLabels":{},"nodeLabels":{},"containerPorts":[],"ips":[]}', /"podLabels" must map strings to strings/],
    ['/kwp/ips/10.2.0.5', '{"v":1,"clusterId":"","name":"w","namespace":"n","uid":"u","nodeName":"","podLabels":{},"namespaceLabels":{},"nodeLabels":{},"containerPorts":[],"ips":[]}', /must not be empty/],
    ['/kwp/ips/10.2.0.5', '{"v":1,"clusterId":"b","name":"w","namespace":"n","uid":"u","nodeName":"","podLabels":{},"namespaceLabels":{},"nodeLabels":{},"containerPorts":[{"port":0}],"ips":[]}', /containerPorts/],
  ])('refuses %s = %s, saying why', (key, value, problem) => {
    const decoded = decodeRecord(PREFIX, key, value);
    expect(decoded.ok).toBe(false);
    if (!decoded.ok) expect(decoded.problem).toMatch(problem);
  });

  it('treats a prefix with or without its trailing slash alike', () => {
    expect(normalizePrefix('/kwp/ips')).toBe('/kwp/ips/');
    expect(normalizePrefix('/kwp/ips/')).toBe('/kwp/ips/');
  });
});
