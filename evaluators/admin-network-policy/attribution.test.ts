// Rule attribution (ABI 1.3) of the AdminNetworkPolicy module: a Pass rule of
// an ANP is named with its policy, the first match by priority wins, and the
// BaselineAdminNetworkPolicy names its own rule.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModuleHarness, podsFromObjects } from '../../test/fixtures/abi-harness.js';
import { conformanceTopology, student } from '../../test/cnp/topology.js';
import { anp, banp, portNumber, subjectNamespace, toNamespace } from '../../test/cnp/policies.js';

const release = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/wasm/admin-network-policy.wasm');
const topology = conformanceTopology();

async function moduleWith(tier: 'Admin' | 'Baseline', anps: unknown[], banps: unknown[]): Promise<ModuleHarness> {
  const h = await ModuleHarness.load(release, { tier });
  for (const p of podsFromObjects(topology)) h.upsertPod(p);
  h.snapshot(anps, 0);
  h.snapshot(banps, 1);
  h.snapshot(topology.filter((o) => o.kind === 'Node'), 2);
  h.snapshot([], 3);
  return h;
}

const harry0 = student('gryffindor', 0);
const draco0 = student('slytherin', 0);

describe('AdminNetworkPolicy rule attribution', () => {
  const passWeb = anp('pass-web', 1, subjectNamespace('gryffindor'), {
    egress: [{ name: 'pass-80', action: 'Pass', to: [toNamespace('slytherin')], ports: [portNumber(80)] }],
  });
  const denyAll = anp('deny-slytherin', 2, subjectNamespace('gryffindor'), {
    egress: [{ name: 'deny-rest', action: 'Deny', to: [toNamespace('slytherin')] }],
  });

  it('names the Pass rule of the higher-priority ANP, and the Deny of the next one for what it does not pass', async () => {
    const h = await moduleWith('Admin', [denyAll, passWeb], []);
    expect(h.probe({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress.verdict).toBe('Pass');
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress)
      .toEqual({ policy: 'pass-web', rule: 'pass-80', peer: 'namespaces kubernetes.io/metadata.name=network-policy-conformance-slytherin', port: 'TCP/80' });
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 81 }).egress).toMatchObject({ policy: 'deny-slytherin', rule: 'deny-rest' });
  });

  it('names the BaselineAdminNetworkPolicy rule in the Baseline tier', async () => {
    const h = await moduleWith('Baseline', [denyAll], [banp(subjectNamespace('gryffindor'), { egress: [{ name: 'banp-deny', action: 'Deny', to: [toNamespace('slytherin')] }] })]);
    expect(h.attribute({ src: harry0, dst: draco0, protocol: 'TCP', port: 80 }).egress).toMatchObject({ policy: 'default', rule: 'banp-deny', port: 'any port' });
  });
});
