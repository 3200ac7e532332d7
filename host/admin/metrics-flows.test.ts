// The flow recorder's own counters on /metrics: what it could not record, and
// what it recorded without knowing which stage or rule decided.
import { describe, it, expect } from 'vitest';
import { AdminMetrics } from './metrics.js';
import { FlowRecorder } from '../flow-records/flow-recorder.js';
import { ClusterState } from '../state/cluster-state.js';
import type { PipelineController } from '../control/pipeline-controller.js';

describe('flow recording metrics', () => {
  it("exports the flow buffer's dropped connections and unattributed directions as counters, read when scraped", async () => {
    const recorder = new FlowRecorder({ state: new ClusterState(), bufferCapacity: 4 });
    // No pipeline: only the flow counters are asked about.
    const controller = { livePipelines: () => [], observe: () => undefined } as unknown as PipelineController;
    const metrics = new AdminMetrics({ controller, processMetrics: false, flows: recorder });
    const value = async (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(await metrics.registry.metrics())?.[1]);
    expect(await value('kwp_flow_records_dropped_total')).toBe(0);
    expect(await value('kwp_flow_records_unattributed_total')).toBe(0);
    // A full ring drops; a walk the drain cannot work out is lost (both as the packet path and the drain count them).
    const record = new Uint32Array(16);
    for (let i = 0; i < 6; i++) recorder.buffer.recordWalkDeferred(record, 1, true);
    recorder.buffer.walkLost(0);
    expect(await value('kwp_flow_records_dropped_total')).toBe(2);
    expect(await value('kwp_flow_records_unattributed_total')).toBe(2);
  });
});
