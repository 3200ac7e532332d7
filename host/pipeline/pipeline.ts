// An immutable, ordered list of started stages. Replacing the pipeline is one
// reference swap in PolicyEngine, and each decision reads that reference once,
// so a decision can never be split across two pipelines.
import type { Decision, DirectionResult, Packet, PodInfo, StageTrace } from '../contract.js';
import { Verdict, verdictName } from '../contract.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { PipelineSpec } from './spec.js';
import type { Stage } from './stage.js';
import { encodeRecord, RECORD_SIZE } from './record.js';

export const EGRESS = 0;
export const INGRESS = 1;

export class Pipeline {
  readonly stages: readonly Stage[];
  readonly spec: PipelineSpec;
  readonly revision: number;
  private readonly enforcing: readonly Stage[];
  private readonly auditing: readonly Stage[];
  private readonly record = new Uint8Array(RECORD_SIZE);

  constructor(spec: PipelineSpec, stages: Stage[], revision: number, private readonly state: ClusterState) {
    this.spec = spec;
    this.stages = Object.freeze([...stages]);
    this.revision = revision;
    this.enforcing = this.stages.filter((s) => s.mode === 'enforce');
    this.auditing = this.stages.filter((s) => s.mode === 'audit');
  }

  /**
   * The packet path: true when the source's egress and the destination's
   * ingress both allow. Pods are looked up by address in the cluster state.
   */
  allows(packet: Packet): boolean {
    const src = this.state.podByIP(packet.src);
    const dst = this.state.podByIP(packet.dst);
    const rec = this.record;
    encodeRecord(rec, 0, packet, src ? src.id : 0, dst ? dst.id : 0);
    if (this.auditing.length) this.audit(rec);
    rec[0] = EGRESS;
    if (!this.walk(rec)) return false;
    rec[0] = INGRESS;
    return this.walk(rec);
  }

  private walk(rec: Uint8Array): boolean {
    const stages = this.enforcing;
    for (let i = 0; i < stages.length; i++) {
      const v = stages[i].decide(rec);
      if (v === Verdict.Accept) return true;
      if (v === Verdict.Deny) return false;
    }
    return true;
  }

  /** Audit stages see every packet in both directions; their verdicts are counted, never used. */
  private audit(rec: Uint8Array): void {
    for (const dir of [EGRESS, INGRESS]) {
      rec[0] = dir;
      for (const s of this.auditing) s.decide(rec);
    }
  }

  /** The explained path: the same walk, with every stage's verdict and reason recorded. */
  evaluate(packet: Packet, srcPod?: PodInfo, dstPod?: PodInfo): Decision {
    const src = srcPod ?? this.state.podByIP(packet.src);
    const dst = dstPod ?? this.state.podByIP(packet.dst);
    const rec = new Uint8Array(RECORD_SIZE);
    encodeRecord(rec, 0, packet, src ? src.id : 0, dst ? dst.id : 0);
    rec[0] = EGRESS;
    const egress = this.walkTraced(rec);
    rec[0] = INGRESS;
    const ingress = this.walkTraced(rec);
    return { allowed: egress.allowed && ingress.allowed, egress, ingress };
  }

  private walkTraced(rec: Uint8Array): DirectionResult {
    const trace: StageTrace[] = [];
    let decided: boolean | undefined;
    for (const stage of this.stages) {
      if (decided !== undefined && stage.mode === 'enforce') continue;
      const v = stage.decide(rec);
      const step: StageTrace = { stage: stage.name, label: stage.label, verdict: verdictName(v), mode: stage.mode };
      if (stage.lastFailure) step.failure = stage.lastFailure;
      else {
        const reason = stage.lastExplanation();
        if (reason) step.reason = reason;
      }
      trace.push(step);
      if (stage.mode === 'audit') continue;
      if (v === Verdict.Accept) decided = true;
      else if (v === Verdict.Deny) decided = false;
    }
    return { allowed: decided ?? true, trace };
  }

  /** Which traffic the dataplane must queue: all, or traffic to/from these pods' IPs. */
  interest(): { all: boolean; ips: string[] } {
    const ids = new Set<number>();
    for (const stage of this.stages) {
      const s = stage.subjects();
      if (s === 'all') return { all: true, ips: [] };
      for (const id of s) ids.add(id);
    }
    const ips: string[] = [];
    for (const id of ids) {
      const pod = this.state.podById(id);
      if (pod) ips.push(...pod.ips);
    }
    return { all: false, ips };
  }

  dispose(): void {
    for (const s of this.stages) s.dispose();
  }
}
