// What the end-to-end suites of `kwp agent` share: predictions from the same
// evaluation `kwp eval` runs, a measured matrix compared with them, and
// policy files rewritten in a way the agent's watcher notices every time.

import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import { compareReachability, formatComparison, type ComparedFlow, type PredictedFlow } from '../lab/compare.js';
import type { Lab, LabFlow, MatrixOptions } from '../lab/lab.js';
import type { KwpAgentHandle } from '../lab/kwp-agent.js';

/** After a reload the agent refreshes its dataplane 50 ms later (interest set, strict sweep); this covers it on a busy machine. */
export const REFRESH_SETTLE_MS = 500;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What `kwp eval` says about every flow `lab.matrix(options)` would probe. */
export async function predict(lab: Lab, objects: KubeObject[], options: Pick<MatrixOptions, 'pairs'> = {}): Promise<PredictedFlow[]> {
  const results = await evaluateFlows({ objects, flows: lab.flows(options) });
  return results.map((r) => ({ src: r.src, dst: r.dst, protocol: r.protocol as 'TCP' | 'UDP', port: r.port, verdict: r.verdict, walkthrough: r.walkthrough }));
}

/** Measure the lab and pair each flow with its prediction; prints the comparison under `title`. */
export async function measureAgainst(lab: Lab, title: string, predicted: PredictedFlow[], options: MatrixOptions = {}): Promise<ComparedFlow[]> {
  const rows = compareReachability(await lab.matrix(options), predicted);
  console.log(`${title}\n${formatComparison(rows)}`);
  return rows;
}

/** Rows that disagree, with the walkthrough that explains the prediction, for a readable failure. */
export function mismatches(rows: ComparedFlow[]): string[] {
  return rows.filter((r) => !r.agrees).map((r) => `${r.src} -> ${r.dst} ${r.protocol}/${r.port}: predicted ${r.predicted}, observed ${r.reachable ? 'allow' : 'deny'} (${r.error ?? 'connected'}); ${r.walkthrough ?? ''}`);
}

/** The predicted verdict of one flow, to check that a policy set exercises what it claims. */
export function verdictOf(predicted: PredictedFlow[], flow: LabFlow): 'allow' | 'deny' {
  const found = predicted.find((p) => p.src === flow.src && p.dst === flow.dst && p.protocol === flow.protocol && p.port === flow.port);
  if (!found) throw new Error(`no prediction for ${flow.src} -> ${flow.dst} ${flow.protocol}/${flow.port}`);
  return found.verdict;
}

/**
 * Replaces the contents of `file` with `objects` as multi-document YAML,
 * written in place with one write. Not write-and-rename: Node 20's recursive
 * directory watch on Linux (what the agent's --manifests uses) sees the first
 * rename over an existing file and none after it.
 */
export async function replaceYaml(file: string, objects: KubeObject[]): Promise<void> {
  await writeFile(file, objects.length ? objects.map((o) => stringify(o)).join('---\n') : '# no objects\n');
}

/** Replace the policy file and wait until the agent has reloaded it and refreshed its dataplane. */
export async function applyPolicies(agent: KwpAgentHandle, file: string, objects: KubeObject[]): Promise<void> {
  const reloaded = agent.nextLog('manifests reloaded', 20_000);
  await replaceYaml(file, objects);
  await reloaded;
  await sleep(REFRESH_SETTLE_MS);
}

export interface FirstChange {
  /** Milliseconds after `since` at which the first probe with the wanted outcome started; undefined when none had it. */
  at: number | undefined;
  probes: number;
}

/**
 * Probe back to back (each probe waits for its answer) until one comes out
 * `wanted` or `windowMs` has passed since `since` (a performance.now()). A
 * probe only comes out the new way when its packet met the new state, so the
 * start of the first such probe bounds from above when the verdict changed.
 */
export async function firstProbe(since: number, windowMs: number, probe: () => Promise<{ ok: boolean }>, wanted: boolean): Promise<FirstChange> {
  let probes = 0;
  while (performance.now() - since < windowMs) {
    const started = performance.now() - since;
    probes++;
    if ((await probe()).ok === wanted) return { at: Math.round(started), probes };
    await sleep(20);
  }
  return { at: undefined, probes };
}
