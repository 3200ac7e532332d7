// `npm run demo`: the whole product on real packets, in network namespaces on
// this machine. It wires four pods, measures who can reach whom, starts
// `kwp agent` with NetworkPolicies and an AdminNetworkPolicy, checks every flow
// against what `kwp eval` predicts, then adds a policy live and watches strict
// mode cut an established connection. Needs root; touches nothing outside the
// namespaces it creates, and removes them on exit.

import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import { compareReachability, formatComparison, type PredictedFlow } from './compare.js';
import { startKwpAgent } from './kwp-agent.js';
import { Lab, formatMatrix, sweepStaleLabs } from './lab.js';
import { phaseOnePolicies, phaseTwoPolicies, scenarioLab } from './scenario.js';

function step(title: string): void {
  process.stdout.write(`\n== ${title}\n`);
}

async function predict(lab: Lab, objects: KubeObject[]): Promise<PredictedFlow[]> {
  const results = await evaluateFlows({ objects, flows: lab.flows() });
  return results.map((r) => ({ src: r.src, dst: r.dst, protocol: r.protocol as 'TCP' | 'UDP', port: r.port, verdict: r.verdict, walkthrough: r.walkthrough }));
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('kwp demo: needs root (it creates network namespaces and netfilter rules); run it with sudo\n');
    return 1;
  }
  sweepStaleLabs();
  step('Building the lab: one node namespace, four pod namespaces, veths and /32 routes');
  const lab = await Lab.create(scenarioLab);
  let mismatches = 0;
  try {
    for (const pod of lab.pods) process.stdout.write(`  ${pod.key.padEnd(12)} ${pod.ip.padEnd(12)} labels ${JSON.stringify(pod.labels)} tcp ${pod.tcpPorts.join(',')} udp ${pod.udpPorts.join(',')}\n`);

    step('Before any agent: every pod reaches every other');
    process.stdout.write(`${formatMatrix(await lab.matrix())}\n`);

    const dir = mkdtempSync(join(tmpdir(), 'kwp-demo-'));
    await lab.writeManifests(dir);
    await writeFile(join(dir, 'policies-1.yaml'), phaseOnePolicies.map((o) => stringify(o)).join('---\n'));
    step(`Starting kwp agent in the node namespace with the manifests in ${dir}`);
    const agent = await startKwpAgent(lab, { manifests: [dir] });
    try {
      process.stdout.write(`  dataplane queue mode: ${agent.queueMode ?? 'unknown'}\n`);
      process.stdout.write('  policies: shop pods take traffic only from the shop (except db); db only from web on TCP 5432;\n');
      process.stdout.write('            an AdminNetworkPolicy lets ops in on TCP 80 everywhere\n');

      step('Measured reachability against the predictions of kwp eval');
      const predictedOne = await predict(lab, [...lab.manifests(), ...phaseOnePolicies]);
      const rowsOne = compareReachability(await lab.matrix(), predictedOne);
      process.stdout.write(`${formatComparison(rowsOne)}\n`);
      mismatches += rowsOne.filter((r) => !r.agrees).length;
      const example = rowsOne.find((r) => r.src === 'ops/monitor' && r.dst === 'shop/db' && r.port === 80);
      if (example?.walkthrough) process.stdout.write(`\n  why ops/monitor reaches shop/db on TCP 80:\n  ${example.walkthrough}\n`);

      step('Adding a policy live: shop/cache may only talk to shop/web');
      const held = await lab.hold('shop/cache', 'ops/monitor', 80);
      process.stdout.write(`  an open connection shop/cache -> ops/monitor:80 answers: ${(await held.send()).ok ? 'yes' : 'no'}\n`);
      const reloaded = agent.nextLog('manifests reloaded', 30_000);
      await writeFile(join(dir, 'policies-2.yaml'), phaseTwoPolicies.map((o) => stringify(o)).join('---\n'));
      await reloaded;
      await new Promise((r) => setTimeout(r, 1500));
      const after = await held.send(1500);
      process.stdout.write(`  after the change (strict mode) the same connection answers: ${after.ok ? 'yes' : `no (${after.error})`}\n`);
      await held.close();
      const predictedTwo = await predict(lab, [...lab.manifests(), ...phaseOnePolicies, ...phaseTwoPolicies]);
      const rowsTwo = compareReachability(await lab.matrix(), predictedTwo);
      const changed = rowsTwo.filter((r) => rowsOne.find((o) => o.src === r.src && o.dst === r.dst && o.protocol === r.protocol && o.port === r.port)?.reachable !== r.reachable);
      process.stdout.write(`${formatComparison(changed.length > 0 ? changed : rowsTwo)}\n`);
      process.stdout.write(`  (${changed.length} flows changed; all ${rowsTwo.length} compared, ${rowsTwo.filter((r) => !r.agrees).length} mismatches)\n`);
      mismatches += rowsTwo.filter((r) => !r.agrees).length;
    } finally {
      step('Stopping the agent: it removes every rule it installed');
      await agent.stop();
      const ruleset = await lab.execInNode('nft', ['list', 'ruleset']);
      process.stdout.write(`  kube-wasm-policies table left behind: ${ruleset.stdout.includes('kube-wasm-policies') ? 'yes (!)' : 'no'}\n`);
    }
  } finally {
    await lab.destroy();
  }
  step(mismatches === 0 ? 'Done: the agent enforced exactly what kwp eval predicted' : `Done with ${mismatches} mismatches`);
  return mismatches === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`kwp demo: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
