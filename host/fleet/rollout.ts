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
// server resumes where the rollout was.
import { reportedFailures, type FleetPipeline, type NodeReport, type PipelineStatus } from './objects.js';

/** Whether `node` may run the Pipeline's current generation. */
export function isAdmitted(p: FleetPipeline, node: string): boolean {
  if (p.rollout.strategy === 'AllAtOnce' || p.rollbackOf !== undefined) return true;
  const r = p.status.rollout;
  return r !== undefined && r.generation === p.generation && (r.phase === 'Complete' || r.admitted.includes(node));
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
    const admitted = allAtOnce ? [...targeted] : targeted.slice(0, stepSize(p, targeted.length));
    return { kind: 'status', status: { ...(stable ? { stable } : {}), rollout: { generation: p.generation, phase: 'Progressing', admitted, message: `admitted ${admitted.length} of ${targeted.length} nodes` } } };
  }
  // RolledBack for the current generation: the status was written but the stages were not yet (the write failed); write them again.
  if (r.phase === 'RolledBack' && stable) return { kind: 'rollback', reason: r.message ?? 'a rollout step failed', status: p.status };
  if (r.phase !== 'Progressing') return { kind: 'none' };
  if (!allAtOnce) {
    for (const node of r.admitted) {
      const why = failureOf(p, node, reports.get(node));
      if (!why) continue;
      if (!stable) {
        return { kind: 'status', status: { rollout: { ...r, phase: 'Halted', message: `${why}; no earlier generation completed its rollout, so there is nothing to roll back to: nodes not admitted yet keep what they run` } } };
      }
      return { kind: 'rollback', reason: why, status: { stable, rollout: { ...r, phase: 'RolledBack', message: `${why}; rolled back to the stages of generation ${stable.generation}` } } };
    }
  }
  // Nodes that joined the target since the rollout began are admitted with the next step (AllAtOnce: at once).
  const admitted = allAtOnce ? [...new Set([...r.admitted, ...targeted])] : r.admitted;
  const current = admitted.filter((n) => targeted.includes(n));
  if (!current.every((n) => healthy(p, reports.get(n)))) {
    return admitted.length !== r.admitted.length ? { kind: 'status', status: { ...p.status, rollout: { ...r, admitted } } } : { kind: 'none' };
  }
  const remaining = targeted.filter((n) => !admitted.includes(n));
  if (remaining.length === 0) {
    return { kind: 'status', status: { stable: { generation: p.generation, stages: p.spec.stages }, rollout: { ...r, admitted, phase: 'Complete', message: `all ${targeted.length} nodes run generation ${p.generation}` } } };
  }
  const pauseMs = p.rollout.strategy === 'Steps' ? p.rollout.pauseSeconds * 1000 : 0;
  if (!r.stepHealthySince) {
    if (pauseMs > 0) return { kind: 'status', status: { ...p.status, rollout: { ...r, stepHealthySince: now.toISOString(), message: `${current.length} nodes healthy; pausing ${pauseMs / 1000} s before the next step` } } };
  } else if (now.getTime() - Date.parse(r.stepHealthySince) < pauseMs) {
    return { kind: 'none' };
  }
  const next = [...admitted, ...remaining.slice(0, stepSize(p, targeted.length))];
  const { stepHealthySince: _s, ...rest } = r;
  return { kind: 'status', status: { ...p.status, rollout: { ...rest, admitted: next, message: `admitted ${next.length} of ${targeted.length} nodes` } } };
}
