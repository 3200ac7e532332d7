// An emulated cluster that serves the fleet: the default resources plus
// ConfigMaps, Secrets and the three kwp.io/v1alpha1 kinds (Pipeline with the
// status subresource), as `kwp manifests` installs them.
import { customResource, defaultEmulatedResources, type ApiServerEmulator, type EmulatedResource } from '../apiserver/emulator.js';
import { pollUntil } from '../apiserver/poll.js';
import { FLEET_RESOURCES, NODE_PIPELINE_STATUS, PIPELINE, nodeReportOf, type NodeReport } from '../../host/fleet/objects.js';

export function fleetEmulatedResources(): EmulatedResource[] {
  return [
    ...defaultEmulatedResources(),
    customResource('v1/ConfigMap', true),
    customResource('v1/Secret', true),
    ...FLEET_RESOURCES.map((r) => customResource(r.kind, false, r.plural, { statusSubresource: r.statusSubresource })),
  ];
}

/** Waits until the node's NodePipelineStatus in `api` satisfies `condition`; resolves with that report. */
export async function nodeReportWhen(api: ApiServerEmulator, node: string, condition: (r: NodeReport) => unknown, what: string, timeoutMs = 90_000): Promise<NodeReport> {
  let found: NodeReport | undefined;
  await pollUntil(() => {
    const o = api.get(NODE_PIPELINE_STATUS.kind, node);
    const r = o && nodeReportOf(o);
    if (r && condition(r)) found = r;
    return found;
  }, `${node} ${what}`, timeoutMs, 100);
  return found!;
}

/** Waits until the rollout controller has recorded `Complete` for exactly this generation of Pipeline `name`. */
export async function rolloutCompleted(api: ApiServerEmulator, generation: number, what: string, timeoutMs = 90_000, name = 'default'): Promise<void> {
  await pollUntil(() => {
    const r = (api.get(PIPELINE.kind, name) as { status?: { rollout?: { generation?: number; phase?: string } } } | undefined)?.status?.rollout;
    return r?.generation === generation && r.phase === 'Complete';
  }, `${what}: the rollout of generation ${generation} to complete`, timeoutMs, 100);
}
