import { describe, expect, it } from 'vitest';
import { planRollout, isAdmitted } from './rollout.js';
import { parsePipelineObject, type FleetPipeline, type NodeReport, type PipelineStatus } from './objects.js';
import type { KubeObject } from '../contract.js';

const stagesA = [{ name: 'np', module: 'network-policy' }];
const stagesB = [{ name: 'scripted', module: 'scripted' }, ...stagesA];
const nodes = ['n1', 'n2', 'n3'];
const now = new Date('2026-12-01T10:00:00Z');

function pipeline(status: PipelineStatus, over: Partial<FleetPipeline> = {}): FleetPipeline {
  return {
    objectName: 'default', generation: 2, spec: { stages: stagesB },
    rollout: { strategy: 'Steps', step: { nodes: 1 }, pauseSeconds: 0, maxFailures: 3 },
    status, ...over,
  };
}

function report(node: string, applied: number | undefined, failures = 0, error?: string): NodeReport {
  return {
    nodeName: node, pipeline: 'default', observedGeneration: 2, ...(applied !== undefined ? { appliedGeneration: applied } : {}), revision: 3, since: now.toISOString(), ready: true, localOverride: false,
    stages: [{ name: 'scripted', module: 'scripted@1.0.0', sha256: 'a'.repeat(64), traps: failures, fuelExhausted: 0, failurePolicyAnswers: failures }],
    ...(error ? { lastError: { code: error, message: 'refused', time: now.toISOString(), generation: 2 } } : {}),
  };
}

const stable = { generation: 1, stages: stagesA };

