// Rule attribution (ABI 1.3) of the NetworkPolicy module: among several
// policies and rules that could decide, it names the one that did, with the
// peer and port entries that matched, and attributes a default deny to the
// policy isolating the pod.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { xyzCluster, networkPolicy, podLabel, nsLabel } from '../../test/netpol/cluster.js';

const release = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/wasm/network-policy.wasm');

async function moduleWith(policies: unknown[], ruleIndex = true): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { ruleIndex });
  for (const p of podsFromObjects(xyzCluster())) h.upsertPod(p);
  h.snapshot(policies);
  return h;
}

describe('NetworkPolicy rule attribution', () => {
  const web = networkPolicy('x', 'web', {
    podSelector: podLabel('a'),
    ingress: [
      { from: [{ podSelector: podLabel('b') }], ports: [{ port: 81 }] },
      { from: [{ ipBlock: { cidr: '203.0.113.0/24' } }, { namespaceSelector: nsLabel('y'), podSelector: podLabel('c') }], ports: [{ protocol: 'UDP', port: 53 }, { port: 'serve-80-tcp' }] },
    ],
  });

  it('names the rule, peer entry and port entry that matched, by index, out of several rules', async () => {
    const h = await moduleWith([web]);
    expect(h.attribute({ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 81 }).ingress)
      .toEqual({ policy: 'x/web', rule: 'ingress rule 0', peer: 'podSelector pod=b', port: 'TCP/81' });
    expect(h.attribute({ src: 'y/c', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress)
      .toEqual({ policy: 'x/web', rule: 'ingress rule 1', peer: 'namespaceSelector ns=y + podSelector pod=c', port: 'serve-80-tcp' });
    expect(h.attribute({ src: '203.0.113.9', dst: 'x/a', protocol: 'UDP', port: 53 }).ingress)
      .toEqual({ policy: 'x/web', rule: 'ingress rule 1', peer: 'ipBlock 203.0.113.0/24', port: 'UDP/53' });
  });

  it('names the policy whose rule allowed when two policies select the pod, and the direction of an egress rule', async () => {
    const h = await moduleWith([
      web,
      networkPolicy('x', 'from-z', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('z') }] }] }),
      networkPolicy('z', 'out', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ ports: [{ port: 82 }] }, { to: [{ podSelector: podLabel('b') }] }] }),
    ]);
    expect(h.attribute({ src: 'z/b', dst: 'x/a', protocol: 'TCP', port: 9000 }).ingress)
      .toEqual({ policy: 'x/from-z', rule: 'ingress rule 0', peer: 'namespaceSelector ns=z', port: 'any port' });
    expect(h.attribute({ src: 'z/a', dst: 'z/b', protocol: 'TCP', port: 443 }).egress)
      .toEqual({ policy: 'z/out', rule: 'egress rule 1', peer: 'podSelector pod=b', port: 'any port' });
    expect(h.attribute({ src: 'z/a', dst: 'y/b', protocol: 'TCP', port: 82 }).egress)
      .toEqual({ policy: 'z/out', rule: 'egress rule 0', peer: 'any peer', port: 'TCP/82' });
  });

  it('attributes a default deny to the first policy isolating the pod in that direction', async () => {
    const h = await moduleWith([networkPolicy('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress'] }), web]);
    expect(h.attribute({ src: 'y/a', dst: 'x/a', protocol: 'TCP', port: 80 }).ingress).toEqual({ policy: 'x/deny-all', rule: 'default deny' });
  });

  it('says nothing for a pod no policy isolates', async () => {
    const h = await moduleWith([web]);
    expect(h.attribute({ src: 'x/a', dst: 'x/b', protocol: 'TCP', port: 80 })).toEqual({ egress: undefined, ingress: undefined });
  });

  it('keeps the rule when the answer comes from the decision cache', async () => {
    const h = await moduleWith([web]);
    const probe = { src: 'y/c', dst: 'x/a', protocol: 'UDP', port: 53 } as const;
    const first = h.attribute(probe).ingress;
    const before = h.cacheStats()!.hits;
    expect(h.attribute(probe).ingress).toEqual(first);
    expect(h.cacheStats()!.hits).toBeGreaterThan(before);
    expect(first).toEqual({ policy: 'x/web', rule: 'ingress rule 1', peer: 'namespaceSelector ns=y + podSelector pod=c', port: 'UDP/53' });
  });

  it.each([true, false])('names a port range by its bounds and an ipBlock with exceptions by its CIDR, rule index %s', async (ruleIndex) => {
    const h = await moduleWith([networkPolicy('x', 'ranges', {
      podSelector: podLabel('a'),
      ingress: [{ from: [{ podSelector: podLabel('c') }, { ipBlock: { cidr: '198.51.100.0/24', except: ['198.51.100.128/25'] } }], ports: [{ port: 81 }, { port: 8000, endPort: 8090 }] }],
    })], ruleIndex);
    expect(h.attribute({ src: '198.51.100.7', dst: 'x/a', protocol: 'TCP', port: 8080 }).ingress)
      .toEqual({ policy: 'x/ranges', rule: 'ingress rule 0', peer: 'ipBlock 198.51.100.0/24 except 198.51.100.128/25', port: 'TCP/8000-8090' });
    expect(h.attribute({ src: 'x/c', dst: 'x/a', protocol: 'TCP', port: 81 }).ingress)
      .toEqual({ policy: 'x/ranges', rule: 'ingress rule 0', peer: 'podSelector pod=c', port: 'TCP/81' });
  });
});
