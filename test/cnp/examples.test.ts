// The worked examples under examples/tiered, as `kwp eval` would read them:
// every flow's expectation holds, and the walkthroughs tell the tier story
// the README shows.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadManifests } from '../../host/sources/manifest-files.js';
import { readFlowsFile } from '../../host/flows.js';
import { evaluateFlows } from '../../host/eval.js';
import { splitWalkthrough } from './harness.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

async function run(example: string) {
  const dir = join(root, 'examples/tiered', example);
  const { objects, warnings } = await loadManifests([join(dir, 'manifests')]);
  expect(warnings).toEqual([]);
  const flows = await readFlowsFile(join(dir, 'flows.json'));
  return evaluateFlows({ objects, flows });
}

describe.each([
  ['cluster-network-policy', 'CNP:Admin', 'CNP:Baseline', 'default-deny'],
  ['admin-network-policy', 'ANP', 'BANP', 'default'],
])('examples/tiered/%s', (example, admin, baseline, baselinePolicy) => {
  it('decides every flow as its "expect" says', async () => {
    const results = await run(example);
    expect(results.length).toBe(5);
    for (const r of results) expect(r.verdict, `${r.name}\n${r.walkthrough}`).toBe(r.expect);
  });

  it('shows the Pass handing TCP 81 to the NetworkPolicy, and the baseline deciding only for pods no NetworkPolicy selects', async () => {
    const [passToNP, passToBaseline, npDeny, adminDeny] = (await run(example)).map((r) => splitWalkthrough(r.walkthrough)[1]);
    expect(passToNP).toMatch(new RegExp(`^\\[${admin}\\] Pass \\(admin-guardrails, pass-81: namespaces all, port TCP/81\\) -> \\[NP\\] Accept`));
    expect(passToNP).not.toContain(`[${baseline}]`);
    expect(passToBaseline).toBe(`[${admin}] Pass (admin-guardrails, pass-81: namespaces all, port TCP/81) -> [${baseline}] Deny (${baselinePolicy}, default-deny-ingress: namespaces all, any port)`);
    expect(npDeny).toMatch(/^\[NP\] Deny/);
    expect(adminDeny).toBe(`[${admin}] Deny (admin-guardrails, deny-from-z: namespaces kubernetes.io/metadata.name=z, any port)`);
  });
});