describe('rollout planning', () => {
  it('admits the first step of a new generation and keeps the stable stages', () => {
    const a = planRollout(pipeline({ stable }), nodes, new Map(), now);
    expect(a).toEqual({ kind: 'status', status: { stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 1, admittedThrough: 'n1', message: 'admitted 1 of 3 nodes' } } });
  });

  it('admits nobody else until the step reports the generation applied, then the next step', () => {
    const p = pipeline({ stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 1, admittedThrough: 'n1' } });
    expect(planRollout(p, nodes, new Map([['n1', report('n1', 1)]]), now)).toEqual({ kind: 'none' });
    const next = planRollout(p, nodes, new Map([['n1', report('n1', 2)]]), now);
    expect(next.kind === 'status' && next.status.rollout).toMatchObject({ admittedCount: 2, admittedThrough: 'n2' });
    expect(isAdmitted(p, 'n1')).toBe(true);
    expect(isAdmitted(p, 'n2')).toBe(false);
  });

  it('waits pauseSeconds after a healthy step before the next', () => {
    const base = pipeline({ stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 1, admittedThrough: 'n1' } }, { rollout: { strategy: 'Steps', step: { nodes: 1 }, pauseSeconds: 30, maxFailures: 3 } });
    const reports = new Map([['n1', report('n1', 2)]]);
    const paused = planRollout(base, nodes, reports, now);
    expect(paused.kind === 'status' && paused.status.rollout!.stepHealthySince).toBe(now.toISOString());
    const waiting = { ...base, status: (paused as { status: PipelineStatus }).status };
    expect(planRollout(waiting, nodes, reports, new Date(now.getTime() + 29_000))).toEqual({ kind: 'none' });
    const after = planRollout(waiting, nodes, reports, new Date(now.getTime() + 30_000));
    expect(after.kind === 'status' && after.status.rollout).toMatchObject({ admittedCount: 2, admittedThrough: 'n2' });
  });

  it('rolls back to the stable stages when a node of the step reports failures at the threshold', () => {
    const p = pipeline({ stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 1, admittedThrough: 'n1' } });
    // Below the threshold the step is healthy and the next one goes ahead.
    expect(planRollout(p, nodes, new Map([['n1', report('n1', 2, 2)]]), now)).toMatchObject({ kind: 'status', status: { rollout: { admittedCount: 2, admittedThrough: 'n2' } } });
    const a = planRollout(p, nodes, new Map([['n1', report('n1', 2, 3)]]), now);
    expect(a.kind).toBe('rollback');
    expect(a.kind === 'rollback' && a.status.rollout!.phase).toBe('RolledBack');
    expect(a.kind === 'rollback' && a.reason).toMatch(/^node n1 reported 3 failures running generation 2 \(threshold 3\): scripted: 3 traps/);
  });

  it('rolls back when a node of the step refuses the generation, and halts when nothing completed before', () => {
    const reports = new Map([['n1', report('n1', undefined, 0, 'KWP_ERR_SIGNATURE_INVALID')]]);
    const progressing = { generation: 2, phase: 'Progressing' as const, admittedCount: 1, admittedThrough: 'n1' };
    expect(planRollout(pipeline({ stable, rollout: progressing }), nodes, reports, now).kind).toBe('rollback');
    const halted = planRollout(pipeline({ rollout: progressing }), nodes, reports, now);
    expect(halted.kind === 'status' && halted.status.rollout!.phase).toBe('Halted');
  });

  it('completes when every targeted node runs the generation, which becomes the stable one', () => {
    const p = pipeline({ stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 3, admittedThrough: 'n3' } });
    const a = planRollout(p, nodes, new Map(nodes.map((n) => [n, report(n, 2)])), now);
    expect(a).toMatchObject({ kind: 'status', status: { stable: { generation: 2, stages: stagesB }, rollout: { phase: 'Complete' } } });
  });

  it('sends AllAtOnce and rollback generations to every node without waiting for the controller', () => {
    expect(isAdmitted(pipeline({}, { rollout: { strategy: 'AllAtOnce' } }), 'n3')).toBe(true);
    expect(isAdmitted(pipeline({}, { rollbackOf: 1 }), 'n3')).toBe(true);
    expect(isAdmitted(pipeline({}), 'n3')).toBe(false);
  });

  it('keeps the status the same size however many nodes are admitted: a boundary in node-name order, not a list', () => {
    const many = Array.from({ length: 1000 }, (_, i) => `node-${String(i).padStart(4, '0')}`);
    const first = planRollout(pipeline({ stable }, { rollout: { strategy: 'Steps', step: { percent: 50 }, pauseSeconds: 0, maxFailures: 3 } }), many, new Map(), now);
    expect(first.kind === 'status' && first.status.rollout).toMatchObject({ admittedCount: 500, admittedThrough: 'node-0499' });
    expect(JSON.stringify(first.kind === 'status' && first.status.rollout).length).toBeLessThan(200);
    const p = pipeline((first as { status: PipelineStatus }).status);
    expect(isAdmitted(p, 'node-0499')).toBe(true);
    expect(isAdmitted(p, 'node-0500')).toBe(false);
  });

  it('admits a node that joins mid-rollout at once when its name sorts within the boundary, else with a later step', () => {
    const p = pipeline({ stable, rollout: { generation: 2, phase: 'Progressing', admittedCount: 1, admittedThrough: 'n2' } });
    // n1 joined: it is within the boundary, so the step waits for it too.
    const reports = new Map([['n2', report('n2', 2)]]);
    expect(planRollout(p, ['n1', 'n2', 'n3'], reports, now)).toEqual({ kind: 'none' });
    expect(isAdmitted(p, 'n1')).toBe(true);
    reports.set('n1', report('n1', 2));
    expect(planRollout(p, ['n1', 'n2', 'n3'], reports, now)).toMatchObject({ kind: 'status', status: { rollout: { admittedCount: 3, admittedThrough: 'n3' } } });
  });

  it('reads a status written with the list of admitted names as the boundary that list implies', () => {
    const o = { apiVersion: 'kwp.io/v1alpha1', kind: 'Pipeline', metadata: { name: 'default', generation: 2 }, stages: stagesB,
      rollout: { strategy: 'Steps', step: 1 }, status: { stable, rollout: { generation: 2, phase: 'Progressing', admitted: ['n2', 'n1'] } } } as unknown as KubeObject;
    const p = parsePipelineObject(o);
    expect(p.status.rollout).toEqual({ generation: 2, phase: 'Progressing', admittedCount: 2, admittedThrough: 'n2' });
    expect(isAdmitted(p, 'n2')).toBe(true);
    expect(isAdmitted(p, 'n3')).toBe(false);
  });

  it('writes the rollback again when the status says RolledBack but the stages were not written yet', () => {
    const p = pipeline({ stable, rollout: { generation: 2, phase: 'RolledBack', admittedCount: 1, admittedThrough: 'n1', message: 'n1 failed' } });
    expect(planRollout(p, nodes, new Map(), now)).toMatchObject({ kind: 'rollback', reason: 'n1 failed' });
  });
});
