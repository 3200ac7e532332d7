// What the fleet runs, read from the cluster: each Pipeline's generation and
// rollout state, and every node's NodePipelineStatus (the objects the rollout
// controller judges steps by). `kwp fleet status` reads it with a kubeconfig,
// or from the cluster-level admin API (GET /v1/fleet/status), which answers
// with this same shape.
import type { KubeConfig } from '@kubernetes/client-node';
import { KwpError } from '../errors.js';
import { getJson } from '../sources/kubernetes/request.js';
import { NODE_PIPELINE_STATUS, PIPELINE, fleetPath, nodeReportOf, parsePipelineObject, type NodeReport, type PipelineRolloutStatus } from './objects.js';

export interface FleetStatus {
  pipelines: Array<{ name: string; generation: number; rollout?: PipelineRolloutStatus }>;
  nodes: NodeReport[];
}

export async function readFleetStatus(kc: KubeConfig, who: string): Promise<FleetStatus> {
  const list = async (path: string) => {
    try {
      return ((await getJson(kc, path, undefined, 30_000)).items ?? []) as any[];
    } catch (err) {
      const code = (err as { statusCode?: number }).statusCode;
      const hint = code === 404 ? ' (are the fleet CRDs installed? kwp manifests | kubectl apply -f -)' : '';
      throw new KwpError('KWP_ERR_FLEET_READ', `${who}: cannot list ${path}: ${(err as Error).message}${hint}`);
    }
  };
  const [pipelines, statuses] = await Promise.all([list(fleetPath(PIPELINE)), list(fleetPath(NODE_PIPELINE_STATUS))]);
  return {
    pipelines: pipelines.map((p) => {
      // The rollout as the controller reads it (a status written before the boundary reads as one).
      let rollout: PipelineRolloutStatus | undefined;
      try {
        rollout = parsePipelineObject(p).status.rollout;
      } catch {
        rollout = p.status?.rollout;
      }
      return { name: p.metadata.name, generation: Number(p.metadata.generation ?? 1), ...(rollout ? { rollout } : {}) };
    }),
    nodes: statuses.map((s) => nodeReportOf(s)).filter((r): r is NodeReport => r !== undefined).sort((a, b) => (a.nodeName < b.nodeName ? -1 : 1)),
  };
}
