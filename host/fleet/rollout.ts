// The rollout of a Pipeline generation, as pure decisions over the Pipeline
// and the nodes' reports, so the controller and the nodes agree on one rule
// and tests can walk every step without a cluster:
//
// - AllAtOnce, or a generation written by a rollback: every targeted node is
//   admitted at once (nodes apply it without waiting for the controller).
// - Steps: the controller admits `step` nodes (a count or a percentage of the
//   targeted nodes, at least one), waits until each admitted node reports the
//   generation applied and healthy, then `pauseSeconds`, then admits the next
//   step. A node of the step that reports `maxFailures` failures (traps, fuel
//   exhaustions, failure-policy answers) or refuses the generation fails the
//   step: the controller writes the last completed generation's stages back
//   (a new generation marked as a rollback, which goes everywhere at once),
//   so nodes never admitted never run the failed one.
//
// The state lives in the Pipeline's status, so a restarted controller or API
// server resumes where the rollout was. Nodes are admitted in node-name
// order, so the status names only the last node admitted (a boundary), not
// every admitted node: its size, sent to every watching agent on each write,
// does not grow with the cluster.
import { reportedFailures, type FleetPipeline, type NodeReport, type PipelineStatus } from './objects.js';

/** Whether `node` may run the Pipeline's current generation. */
export function isAdmitted(p: FleetPipeline, node: string): boolean {
  if (p.rollout.strategy === 'AllAtOnce' || p.rollbackOf !== undefined) return true;
  const r = p.status.rollout;
  return r !== undefined && r.generation === p.generation && (r.phase === 'Complete' || withinBoundary(node, r.admittedThrough));
}

/** Admission is in node-name order (plain string order, the same on the controller and every node). */
function withinBoundary(node: string, through: string | undefined): boolean {
  return through !== undefined && node <= through;
}

/** The rollout's admission fields for the first `count` of the (sorted) targeted nodes. */
function admitting(targeted: string[], count: number): { admittedCount: number; admittedThrough?: string } {
  const n = Math.min(count, targeted.length);
  return n > 0 ? { admittedCount: n, admittedThrough: targeted[n - 1] } : { admittedCount: 0 };
}

export type RolloutAction =
  | { kind: 'none' }
  | { kind: 'status'; status: PipelineStatus }
  /** Write the stable stages back as a new generation, then record the status. */
  | { kind: 'rollback'; status: PipelineStatus; reason: string };

function stepSize(p: FleetPipeline, targeted: number): number {
  if (p.rollout.strategy !== 'Steps') return targeted;
  const s = p.rollout.step;
  return Math.max(1, 'nodes' in s ? s.nodes : Math.ceil((targeted * s.percent) / 100));
}

/** Why a node of the current step failed it, or undefined when it did not. */
function failureOf(p: FleetPipeline, node: string, r: NodeReport | undefined): string | undefined {
  if (!r || r.pipeline !== p.objectName || r.observedGeneration !== p.generation) return undefined;
  if (r.lastError?.generation === p.generation) return `node ${node} refused generation ${p.generation}: ${r.lastError.code}: ${r.lastError.message}`;
  if (p.rollout.strategy !== 'Steps' || r.appliedGeneration !== p.generation) return undefined;
  const failures = reportedFailures(r);
  if (failures < p.rollout.maxFailures) return undefined;
  const detail = r.stages.filter((s) => s.traps + s.fuelExhausted + s.failurePolicyAnswers > 0).map((s) => `${s.name}: ${s.traps} traps, ${s.fuelExhausted} fuel exhaustions, ${s.failurePolicyAnswers} failure-policy answers`).join('; ');
  return `node ${node} reported ${failures} failures running generation ${p.generation} (threshold ${p.rollout.maxFailures}): ${detail}`;
}

function healthy(p: FleetPipeline, r: NodeReport | undefined): boolean {
  return r !== undefined && r.pipeline === p.objectName && r.appliedGeneration === p.generation && r.observedGeneration === p.generation && r.lastError?.generation !== p.generation;
}

/**
 * The next action for one Pipeline, given the targeted nodes (sorted, the
 * admission order) and their reports.
 */
export function planRollout(p: FleetPipeline, targeted: string[], reports: Map<string, NodeReport>, now: Date): RolloutAction {
  const r = p.status.rollout;
  const stable = p.status.stable;
  const allAtOnce = p.rollout.strategy === 'AllAtOnce' || p.rollbackOf !== undefined;
  if (!r || r.generation !== p.generation) {
    const admission = admitting(targeted, allAtOnce ? targeted.length : stepSize(p, targeted.length));
    return { kind: 'status', status: { ...(stable ? { stable } : {}), rollout: { generation: p.generation, phase: 'Progressing', ...admission, message: `admitted ${admission.admittedCount} of ${targeted.length} nodes` } } };
  }
  // RolledBack for the current generation: the status was written but the stages were not yet (the write failed); write them again.
  if (r.phase === 'RolledBack' && stable) return { kind: 'rollback', reason: r.message ?? 'a rollout step failed', status: p.status };
  if (r.phase !== 'Progressing') return { kind: 'none' };
  // Nodes that joined the target since the rollout began are admitted with the next step, or at once when
  // their name sorts within the boundary (AllAtOnce: at once, the boundary moves to the last targeted node).
  const last = targeted[targeted.length - 1];
  const through = allAtOnce && last !== undefined && !withinBoundary(last, r.admittedThrough) ? last : r.admittedThrough;
  const current = targeted.filter((n) => withinBoundary(n, through));
  if (!allAtOnce) {
    for (const node of current) {
      const why = failureOf(p, node, reports.get(node));
      if (!why) continue;
      if (!stable) {
        return { kind: 'status', status: { rollout: { ...r, admittedCount: current.length, phase: 'Halted', message: `${why}; no earlier generation completed its rollout, so there is nothing to roll back to: nodes not admitted yet keep what they run` } } };
      }
      return { kind: 'rollback', reason: why, status: { stable, rollout: { ...r, admittedCount: current.length, phase: 'RolledBack', message: `${why}; rolled back to the stages of generation ${stable.generation}` } } };
    }
  }
  const admission = { admittedCount: current.length, ...(through !== undefined ? { admittedThrough: through } : {}) };
  if (!current.every((n) => healthy(p, reports.get(n)))) {
    return through !== r.admittedThrough ? { kind: 'status', status: { ...p.status, rollout: { ...r, ...admission } } } : { kind: 'none' };
  }
  const remaining = targeted.filter((n) => !withinBoundary(n, through));
  if (remaining.length === 0) {
    return { kind: 'status', status: { stable: { generation: p.generation, stages: p.spec.stages }, rollout: { ...r, ...admission, phase: 'Complete', message: `all ${targeted.length} nodes run generation ${p.generation}` } } };
  }
  const pauseMs = p.rollout.strategy === 'Steps' ? p.rollout.pauseSeconds * 1000 : 0;
  if (!r.stepHealthySince) {
    if (pauseMs > 0) return { kind: 'status', status: { ...p.status, rollout: { ...r, stepHealthySince: now.toISOString(), message: `${current.length} nodes healthy; pausing ${pauseMs / 1000} s before the next step` } } };
  } else if (now.getTime() - Date.parse(r.stepHealthySince) < pauseMs) {
    return { kind: 'none' };
  }
  const next = admitting(targeted, current.length + stepSize(p, targeted.length));
  const { stepHealthySince: _s, ...rest } = r;
  return { kind: 'status', status: { ...p.status, rollout: { ...rest, ...next, message: `admitted ${next.admittedCount} of ${targeted.length} nodes` } } };
}
