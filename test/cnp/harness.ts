// Runs conformance-style cases through the real pipeline (host/eval.ts): the
// built WASM evaluators, the default stage order, the same walkthrough text
// `kwp eval` prints. A case is data: extra manifests on top of the
// conformance topology, flows, the expected verdict and walkthrough fragments.
import { expect } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import { kindKeyOf } from '../../host/contract.js';
import { OfflineEvaluator, type FlowResult, type FlowSpec } from '../../host/eval.js';
import type { PipelineSpec } from '../../host/pipeline/spec.js';
import { conformanceTopology } from './topology.js';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export interface Probe {
  src: string;
  dst: string;
  protocol?: Protocol;
  port: number;
  expect: 'allow' | 'deny';
  /** Fragments the walkthrough line must contain, e.g. `[CNP:Admin] Pass (pass-81: `. */
  shows?: string[];
  /** Fragments it must not contain, e.g. `[CNP:Baseline]`. */
  hides?: string[];
  /** Fragments the egress half of the walkthrough must contain. */
  egress?: string[];
  /** Fragments the ingress half of the walkthrough must contain. */
  ingress?: string[];
}

export interface Case {
  name: string;
  /** Policies and anything else added to the conformance topology. */
  objects: KubeObject[];
  probes: Probe[];
  dns?: Record<string, string[]>;
  pipeline?: PipelineSpec;
}

export function toFlow(p: Pick<Probe, 'src' | 'dst' | 'protocol' | 'port'>, index: number): FlowSpec {
  return { src: p.src, dst: p.dst, protocol: p.protocol ?? 'TCP', port: p.port, srcPort: 40000, file: 'test/cnp', index };
}

function describeProbe(p: Probe): string {
  return `${p.src} -> ${p.dst} ${p.protocol ?? 'TCP'}/${p.port}`;
}

export function checkProbe(p: Probe, r: FlowResult): void {
  const where = `${describeProbe(p)}\n  walkthrough: ${r.walkthrough}`;
  expect(r.verdict, where).toBe(p.expect);
  for (const s of p.shows ?? []) expect(r.walkthrough, where).toContain(s);
  for (const s of p.hides ?? []) expect(r.walkthrough, where).not.toContain(s);
  const [egressWalk, ingressWalk] = splitWalkthrough(r.walkthrough);
  for (const s of p.egress ?? []) expect(egressWalk, where).toContain(s);
  for (const s of p.ingress ?? []) expect(ingressWalk, where).toContain(s);
}

/** The egress and ingress halves of a walkthrough line. */
export function splitWalkthrough(line: string): [string, string] {
  const e = line.indexOf('  egress: ');
  const i = line.indexOf('  ingress: ');
  expect(e, `walkthrough without an egress part: ${line}`).toBeGreaterThan(0);
  expect(i, `walkthrough without an ingress part: ${line}`).toBeGreaterThan(e);
  return [line.slice(e + '  egress: '.length, i), line.slice(i + '  ingress: '.length)];
}

/** Decides every probe; a probe to a Service is checked once per endpoint, each with the probe's expectations. */
export async function runCase(c: Case): Promise<FlowResult[]> {
  const ev = new OfflineEvaluator({ objects: [...conformanceTopology(), ...c.objects], pipeline: c.pipeline, dns: c.dns });
  try {
    return c.probes.flatMap((p, i) => {
      const results = ev.evaluateAll(toFlow(p, i + 1));
      for (const r of results) checkProbe(p, r);
      return results;
    });
  } finally {
    ev.dispose();
  }
}

/**
 * A cluster that changes under a running pipeline, as upstream's tests update
 * policies in place: every change goes through the state's watch path, so
 * the evaluators' incremental updates are what is being tested.
 */
export class LiveCluster {
  readonly ev: OfflineEvaluator;
  constructor(objects: KubeObject[], opts: { pipeline?: PipelineSpec; dns?: Record<string, string[]> } = {}) {
    this.ev = new OfflineEvaluator({ objects: [...conformanceTopology(), ...objects], pipeline: opts.pipeline, dns: opts.dns });
  }
  apply(obj: KubeObject): void {
    this.ev.state.apply(kindKeyOf(obj), { type: 'upsert', object: structuredClone(obj) });
  }
  remove(obj: KubeObject): void {
    this.ev.state.apply(kindKeyOf(obj), { type: 'delete', object: structuredClone(obj) });
  }
  check(...probes: Probe[]): FlowResult[] {
    return probes.map((p, i) => {
      const r = this.ev.evaluate(toFlow(p, i + 1));
      checkProbe(p, r);
      return r;
    });
  }
  dispose(): void { this.ev.dispose(); }
}

/** A copy of `policy` with spec[direction][i] and [j] swapped, as upstream's rule-order tests do. */
export function swapRules(policy: KubeObject, direction: 'ingress' | 'egress', i: number, j: number): KubeObject {
  const copy = structuredClone(policy);
  const rules = copy.spec[direction];
  [rules[i], rules[j]] = [rules[j], rules[i]];
  return copy;
}

export function withPriority(policy: KubeObject, priority: number): KubeObject {
  const copy = structuredClone(policy);
  copy.spec.priority = priority;
  return copy;
}
