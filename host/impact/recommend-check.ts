// A recommendation checked on the WASM pipeline before anyone applies it:
// with the current objects plus the recommended policies, every observed flow
// must be allowed; and among the known pods, on the ports traffic was
// observed on, the connections the current objects allow and the
// recommendation would deny are listed, since those are what applying it
// takes away.
import type { KubeObject } from '../contract.js';
import { OfflineEvaluator, type FlowResult } from '../eval.js';
import type { FlowProtocol } from '../flows.js';
import type { ModuleResolver } from '../pipeline/modules.js';
import type { PipelineSpec } from '../pipeline/spec.js';
import { flowKey, type RecordedFlow } from './recorded-flows.js';
import { knownPods } from './recommend.js';
import type { ClusterState } from '../state/cluster-state.js';

function podFamilies(state: ClusterState, ref: string): Array<4 | 6> {
  const [namespace, name] = ref.split('/');
  return (state.podByName(namespace, name)?.ips ?? []).map((ip) => (ip.includes(':') ? 6 : 4));
}

/** Pairs × ports the check decides at most (each twice); past that the matrix part is left out and said so. */
export const MAX_CHECK_CELLS = 40_000;

export interface MatrixFlow { src: string; dst: string; protocol: FlowProtocol; port: number }

export interface RecommendationCheck {
  /** Observed flows the recommendation would not allow (empty when it does what it says). */
  notAllowed: FlowResult[];
  /** Connections between known pods, on observed ports, allowed now and denied with the recommendation. */
  newlyDenied: MatrixFlow[];
  /** Cells of the matrix decided; 0 with `matrixSkipped` when there were too many. */
  cells: number;
  matrixSkipped?: string;
}

export interface CheckInput {
  objects: KubeObject[];
  recommended: KubeObject[];
  flows: RecordedFlow[];
  pipeline?: PipelineSpec;
  modules?: ModuleResolver;
}

export function checkRecommendation(input: CheckInput): RecommendationCheck {
  const before = new OfflineEvaluator({ objects: input.objects, pipeline: input.pipeline, modules: input.modules });
  let after: OfflineEvaluator | undefined;
  try {
    after = new OfflineEvaluator({ objects: [...input.objects, ...input.recommended], pipeline: input.pipeline, modules: input.modules });
    const notAllowed = input.flows.flatMap((f) => after!.evaluateAll(f.flow)).filter((r) => r.verdict !== 'allow');

    const observed = new Set(input.flows.map((f) => flowKey(f.flow)));
    const ports = [...new Map(input.flows.map((f) => [`${f.flow.protocol}/${f.flow.port}`, { protocol: f.flow.protocol, port: f.flow.port }])).values()];
    const pods = knownPods(before.state);
    const families = new Map(pods.map((ref) => [ref, new Set(podFamilies(before.state, ref))]));
    // Pods of no common IP family (IPv4-only and IPv6-only) cannot connect: there is no connection to decide.
    const connectable = (src: string, dst: string) => [...families.get(src)!].some((f) => families.get(dst)!.has(f));
    const cells = pods.length * pods.length * ports.length;
    if (cells > MAX_CHECK_CELLS) {
      return { notAllowed, newlyDenied: [], cells: 0, matrixSkipped: `${pods.length} pods × ${pods.length} × ${ports.length} observed port(s) is ${cells} connections, over the ${MAX_CHECK_CELLS} checked; run with --namespace for a part of the cluster` };
    }
    const newlyDenied: MatrixFlow[] = [];
    for (const { protocol, port } of ports) {
      for (const src of pods) {
        for (const dst of pods) {
          const flow = { src, dst, protocol, port };
          if (observed.has(flowKey(flow)) || !connectable(src, dst)) continue;
          if (before.evaluate(flow).verdict === 'allow' && after.evaluate(flow).verdict === 'deny') newlyDenied.push(flow);
        }
      }
    }
    const pairs = pods.reduce((n, src) => n + pods.filter((dst) => connectable(src, dst)).length, 0);
    return { notAllowed, newlyDenied, cells: pairs * ports.length };
  } finally {
    before.dispose();
    after?.dispose();
  }
}
