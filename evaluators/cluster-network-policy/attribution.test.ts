// Rule attribution (ABI 1.3) of the tiered ClusterNetworkPolicy module: the
// rule named is the first match in evaluation order (priority, then policy
// name, then rule order), a Pass rule is named like any other, and the peer
// and port entries that matched come with it.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student } from '../../test/cnp/topology.js';
import { cnp, tcp, udp, subjectNamespace, toNamespace } from '../../test/cnp/policies.js';

const release = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/wasm/cluster-network-policy.wasm');
const topology = conformanceTopology();

async function moduleWith(policies: unknown[], tier = 'Admin'): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { tier });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(policies, 0);
  h.snapshot(topology.filter((o) => o.kind === 'Node'), 1);
  h.snapshot([], 2);
  return h;
}

const harry0 = student('gryffindor', 0);
const draco0 = student('slytherin', 0);
const luna0 = student('ravenclaw', 0);
const slytherinNs = 'namespaces kubernetes.io/metadata.name=network-policy-conformance-slytherin';

describe('ClusterNetworkPolicy rule attribution', () => {
  it('names the first matching rule in priority order, not a later policy that also matches', async () => {
    const h = await moduleWith([
      cnp('late', 'Admin', 20, subjectNamespace('gryffindor'), { egress: [{ name: 'late-accept', action: 'Accept', to: [toNamespace('slytherin')] }] }),
      cnp('early', 'Admin', 10, subjectNamespace('gryffindor'), {
        egress: [
          { name: 'early-udp', action: 'Deny', to: [toNamespace('slytherin')], protocols: [udp(53)] },
          { name: 'early-deny', action: 'Deny', to: [toNamespace('ravenclaw'), toNamespace('slytherin')], protocols: [tcp(81), tcp(80)] },
        ],
      }),
    ]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress)
      .toEqual({ policy: 'early', rule: 'early-deny', peer: slytherinNs, port: 'TCP/80' });
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'UDP', port: 53 }).egress)
      .toEqual({ policy: 'early', rule: 'early-udp', peer: slytherinNs, port: 'UDP/53' });
    // What "early" does not match falls to "late".
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 443 }).egress)
      .toEqual({ policy: 'late', rule: 'late-accept', peer: slytherinNs, port: 'any port' });
  });

  it('breaks a priority tie by policy name, as evaluation does', async () => {
    const h = await moduleWith([
      cnp('zeta', 'Admin', 5, subjectNamespace('gryffindor'), { egress: [{ name: 'z-accept', action: 'Accept', to: [toNamespace('slytherin')] }] }),
      cnp('alpha', 'Admin', 5, subjectNamespace('gryffindor'), { egress: [{ name: 'a-deny', action: 'Deny', to: [toNamespace('slytherin')] }] }),
    ]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress).toMatchObject({ policy: 'alpha', rule: 'a-deny' });
  });

  it('names a Pass rule, and names an unnamed rule by its direction and index', async () => {
    const h = await moduleWith([
      cnp('pass-first', 'Admin', 1, subjectNamespace('ravenclaw'), {
        ingress: [
          { action: 'Deny', from: [toNamespace('hufflepuff')] },
          { name: 'pass-gryffindor', action: 'Pass', from: [toNamespace('gryffindor')], protocols: [tcp(80)] },
        ],
      }),
    ]);
    const passed = h.attribute({ src: harry0, dst: luna0, protocol: 'TCP', port: 80 }).ingress;
    expect(passed).toEqual({ policy: 'pass-first', rule: 'pass-gryffindor', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-gryffindor', port: 'TCP/80' });
    expect(h.attribute({ src: student('hufflepuff', 0), dst: luna0, protocol: 'TCP', port: 80 }).ingress).toMatchObject({ policy: 'pass-first', rule: 'ingress rule 0' });
  });

  it('names the Baseline tier rule that denies by default', async () => {
    const h = await moduleWith([
      cnp('baseline', 'Baseline', 1, subjectNamespace('gryffindor'), { ingress: [{ name: 'default-deny', action: 'Deny', from: [{ namespaces: {} }] }] }),
    ], 'Baseline');
    expect(h.attribute({ src: draco0, dst: harry0, protocol: 'TCP', port: 80 }).ingress)
      .toEqual({ policy: 'baseline', rule: 'default-deny', peer: 'namespaces all', port: 'any port' });
  });
});
