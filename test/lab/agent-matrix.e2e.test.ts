import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import { Lab, sweepStaleLabs } from './lab.js';
import { compareReachability, formatComparison, type PredictedFlow } from './compare.js';
import { startKwpAgent, type KwpAgentHandle } from './kwp-agent.js';
import { phaseOnePolicies, phaseTwoPolicies, scenarioLab } from './scenario.js';

// The whole product on real traffic: `kwp agent` (compiled, from dist/) in the
// lab's node namespace enforces the scenario's policies, and every measured
// flow must match what `kwp eval`'s evaluateFlows predicts from the same objects.

let lab: Lab;
let agent: KwpAgentHandle | undefined;
let dir: string;

async function predict(objects: KubeObject[]): Promise<PredictedFlow[]> {
  const results = await evaluateFlows({ objects, flows: lab.flows() });
  return results.map((r) => ({ src: r.src, dst: r.dst, protocol: r.protocol as 'TCP' | 'UDP', port: r.port, verdict: r.verdict, walkthrough: r.walkthrough }));
}

async function writePolicies(name: string, objects: KubeObject[]): Promise<void> {
  await writeFile(join(dir, name), objects.map((o) => stringify(o)).join('---\n'));
}

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create(scenarioLab);
  dir = mkdtempSync(join(tmpdir(), 'kwp-agent-matrix-'));
  await lab.writeManifests(dir);
  await writePolicies('policies-1.yaml', phaseOnePolicies);
  agent = await startKwpAgent(lab, { manifests: [dir] });
  console.log(`kwp agent running, dataplane queue mode: ${agent.queueMode}`);
});

afterAll(async () => {
  await agent?.stop();
  await lab?.destroy();
});

describe('kwp agent in a netns lab', () => {
  it('lets through exactly the flows kwp eval predicts for the phase-one policies', async () => {
    const predicted = await predict([...lab.manifests(), ...phaseOnePolicies]);
    const rows = compareReachability(await lab.matrix(), predicted);
    console.log(formatComparison(rows));
    // Both verdicts occur, or the comparison would prove little.
    expect(rows.some((r) => r.predicted === 'deny')).toBe(true);
    expect(rows.some((r) => r.predicted === 'allow')).toBe(true);
    expect(rows.filter((r) => !r.agrees)).toEqual([]);
  });

  it('follows a policy added to the manifests and cuts the connection it now denies', async () => {
    const held = await lab.hold('shop/cache', 'ops/monitor', 80);
    expect((await held.send()).ok).toBe(true);
    const reloaded = agent!.nextLog('manifests reloaded', 30_000);
    await writePolicies('policies-2.yaml', phaseTwoPolicies);
    await reloaded;
    // The agent refreshes the dataplane shortly after a change and the strict sweep cuts the connection: wait for the cut itself.
    const cutBy = Date.now() + 20_000;
    while ((await held.send(1500)).ok && Date.now() < cutBy) await new Promise((r) => setTimeout(r, 100));
    expect((await held.send(1500)).ok).toBe(false);
    await held.close();

    const predicted = await predict([...lab.manifests(), ...phaseOnePolicies, ...phaseTwoPolicies]);
    const rows = compareReachability(await lab.matrix(), predicted);
    console.log(formatComparison(rows));
    expect(rows.find((r) => r.src === 'shop/cache' && r.dst === 'ops/monitor' && r.protocol === 'TCP')?.predicted).toBe('deny');
    expect(rows.filter((r) => !r.agrees)).toEqual([]);
  });
});
