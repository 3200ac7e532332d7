// An immutable, ordered list of started stages. Replacing the pipeline is one
// reference swap in PolicyEngine, and each decision reads that reference once,
// so a decision can never be split across two pipelines.
import type { Decision, DirectionResult, Packet, PodInfo, StageTrace } from '../contract.js';
import { Verdict, verdictName } from '../contract.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { PipelineSpec } from './spec.js';
import { DRAIN_FAILED, DRAIN_UNAVAILABLE, type Stage } from './stage.js';
import { encodeRecord, encodeRecordWords, MAX_RECORDS_PER_CALL, OFF_DIRECTION, OFF_ICMP_TYPE, PAIR_RESULT_SIZE, RECORD_SIZE, RecordDirection } from '../abi/record.js';
import { type FlowBuffer, Outcome } from '../flow-records/flow-buffer.js';
import type { PairAnswers, PairCodes } from '../runtime/instance.js';

export const EGRESS = RecordDirection.Egress;
export const INGRESS = RecordDirection.Ingress;
/** Packets per module call on the batched path (a module with a smaller kwp_batch_capacity gets fewer). */
export const BATCH_RECORDS = MAX_RECORDS_PER_CALL;

/** The pair walk's `need` values: which directions of a packet are still undecided, or denied. */
const NEED_EGRESS = 1;
const NEED_INGRESS = 2;
const NEED_BOTH = 3;
const NEED_DENIED = 4;
/**
 * Recording only: ingress was denied while egress is still undecided, and
 * the record's egress cannot be left to the drain (an ICMP packet, whose
 * type and code the slot does not keep). The packet is denied, but its
 * egress walks on, so that the record names the stage that ends egress as
 * the one-direction walk does (and ingress is Skipped when that stage denies).
 */
const INGRESS_DENIED = 8;
/** The word of an encoded record holding the ICMP type and code. */
const ICMP_WORD = OFF_ICMP_TYPE >> 2;
/** Enforcing stages the one-packet walk's subject masks cover (one bit each in a byte per pod); a longer pipeline walks without them. */
const MASKED_STAGES = 8;

/** Whether finishWalk's outcome word denies: a Deny, or a Failure (a failure policy's answer that ends a walk is a Deny). */
function deniedBy(word: number): boolean {
  const outcome = word & 0xff;
  return outcome === Outcome.Deny || outcome === Outcome.Failure;
}

function setDirection(records: Uint8Array, count: number, dir: number): void {
  for (let i = 0, p = OFF_DIRECTION; i < count; i++, p += RECORD_SIZE) records[p] = dir;
}

/** A module call the batched walk needs: `stage` decides the first `n` records of `batch` into `out` (with their reason and rule codes when asked). */
interface BatchStep { stage: Stage; batch: Uint8Array; n: number; out: Uint8Array; reasons: Uint32Array | undefined; rules: Uint32Array | undefined }

export class Pipeline {
  readonly stages: readonly Stage[];
  readonly spec: PipelineSpec;
  readonly revision: number;
  private readonly enforcing: readonly Stage[];
  /** The position in `stages` of each enforcing stage, as flow records name them. */
  private readonly enforcingIndex: Int16Array;
  /** The audit stages, in pipeline order; flow records number them from 0 in this order. */
  readonly auditing: readonly Stage[];
  private readonly record = new Uint8Array(RECORD_SIZE);
  private readonly record32 = new Uint32Array(this.record.buffer);
  // Scratch for allowsBatch: the chunk's records, packed records for later stages, indices and verdicts.
  private readonly encoded = new Uint8Array(RECORD_SIZE * BATCH_RECORDS);
  private readonly encoded32 = new Uint32Array(this.encoded.buffer);
  private readonly work = new Uint8Array(RECORD_SIZE * BATCH_RECORDS);
  private readonly work32 = new Uint32Array(this.work.buffer);
  private readonly encodedOne = this.encoded.subarray(0, RECORD_SIZE);
  private readonly workOne = this.work.subarray(0, RECORD_SIZE);
  private readonly pending = new Int32Array(BATCH_RECORDS);
  private readonly allowedIdx = new Int32Array(BATCH_RECORDS);
  private readonly verdicts = new Uint8Array(BATCH_RECORDS);
  private readonly srcIds = new Uint32Array(BATCH_RECORDS);
  private readonly dstIds = new Uint32Array(BATCH_RECORDS);
  /** Subject filtering: positions in `pending` sent to the stage, their record indices, and their verdicts. */
  private readonly selected = new Int32Array(BATCH_RECORDS);
  private readonly selectedIdx = new Int32Array(BATCH_RECORDS);
  private readonly selectedVerdicts = new Uint8Array(BATCH_RECORDS);
  // Multicluster: 1 where the record's source (egress) or destination (ingress) is a pod of another cluster.
  private readonly remoteSrc = new Uint8Array(BATCH_RECORDS);
  private readonly remoteDst = new Uint8Array(BATCH_RECORDS);
  private anyRemote = false;
  // Flow recording on the batched path: each record's buffer slot (-1: not recorded), and each stage's reason and rule codes.
  private readonly slots = new Int32Array(BATCH_RECORDS);
  private readonly reasons = new Uint32Array(BATCH_RECORDS);
  private readonly rules = new Uint32Array(BATCH_RECORDS);
  private readonly selectedReasons = new Uint32Array(BATCH_RECORDS);
  private readonly selectedRules = new Uint32Array(BATCH_RECORDS);
  private flows: FlowBuffer | undefined;
  /** The pair walk's state per record of a chunk: bit 0 egress still undecided, bit 1 ingress; NEED_DENIED once a stage denied. */
  private readonly need = new Uint8Array(BATCH_RECORDS);
  /** The pair walk's chunk, per record: the enforcing stages its pods' subject masks ask (startPairs, while the masks are valid). */
  private readonly askBits = new Uint8Array(BATCH_RECORDS);
  /**
   * Whether the batched pair walk lets instances take a part of a chunk
   * straight from the encoded records (askPairs); off, it packs them first
   * as it did before. On by default; a switch so that tests and the bench
   * can compare the two in one process.
   */
  pickedPairs = true;
  /** Whether askBits holds this chunk's bits: the masks were valid when the chunk started. */
  private chunkMasked = false;
  private readonly ingressVerdicts = new Uint8Array(BATCH_RECORDS);
  /** `allows`'s pair walk verdicts: its own, since allows also runs while an asynchronous batch walk holds the batch scratch. */
  /** allowsRecording's chunk of one for the recorded pair walk, and its verdict. */
  private readonly onePacket: Packet[] = [];
  private readonly oneVerdict = new Uint8Array(1);
  private readonly oneEgress = new Uint8Array(1);
  private readonly oneIngress = new Uint8Array(1);
  /** The pair walk's codes while recording (each direction's reason and rule, by position in the stage call). */
  private readonly pairCodes: PairCodes = {
    egressReasons: this.reasons, egressRules: this.rules,
    ingressReasons: new Uint32Array(BATCH_RECORDS), ingressRules: new Uint32Array(BATCH_RECORDS),
  };
  /**
   * The in-place recorded pair walk (decideChunkRecordedInPlace), per record
   * r and direction d at 2 r + d: the slot's outcome word, and the word where
   * the deciding stage's module left its reason code (the rule code follows).
   */
  private readonly outcomeWords = new Uint32Array(2 * BATCH_RECORDS);
  private readonly codeAt = new Int32Array(2 * BATCH_RECORDS);
  /** Per enforcing stage, where its pair call leaves its answers in this chunk; per pipeline position, its module's memory after the call. */
  private readonly answerSources: Array<PairAnswers | undefined> = [];
  /** Each enforcing stage's one-record pair answers while the masks are valid, and whether all stages have them (refreshMasks). */
  private readonly oneSources: Array<PairAnswers | undefined> = [];
  private oneInPlace = false;
  /**
   * Whether every enforcing stage decides pairs and its module's answers
   * follow from the record (its source port excepted) and the module's
   * state (an SDK decision cache is on: Evaluator.cachesDecisions), found
   * with the masks: then the recorded walks leave the whole walk (the
   * deciding stages and their codes) to the drain (finishWalk).
   */
  private oneDeferred = false;
  /**
   * Whether the recorded `allows` may leave codes to the drain
   * (finishWalk) where the stages allow it; false keeps the walk
   * that copies them (allowsRecordedInPlace), which tests compare it with.
   */
  attributesInDrain = true;
  /** The flow buffers this pipeline has recorded to (flowBuffer). */
  private readonly recordedTo = new Set<FlowBuffer>();
  private readonly answerWords: Array<Uint32Array | undefined> = [];
  /**
   * Whether allowsBatch may walk both directions at once when every
   * enforcing stage decides pairs (ABI 1.4), and `allows` while its stages
   * do; false keeps the one-direction walk, which tests and the bench
   * compare it with.
   */
  pairWalk = true;
  /** Whether any stage runs its instance in a thread of its own: then allowsBatchAsync pays. */
  private readonly threaded: boolean;
  /** The asynchronous walks, one after another (they share the batch scratch); walksInFlight counts those asked for and not done. */
  private walking: Promise<void> = Promise.resolve();
  private walksInFlight = 0;

  /**
   * The one-packet walk's subject masks (see refreshMasks): per pod id, bit
   * s set when enforcing stage s selects that pod; `maskAlways` the stages
   * asked whatever the pods; `maskPairs` how many enforcing stages from the
   * first decide pairs. Read only while `masksValid`: every change of a
   * stage's filter or instance clears it at once (Stage.watchFilter), and
   * the masks are rebuilt off the packet path.
   */
  private masks = new Uint8Array(0);
  private maskAlways = 0;
  private maskPairs = 0;
  private masksValid = false;
  private masksChanged = false;
  private masksRebuildScheduled = false;
  /** Records the masked walk skipped, per enforcing stage: folded into the stage's counters when they are read (Stage.addSkipTally). */
  private readonly skipTally: Float64Array;
  private readonly releases: (() => void)[] = [];

  constructor(spec: PipelineSpec, stages: Stage[], revision: number, private readonly state: ClusterState) {
    this.spec = spec;
    this.stages = Object.freeze([...stages]);
    this.revision = revision;
    this.enforcing = this.stages.filter((s) => s.mode === 'enforce');
    this.auditing = this.stages.filter((s) => s.mode === 'audit');
    this.enforcingIndex = Int16Array.from(this.enforcing, (s) => this.stages.indexOf(s));
    for (let i = 0; i < this.stages.length; i++) this.answerWords.push(undefined);
    for (let i = 0; i < this.enforcing.length; i++) this.answerSources.push(undefined);
    this.threaded = this.stages.some((s) => s.isolation !== 'thread');
    this.skipTally = new Float64Array(this.enforcing.length);
    if (this.enforcing.length <= MASKED_STAGES) {
      const invalidate = (replaced: boolean) => {
        if (replaced) this.forgetInstances();
        this.masksStale();
      };
      this.enforcing.forEach((stage, i) => {
        this.releases.push(stage.watchFilter(invalidate), stage.addSkipTally(this.skipTally, i));
      });
      // Built now, so that the first decisions (the agent's JIT warm-up among them) take the masked walk.
      this.refreshMasks();
    }
  }

  /**
   * A stage has a new instance: what the walks kept of the instances (each
   * stage's answers in place, views of their memories) is dropped now rather
   * than at the masks' rebuild a turn later, so the replaced instance and its
   * memory are not kept reachable by this pipeline (the memory bench caught a
   * 2.7 MiB memory so: docs/performance.md, "Where the agent's memory goes").
   * Nothing reads them before they are set again: the one-record walks wait
   * for the masks (masksValid), a recorded chunk finds its sources first
   * (answersStayInPlace) and sets each deciding stage's words before it
   * records them.
   */
  private forgetInstances(): void {
    this.oneSources.fill(undefined);
    this.oneInPlace = false;
    this.answerSources.fill(undefined);
    this.answerWords.fill(undefined);
  }

  /** A stage's filter or instance changed: the masks are not read until rebuilt, one turn of the event loop later. */
  private masksStale(): void {
    this.masksValid = false;
    this.masksChanged = true;
    if (this.masksRebuildScheduled || this.disposed) return;
    this.masksRebuildScheduled = true;
    setImmediate(() => {
      this.masksRebuildScheduled = false;
      this.refreshMasks();
    }).unref();
  }

  /**
   * Rebuilds the subject masks from the stages' filters, so that the
   * one-packet walk skips a stage neither of whose pods it selects from two
   * bytes of one table, without reading the stage, its instance or its
   * filter (after the agent slept, each of those is a cache miss: four
   * skipped stages cost about 2.5 µs of a cold decision). A filter asked for
   * here may be computed here (a new instance's first), which is the change
   * it announces: the build repeats until no stage changed under it. Public
   * for tests that change what a stage answers behind its back (a mocked
   * decidesPairs): a real change comes with the stage's notice.
   */
  refreshMasks(): void {
    if (this.disposed) return;
    const stages = this.enforcing;
    for (let round = 0; round < 3; round++) {
      this.masksChanged = false;
      let always = 0;
      let size = 0;
      const filters = stages.map((stage) => stage.subjectFilter());
      filters.forEach((f, i) => {
        if (f === null) always |= 1 << i;
        else if (f.length > size) size = f.length;
      });
      const masks = this.masks.length === size ? this.masks.fill(0) : new Uint8Array(size);
      for (let i = 0; i < filters.length; i++) {
        const f = filters[i];
        if (f === null) continue;
        const bit = 1 << i;
        for (let id = 0; id < f.length; id++) if (f[id] === 1) masks[id] |= bit;
      }
      let pairs = 0;
      while (pairs < stages.length && stages[pairs].decidesPairs) pairs++;
      if (this.masksChanged) continue;
      this.masks = masks;
      this.maskAlways = always;
      this.maskPairs = pairs;
      // Whether allowsRecordedInPlace may record in place, and from where: what each
      // stage's instance answers, which changes only with the instance (a notice, so a rebuild here).
      let inPlace = pairs === stages.length;
      for (let s = 0; s < stages.length; s++) {
        // Every entry written, so none keeps an instance from before (read only while all are in place).
        const source = inPlace ? stages[s].pairAnswersInPlace(1) : undefined;
        this.oneSources[s] = source;
        if (source === undefined) inPlace = false;
      }
      this.oneInPlace = inPlace;
      this.oneDeferred = pairs === stages.length && stages.every((stage) => stage.decisionCacheStats() !== undefined);
      this.masksValid = true;
      return;
    }
    // Still changing under the build: another one, a turn later.
    this.masksStale();
  }

  /**
   * Set while flow recording is on (PolicyEngine.recordFlows): `allows`
   * then appends one compact record per decided connection. Mutable because
   * recording is switched on and off for the active pipeline, not rebuilt.
   */
  get flowBuffer(): FlowBuffer | undefined { return this.flows; }

  set flowBuffer(buffer: FlowBuffer | undefined) {
    this.flows = buffer;
    buffer?.register(this.revision, this);
    // Each stage drains the buffer before its module changes, and the pipeline before it is disposed,
    // so the drain asks what decided (attributeDeferred, finishEgress).
    if (buffer) {
      this.recordedTo.add(buffer);
      for (const stage of this.stages) stage.guardFlows(buffer);
    }
  }

  /**
   * The packet path: true when the source's egress and the destination's
   * ingress both allow. Pods are looked up by address in the cluster state.
   */
  allows(packet: Packet): boolean {
    const flows = this.flows;
    const state = this.state;
    // Outside multicluster mode only the pods' ids matter: an IPv4 lookup
    // then reads the address index's slot and not the PodInfo (a cache miss
    // per end after the agent slept).
    if (this.masksValid && this.pairWalk && !state.multiclusterMode) {
      const srcId = state.podIdByIP(packet.src);
      const dstId = state.podIdByIP(packet.dst);
      encodeRecordWords(this.record32, this.record, 0, packet, srcId, dstId);
      if (flows === undefined) return this.decideOneInPairs(this.record, srcId, dstId, NEED_BOTH, true);
      // Recorded with its walk left to the drain: the unrecorded walk itself, then the record's words and the verdict.
      if (this.oneDeferred && this.attributesInDrain && this.auditing.length === 0) {
        const allowed = this.decideOneInPairs(this.record, srcId, dstId, NEED_BOTH, true);
        flows.recordWalkDeferred(this.record32, this.revision, allowed);
        return allowed;
      }
    }
    // Any other recording is its own function so that this one stays as small (and as inlined) as it is without it.
    if (flows !== undefined) return this.allowsRecording(packet, flows);
    const src = state.podByIP(packet.src);
    const dst = state.podByIP(packet.dst);
    const srcId = src ? src.id : 0;
    const dstId = dst ? dst.id : 0;
    const rec = this.record;
    encodeRecord(rec, 0, packet, srcId, dstId);
    if (this.pairWalk) {
      const need = (this.isRemote(src) ? 0 : NEED_EGRESS) | (this.isRemote(dst) ? 0 : NEED_INGRESS);
      return this.decideOneInPairs(rec, srcId, dstId, need, this.masksValid);
    }
    return this.decideEncoded(rec, src, dst, srcId, dstId);
  }

  /**
   * `allows`'s pair walk: one module call per stage for both directions of
   * the packet while the stages decide pairs (ABI 1.4), as the batched pair
   * walk does for a chunk. A queued packet is usually a tuple's first (the
   * kernel fast path keeps repeats in the kernel) and is decided on cold
   * CPU caches, so each module call avoided is a stage's code, instance and
   * memory not touched twice. From the first enforcing stage that does not
   * decide pairs on, the rest is the one-direction walk (egress through the
   * remaining stages, then ingress if egress allowed), and an ingress denied
   * before it still lets egress walk on, so such a module (which may have
   * side effects) is asked exactly what the one-direction walk asks it; the
   * stages before it decide pairs, which only modules without side effects
   * do (sdk/ABI.md). Each direction ends at the first stage that accepts or
   * denies it, so the verdict is the one-direction walk's.
   */
  private decideOneInPairs(rec: Uint8Array, srcId: number, dstId: number, need: number, masked: boolean): boolean {
    if (this.auditing.length) this.audit(rec);
    const stages = this.enforcing;
    // Masked (the masks are valid): which stages to ask comes from two bytes of
    // the pipeline's table, and how many decide pairs from its last build, so
    // a skipped stage is not read at all; else from each stage's filter.
    const masks = this.masks;
    const ask = masked ? this.maskAlways | (srcId < masks.length ? masks[srcId] : 0) | (dstId < masks.length ? masks[dstId] : 0) : 0;
    let pairs = 0;
    if (masked) pairs = this.maskPairs;
    else while (pairs < stages.length && stages[pairs].decidesPairs) pairs++;
    const egress = this.oneEgress;
    const ingress = this.oneIngress;
    let ingressDenied = false;
    let s = 0;
    for (; s < pairs && need !== 0; s++) {
      if (masked) {
        if ((ask & (1 << s)) === 0) {
          // Counted per direction, as the one-direction walk counts them.
          this.skipTally[s] += need === NEED_BOTH ? 2 : 1;
          continue;
        }
      } else {
        const subjects = stages[s].subjectFilter();
        if (subjects !== null && subjects[srcId] !== 1 && subjects[dstId] !== 1) {
          stages[s].countSkipped(need === NEED_BOTH ? 2 : 1);
          continue;
        }
      }
      const stage = stages[s];
      // need 1, 2, 3 asks for egress, ingress, both: direction byte 0, 1, DIRECTION_BOTH.
      rec[OFF_DIRECTION] = need - 1;
      stage.decidePairOne(rec, this.record32, egress, ingress);
      if ((need & NEED_EGRESS) !== 0) {
        const v = egress[0];
        if (v === Verdict.Deny) return false;
        if (v === Verdict.Accept) need &= ~NEED_EGRESS;
      }
      if ((need & NEED_INGRESS) !== 0) {
        const v = ingress[0];
        if (v === Verdict.Deny) {
          if (pairs === stages.length) return false;
          ingressDenied = true;
          need &= ~NEED_INGRESS;
        } else if (v === Verdict.Accept) need &= ~NEED_INGRESS;
      }
    }
    return this.finishOneDirection(rec, srcId, dstId, s, need, ingressDenied);
  }

  /**
   * The end of a one-packet pair walk stopped at enforcing stage `s` (the
   * first that does not decide pairs, or the last stage): the one-direction
   * walk from there for the directions still undecided in `need`.
   */
  private finishOneDirection(rec: Uint8Array, srcId: number, dstId: number, s: number, need: number, ingressDenied: boolean): boolean {
    const stages = this.enforcing;
    if ((need & NEED_EGRESS) !== 0 && s < stages.length) {
      rec[OFF_DIRECTION] = EGRESS;
      const d = this.decidingStage(rec, srcId, dstId, s);
      if (d >= 0 && (d & 1) === 0) return false;
    }
    if (ingressDenied) return false;
    if ((need & NEED_INGRESS) === 0 || s === stages.length) return true;
    rec[OFF_DIRECTION] = INGRESS;
    const d = this.decidingStage(rec, srcId, dstId, s);
    return d < 0 || (d & 1) === 1;
  }

  /** The walk of both directions for an encoded record, nothing recorded. */
  private decideEncoded(rec: Uint8Array, src: PodInfo | undefined, dst: PodInfo | undefined, srcId: number, dstId: number): boolean {
    if (this.auditing.length) this.audit(rec);
    rec[OFF_DIRECTION] = EGRESS;
    if (!this.isRemote(src) && !this.walk(rec, srcId, dstId)) return false;
    rec[OFF_DIRECTION] = INGRESS;
    return this.isRemote(dst) || this.walk(rec, srcId, dstId);
  }

  /**
   * `allows` while recording: the encoded record goes to a flow buffer slot
   * with each direction's outcome (deciding stage, its reason and rule
   * codes) and the audit stages' would-be verdicts. The same walk, so the
   * same verdict; a full buffer costs the record, never the decision.
   */
  private allowsRecording(packet: Packet, flows: FlowBuffer): boolean {
    // The unrecorded walk itself, the rest left to the drain, when the stages' answers allow it (as `allows`, here for the one-direction walk).
    if (this.masksValid && this.oneDeferred && this.attributesInDrain && this.auditing.length === 0 && !this.state.multiclusterMode) {
      const state = this.state;
      const srcId = state.podIdByIP(packet.src);
      const dstId = state.podIdByIP(packet.dst);
      encodeRecordWords(this.record32, this.record, 0, packet, srcId, dstId);
      const allowed = this.pairWalk ? this.decideOneInPairs(this.record, srcId, dstId, NEED_BOTH, true) : this.decideEncoded(this.record, undefined, undefined, srcId, dstId);
      flows.recordWalkDeferred(this.record32, this.revision, allowed);
      return allowed;
    }
    // The unrecorded walk's masked one-record pair calls, when it can record in place.
    if (this.masksValid && this.oneInPlace && this.auditing.length === 0 && this.walksInFlight === 0 && !this.state.multiclusterMode) {
      const allowed = this.allowsRecordedInPlace(packet, flows);
      if (allowed !== undefined) return allowed;
    }
    // While every stage decides pairs: the batched walk's recorded pair walk,
    // for a chunk of one (one module call per stage; the one-direction walk
    // below makes two). Not while an asynchronous walk holds the batch scratch.
    if (this.walksInFlight === 0 && this.pairWalkReady()) {
      const one = this.onePacket;
      one[0] = packet;
      this.decideChunkInPairs(one, 0, 1, this.oneVerdict, flows);
      return this.oneVerdict[0] === 1;
    }
    const src = this.state.podByIP(packet.src);
    const dst = this.state.podByIP(packet.dst);
    const srcId = src ? src.id : 0;
    const dstId = dst ? dst.id : 0;
    const rec = this.record;
    encodeRecord(rec, 0, packet, srcId, dstId);
    const audits = this.auditing;
    const slot = flows.claim(this.record32, 0, this.revision, audits.length > 0);
    if (slot < 0) return this.decideEncoded(rec, src, dst, srcId, dstId);
    if (audits.length) {
      for (let dir = EGRESS; dir <= INGRESS; dir++) {
        rec[OFF_DIRECTION] = dir;
        for (let k = 0; k < audits.length; k++) {
          const s = audits[k];
          const v = s.decide(rec);
          // Codes only where the stage said more than Next, as the batched walk records them (recordAudits).
          const said = s.lastFailure === undefined && v !== Verdict.Next;
          flows.setAudit(slot, dir, k, v, said ? s.lastReasonCode() : 0, said ? s.lastRuleCode() : 0);
        }
      }
    }
    rec[OFF_DIRECTION] = EGRESS;
    let allowed = true;
    if (this.isRemote(src)) flows.setOutcome(slot, EGRESS, Outcome.Remote, -1);
    else allowed = this.walkRecorded(rec, srcId, dstId, flows, slot, EGRESS);
    if (!allowed) flows.setOutcome(slot, INGRESS, Outcome.Skipped, -1);
    else {
      rec[OFF_DIRECTION] = INGRESS;
      if (this.isRemote(dst)) flows.setOutcome(slot, INGRESS, Outcome.Remote, -1);
      else allowed = this.walkRecorded(rec, srcId, dstId, flows, slot, INGRESS);
    }
    flows.setAllowed(slot, allowed);
    return allowed;
  }

  /**
   * The drain's end of what a recorded walk left to it. A slot whose whole
   * walk was left (SlotFlag.WalkDeferred: `allows` and the batched pair walk
   * of a pipeline whose stages' answers follow from the record and their
   * state, oneDeferred) is walked here: see finishWalk. A slot whose walk
   * wrote its outcomes but left the codes (SlotFlag.CodesDeferred: the
   * multicluster chunk walk) gets them from the stage that accepted or
   * denied each direction, asked with the slot's record. Exact because the
   * buffer is drained before any stage's module changes (FlowBuffer.settle)
   * and the stages answer from the record and their state alone: a stage
   * answers as it answered the packet. Not a decision: the stages count
   * nothing. A stage that cannot be asked any more (its instance broke) or
   * answers another verdict leaves the direction's codes 0
   * (FlowBuffer.unattributed).
   */
  attributeDeferred(flows: FlowBuffer, slot: number): void {
    if (flows.walkDeferred(slot)) {
      this.finishWalk(flows, slot);
      return;
    }
    if (!flows.codesDeferred(slot)) return;
    flows.recordOf(slot, this.drainRecord32);
    const rec = this.drainRecord;
    for (let dir = EGRESS; dir <= INGRESS; dir++) {
      const d = flows.direction(slot, dir);
      if (d.outcome !== Outcome.Accept && d.outcome !== Outcome.Deny) continue;
      const stage = this.stages[d.stage];
      rec[OFF_DIRECTION] = dir;
      const v = stage === undefined ? -1 : stage.codesFor(rec, flows.codes, flows.codesWord(slot, dir));
      if (v !== (d.outcome === Outcome.Accept ? Verdict.Accept : Verdict.Deny)) flows.codesLost(slot, dir);
    }
    flows.codesAsked(slot);
  }

  /**
   * The walk the packet path left to the drain (SlotFlag.WalkDeferred), as
   * the one-direction walk records it: egress through the enforcing stages
   * to the first Accept or Deny, then ingress unless egress was denied
   * (Skipped), each stage asked only where its subjects include an end, and
   * asked without being counted (Stage.answerForDrain); each direction gets
   * the stage that ended it, Failure where its failure policy answered, and
   * an Accept's or a Deny's codes. The verdict must come out as the
   * packet's. Where it cannot be known — the pipeline is gone, a stage lost
   * its instance after the slot was claimed (FlowBuffer.noteFailure), the
   * walk ends at another verdict than the packet's (a module whose answers
   * do not follow from the record and its state) — both directions are
   * Unknown (FlowBuffer.walkLost, counted in `unattributed`).
   */
  private finishWalk(flows: FlowBuffer, slot: number): void {
    if (this.disposed) {
      flows.walkLost(slot);
      return;
    }
    flows.recordOf(slot, this.drainRecord32);
    const rec = this.drainRecord;
    const srcId = flows.srcPod(slot);
    const dstId = flows.dstPod(slot);
    const uncertain = flows.claimedBeforeFailure(slot);
    rec[OFF_DIRECTION] = EGRESS;
    const egress = this.drainDirection(rec, srcId, dstId, flows.codes, flows.codesWord(slot, EGRESS), uncertain);
    let ingress: number = Outcome.Skipped;
    let allowed = false;
    if (egress >= 0 && !deniedBy(egress)) {
      rec[OFF_DIRECTION] = INGRESS;
      ingress = this.drainDirection(rec, srcId, dstId, flows.codes, flows.codesWord(slot, INGRESS), uncertain);
      allowed = ingress >= 0 && !deniedBy(ingress);
    }
    if (egress < 0 || ingress < 0 || allowed !== flows.allowed(slot)) flows.walkLost(slot);
    else flows.walkFinished(slot, egress, ingress);
  }

  /** One direction of finishWalk: its outcome word (0, Default, when no stage ended it), -1 when it cannot be known. */
  private drainDirection(rec: Uint8Array, srcId: number, dstId: number, codes: Uint32Array, at: number, uncertain: boolean): number {
    const stages = this.enforcing;
    for (let i = 0; i < stages.length; i++) {
      const stage = stages[i];
      const subjects = stage.drainSubjects();
      if (subjects !== null && subjects[srcId] !== 1 && subjects[dstId] !== 1) continue;
      const answer = stage.answerForDrain(rec, codes, at);
      // Without an instance now, a stage that had one when the packet was decided cannot say what it answered.
      if ((answer & DRAIN_UNAVAILABLE) !== 0 && uncertain) return -1;
      const v = answer & 0xff;
      if (v !== Verdict.Accept && v !== Verdict.Deny) continue;
      const outcome = (answer & DRAIN_FAILED) !== 0 ? Outcome.Failure : v === Verdict.Accept ? Outcome.Accept : Outcome.Deny;
      return outcome | ((this.enforcingIndex[i] + 1) << 8);
    }
    return Outcome.Default;
  }

  /**
   * `allowsRecording` on `allows`' own walk (decideOneInPairs: the subject
   * masks, one one-record pair call per stage asked), for a pipeline whose
   * enforcing stages all decide pairs, without audit stages, outside
   * multicluster mode: per direction a stage decides, its outcome word and
   * where its module left the codes, and the record written in one pass
   * after the walk (FlowBuffer.recordChunk, a chunk of one), as
   * decideChunkRecordedInPlace does for a chunk. So recording adds the
   * outcome words and the slot's stores to the walk `allows` makes without
   * it, not another walk. Taken while every enforcing stage leaves its
   * one-record answers in place (oneInPlace, found with the masks);
   * undefined, before any stage is asked, for an ICMP packet (whose egress
   * walks on after an ingress deny): the caller then takes the recorded
   * chunk walk.
   */
  private allowsRecordedInPlace(packet: Packet, flows: FlowBuffer): boolean | undefined {
    const state = this.state;
    const srcId = state.podIdByIP(packet.src);
    const dstId = state.podIdByIP(packet.dst);
    const rec = this.record;
    const rec32 = this.record32;
    encodeRecordWords(rec32, rec, 0, packet, srcId, dstId);
    if (rec32[ICMP_WORD] !== 0) return undefined;
    const stages = this.enforcing;
    const masks = this.masks;
    const ask = this.maskAlways | (srcId < masks.length ? masks[srcId] : 0) | (dstId < masks.length ? masks[dstId] : 0);
    const sources = this.oneSources;
    const outcomes = this.outcomeWords;
    const codeAt = this.codeAt;
    // 0 is Default (stage -1): what a direction no stage decides keeps.
    outcomes[0] = 0;
    outcomes[1] = 0;
    const egress = this.oneEgress;
    const ingress = this.oneIngress;
    let need = NEED_BOTH;
    for (let s = 0; s < stages.length && need !== 0 && need !== NEED_DENIED; s++) {
      if ((ask & (1 << s)) === 0) {
        // Counted per direction, as the one-direction walk counts them.
        this.skipTally[s] += need === NEED_BOTH ? 2 : 1;
        continue;
      }
      const stage = stages[s];
      const both = need === NEED_BOTH;
      rec[OFF_DIRECTION] = need - 1;
      stage.decidePairOne(rec, rec32, egress, ingress);
      const stageIndex = this.enforcingIndex[s];
      const tag = (stageIndex + 1) << 8;
      // A failed call's verdicts are its failure policy's: Failure, no codes.
      const failed = stage.lastFailure !== undefined;
      const accept = (failed ? Outcome.Failure : Outcome.Accept) | tag;
      const deny = (failed ? Outcome.Failure : Outcome.Deny) | tag;
      const source = sources[s]!;
      if (!failed) this.answerWords[stageIndex] = source.answerWords();
      if ((need & NEED_EGRESS) !== 0) {
        const v = egress[0];
        if (v === Verdict.Deny || v === Verdict.Accept) {
          codeAt[0] = source.batchReasonWord;
          if (v === Verdict.Deny) {
            outcomes[0] = deny;
            // Ingress is never asked after an egress deny.
            outcomes[1] = Outcome.Skipped;
            need = NEED_DENIED;
            continue;
          }
          outcomes[0] = accept;
          need &= ~NEED_EGRESS;
        }
      }
      if ((need & NEED_INGRESS) !== 0) {
        const v = ingress[0];
        if (v === Verdict.Deny || v === Verdict.Accept) {
          // A pair's ingress answer is in its pair area entry; an ingress-only record's in the record.
          codeAt[1] = both ? source.pairReasonWord : source.batchReasonWord;
          need &= ~NEED_INGRESS;
          if (v === Verdict.Accept) outcomes[1] = accept;
          else {
            outcomes[1] = deny;
            // As decideChunkRecorded: the drain walks an undecided egress on (finishEgress).
            if ((need & NEED_EGRESS) !== 0) outcomes[0] = Outcome.Pending | tag;
            need = NEED_DENIED;
          }
        }
      }
    }
    const verdict = this.oneVerdict;
    verdict[0] = need === NEED_DENIED ? 0 : 1;
    flows.recordChunk(rec32, RECORD_SIZE >> 2, 1, this.revision, verdict, 0, outcomes, codeAt, this.answerWords);
    return need !== NEED_DENIED;
  }

  /**
   * Policies are local: a pod of another cluster is never a subject here, so
   * its direction of the walk is that cluster's agent's business and allowed.
   */
  private isRemote(pod: PodInfo | undefined): boolean {
    return pod !== undefined && this.state.multiclusterMode && pod.clusterId !== this.state.localClusterId;
  }

  /**
   * The batched packet path: `out[i]` becomes 1 when `packets[i]` is allowed,
   * 0 when denied; the same walk as `allows`, one module call per stage per
   * direction for up to BATCH_RECORDS packets. Stages see only the records no
   * earlier stage decided, so each verdict equals the one `allows` gives.
   */
  allowsBatch(packets: readonly Packet[], out: Uint8Array): void {
    const flows = this.flows;
    // While an asynchronous walk is suspended the batch scratch is its: decide packet by packet.
    if (this.walksInFlight > 0) {
      for (let i = 0; i < packets.length; i++) out[i] = this.allows(packets[i]) ? 1 : 0;
      return;
    }
    for (let start = 0; start < packets.length; start += BATCH_RECORDS) {
      const count = Math.min(BATCH_RECORDS, packets.length - start);
      if (this.pairWalkReady()) {
        this.decideChunkInPairs(packets, start, count, out, flows);
        continue;
      }
      const steps = this.chunkSteps(packets, start, count, out, flows);
      for (let r = steps.next(); !r.done; r = steps.next()) {
        const q = r.value;
        q.stage.decideVerdicts(q.batch, q.n, q.out, q.reasons, q.rules);
      }
    }
  }

  /**
   * `allowsBatch` whose module calls do not block this thread: each stage
   * whose instance runs in a thread of its own (`--module-threads`) decides
   * while the event loop runs on, and `out` is filled when the promise
   * resolves (it never rejects). Batches are walked one after another.
   * Undefined when no stage runs in a thread, or while flows are recorded
   * (the recorded walk writes each record's slot as the batch goes; it is
   * synchronous, still one module call per stage and direction), so the
   * caller decides synchronously.
   */
  allowsBatchAsync(packets: readonly Packet[], out: Uint8Array): Promise<void> | undefined {
    if (this.flows !== undefined || !this.threaded) return undefined;
    const idle = this.walksInFlight === 0;
    this.walksInFlight++;
    const walk = async () => {
      try {
        for (let start = 0; start < packets.length; start += BATCH_RECORDS) {
          const steps = this.chunkSteps(packets, start, Math.min(BATCH_RECORDS, packets.length - start), out, undefined);
          for (let r = steps.next(); !r.done; r = steps.next()) await r.value.stage.decideVerdictsAsync(r.value.batch, r.value.n, r.value.out);
        }
      } finally {
        this.walksInFlight--;
      }
    };
    // An idle pipeline starts at once: the first module call is posted before this returns.
    const done = idle ? walk() : this.walking.then(walk);
    this.walking = done.catch(() => undefined);
    return done;
  }

  /** One module call of the batched walk, handed to the caller (allowsBatch makes it at once, allowsBatchAsync awaits it); reused. */
  private readonly step: BatchStep = { stage: undefined as unknown as Stage, batch: this.encoded, n: 0, out: this.verdicts, reasons: undefined, rules: undefined };

  private ask(stage: Stage, batch: Uint8Array, n: number, out: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array): BatchStep {
    const q = this.step;
    q.stage = stage;
    q.batch = batch;
    q.n = n;
    q.out = out;
    q.reasons = reasons;
    q.rules = rules;
    return q;
  }

  /** Looks the chunk's pods up by address and encodes its records into `encoded` (ids in srcIds/dstIds, multicluster's remote ends in remoteSrc/remoteDst). */
  private encodeChunk(packets: readonly Packet[], start: number, count: number): void {
    const enc = this.encoded;
    const state = this.state;
    const multicluster = state.multiclusterMode;
    this.anyRemote = false;
    for (let i = 0; i < count; i++) {
      const packet = packets[start + i];
      let srcId: number;
      let dstId: number;
      if (multicluster) {
        const src = state.podByIP(packet.src);
        const dst = state.podByIP(packet.dst);
        srcId = src ? src.id : 0;
        dstId = dst ? dst.id : 0;
        this.remoteSrc[i] = this.isRemote(src) ? 1 : 0;
        this.remoteDst[i] = this.isRemote(dst) ? 1 : 0;
        this.anyRemote ||= this.remoteSrc[i] === 1 || this.remoteDst[i] === 1;
      } else {
        // Only the ids go into the record: the PodInfo objects (a cache miss each at 10,000 pods) are not read.
        srcId = state.podIdByIP(packet.src);
        dstId = state.podIdByIP(packet.dst);
      }
      this.srcIds[i] = srcId;
      this.dstIds[i] = dstId;
      encodeRecordWords(this.encoded32, enc, i * (RECORD_SIZE >> 2), packet, srcId, dstId);
    }
  }

  private *chunkSteps(packets: readonly Packet[], start: number, count: number, out: Uint8Array, flows: FlowBuffer | undefined): Generator<BatchStep, void> {
    const enc = this.encoded;
    this.encodeChunk(packets, start, count);
    const slots = this.slots;
    if (flows !== undefined) {
      const audited = this.auditing.length > 0;
      flows.claimBatch(this.encoded32, RECORD_SIZE >> 2, count, this.revision, audited, slots);
    }
    if (this.auditing.length) {
      for (const dir of [EGRESS, INGRESS]) {
        setDirection(enc, count, dir);
        for (let k = 0; k < this.auditing.length; k++) {
          const s = this.auditing[k];
          if (flows === undefined) {
            yield this.ask(s, enc, count, this.verdicts);
            continue;
          }
          yield this.ask(s, enc, count, this.verdicts, this.reasons, this.rules);
          this.recordAudits(s, dir, k, count, flows);
        }
      }
    }
    const pending = this.pending;
    for (let i = 0; i < count; i++) pending[i] = i;
    const egressAllowed = yield* this.walkBatch(EGRESS, count, count, flows);
    // Only what egress allowed walks ingress; the rest is denied.
    out.fill(0, start, start + count);
    const allowed = yield* this.walkBatch(INGRESS, egressAllowed, count, flows);
    for (let k = 0; k < allowed; k++) out[start + pending[k]] = 1;
    if (flows !== undefined) for (let i = 0; i < count; i++) if (slots[i] >= 0) flows.setAllowed(slots[i], out[start + i] === 1);
  }

  /** Writes audit stage `k`'s verdicts and codes in direction `dir` (in `verdicts`, `reasons`, `rules`) to the chunk's slots. */
  private recordAudits(stage: Stage, dir: number, k: number, count: number, flows: FlowBuffer): void {
    const slots = this.slots;
    const failed = stage.lastFailure !== undefined;
    for (let i = 0; i < count; i++) {
      // Codes are only written where the stage said more than Next (decideInto).
      const v = this.verdicts[i];
      const said = !failed && v !== Verdict.Next;
      if (slots[i] >= 0) flows.setAudit(slots[i], dir, k, v, said ? this.reasons[i] : 0, said ? this.rules[i] : 0);
    }
  }

  /** Whether the chunk can take the pair walk: it is on and every enforcing stage's module decides both directions in one call. */
  private pairWalkReady(): boolean {
    if (!this.pairWalk) return false;
    const stages = this.enforcing;
    for (let s = 0; s < stages.length; s++) if (!stages[s].decidesPairs) return false;
    return true;
  }

  /**
   * The pair walk (ABI 1.4, kwp_decide_pair): one module call per stage for
   * both directions of the chunk's packets instead of one per direction, so
   * the host packs, filters and copies each record once per stage and the
   * module decides the second direction while the two pods' state is in the
   * CPU's caches. Each direction still ends at the first stage that accepts
   * or denies it, so every verdict is the one-direction walk's; what
   * differs is that a stage may decide the ingress of a packet that a later
   * stage denies on egress (only modules without side effects decide pairs,
   * sdk/ABI.md). With `flows`, each record's slot gets what the
   * one-direction walk writes to it (decideChunkRecorded).
   */
  private decideChunkInPairs(packets: readonly Packet[], start: number, count: number, out: Uint8Array, flows: FlowBuffer | undefined): void {
    this.encodeChunk(packets, start, count);
    // Recorded with the walk left to the drain (as `allows`): the unrecorded walk, then the records' words and verdicts.
    const walkLeft = flows !== undefined && this.auditing.length === 0 && this.chunkDefers() && !this.state.multiclusterMode;
    if (flows !== undefined && !walkLeft) {
      // Where the codes are the drain's (chunkDefers), where the modules leave them does not matter.
      if (this.auditing.length === 0 && (this.chunkDefers() || this.answersStayInPlace(count))) this.decideChunkRecordedInPlace(start, count, out, flows);
      else this.decideChunkRecorded(start, count, out, flows);
      return;
    }
    const enc = this.encoded;
    if (this.auditing.length) {
      for (const dir of [EGRESS, INGRESS]) {
        setDirection(enc, count, dir);
        for (const s of this.auditing) s.decideVerdicts(enc, count, this.verdicts);
      }
    }
    const need = this.need;
    const pending = this.pending;
    let n = this.startPairs(count);
    const stages = this.enforcing;
    const selected = this.selectedIdx;
    const egress = this.verdicts;
    const ingress = this.ingressVerdicts;
    for (let s = 0; s < stages.length && n > 0; s++) {
      const stage = stages[s];
      const m = this.askPairs(stage, s, n, count, undefined, true);
      if (m === 0) continue;
      for (let j = 0; j < m; j++) {
        const r = selected[j];
        let w = need[r];
        if ((w & NEED_EGRESS) !== 0) {
          const v = egress[j];
          if (v === Verdict.Deny) { need[r] = NEED_DENIED; continue; }
          if (v === Verdict.Accept) w &= ~NEED_EGRESS;
        }
        if ((w & NEED_INGRESS) !== 0) {
          const v = ingress[j];
          if (v === Verdict.Deny) { need[r] = NEED_DENIED; continue; }
          if (v === Verdict.Accept) w &= ~NEED_INGRESS;
        }
        need[r] = w;
      }
      let kept = 0;
      for (let k = 0; k < n; k++) {
        const w = need[pending[k]];
        if (w !== 0 && w !== NEED_DENIED) pending[kept++] = pending[k];
      }
      n = kept;
    }
    for (let i = 0; i < count; i++) out[start + i] = need[i] === NEED_DENIED ? 0 : 1;
    if (walkLeft) flows!.recordChunkWalkDeferred(this.encoded32, count, this.revision, out, start);
  }

  /**
   * Sets each record's `need` (multicluster: a remote end's direction is not
   * asked) and lists those with any in `pending`; returns how many. While the
   * subject masks are valid, each record's stages to ask go to `askBits`
   * (two bytes of the masks a record, instead of two filter lookups a stage).
   */
  private startPairs(count: number): number {
    const need = this.need;
    const pending = this.pending;
    let n = 0;
    for (let i = 0; i < count; i++) {
      const w = this.anyRemote ? (this.remoteSrc[i] === 1 ? 0 : NEED_EGRESS) | (this.remoteDst[i] === 1 ? 0 : NEED_INGRESS) : NEED_BOTH;
      need[i] = w;
      if (w !== 0) pending[n++] = i;
    }
    this.chunkMasked = this.masksValid;
    if (this.chunkMasked) {
      const masks = this.masks;
      const size = masks.length;
      const always = this.maskAlways;
      const bits = this.askBits;
      const src = this.srcIds;
      const dst = this.dstIds;
      for (let i = 0; i < count; i++) {
        const a = src[i];
        const b = dst[i];
        bits[i] = always | (a < size ? masks[a] : 0) | (b < size ? masks[b] : 0);
      }
    }
    return n;
  }

  /**
   * One stage's call of the pair walk: the records of `pending[0..n)` that
   * touch one of the stage's subjects go to the module (their indices in
   * `selectedIdx`), each asking for the directions its `need` still has;
   * verdicts by position in the call to `verdicts` (egress) and
   * `ingressVerdicts`. Returns how many were asked. `s` is the stage's
   * place among the enforcing stages: while the chunk's masks hold (no
   * stage's filter changed since it started) the records are picked by
   * their mask bit `s` and the skips go to the pipeline's tally, else by
   * the stage's filter. With `pick` (no codes wanted) a part of the chunk
   * is copied by the instance straight from the encoded chunk into its
   * batch area (Stage.decidePairsPicked); otherwise, or where the instance
   * cannot, it is packed into `work` first. The whole chunk goes as it is.
   */
  private askPairs(stage: Stage, s: number, n: number, count: number, codes: PairCodes | undefined, pick: boolean): number {
    const enc = this.encoded;
    const need = this.need;
    const pending = this.pending;
    const selected = this.selectedIdx;
    let m = 0;
    // Skipped records are counted per direction, as the one-direction walk counts them.
    let skipped = 0;
    if (this.chunkMasked && this.masksValid) {
      const bits = this.askBits;
      const bit = 1 << s;
      for (let k = 0; k < n; k++) {
        const r = pending[k];
        if ((bits[r] & bit) !== 0) selected[m++] = r;
        else skipped += (need[r] & NEED_BOTH) === NEED_BOTH ? 2 : 1;
      }
      if (skipped > 0) this.skipTally[s] += skipped;
    } else {
      const subjects = stage.subjectFilter();
      if (subjects === null) {
        for (let k = 0; k < n; k++) selected[m++] = pending[k];
      } else {
        const none = subjects.length === 0;
        for (let k = 0; k < n; k++) {
          const r = pending[k];
          if (!none && (subjects[this.srcIds[r]] === 1 || subjects[this.dstIds[r]] === 1)) selected[m++] = r;
          else skipped += (need[r] & NEED_BOTH) === NEED_BOTH ? 2 : 1;
        }
      }
      if (skipped > 0) stage.countSkipped(skipped);
    }
    if (m === 0) return 0;
    // need 1, 2, 3 asks for egress, ingress, both: direction byte 0, 1, DIRECTION_BOTH.
    for (let j = 0; j < m; j++) enc[selected[j] * RECORD_SIZE + OFF_DIRECTION] = (need[selected[j]] & NEED_BOTH) - 1;
    // `selected` ascends, so all of the chunk selected is the encoded records as they are.
    let batch = enc;
    if (m !== count) {
      if (pick && this.pickedPairs && stage.decidePairsPicked(enc, this.encoded32, selected, m, this.verdicts, this.ingressVerdicts)) return m;
      this.pack(selected, m);
      batch = this.work;
    }
    // One record as a view of its own size: the instance copies a longer batch through a subarray, an allocation per call (the recorded allows asks one).
    if (m === 1) batch = batch === enc ? this.encodedOne : this.workOne;
    stage.decidePairs(batch, m, this.verdicts, this.ingressVerdicts, codes);
    return m;
  }

  /**
   * The pair walk of an encoded chunk while flows are recorded: the same
   * verdicts, and each record's slot gets what the one-direction walk
   * (walkBatch) writes to it — the audit stages' would-be verdicts, and per
   * direction the stage that ended it with its reason and rule codes. The
   * one difference in the work: a packet whose ingress a stage denied while
   * its egress is undecided goes on through the later stages for egress
   * (INGRESS_DENIED), as the one-direction walk would have walked it, so
   * the record names the same egress outcome (and ingress Skipped when a
   * later stage denies egress).
   */
  private decideChunkRecorded(start: number, count: number, out: Uint8Array, flows: FlowBuffer): void {
    const enc = this.encoded;
    const slots = this.slots;
    const audits = this.auditing;
    flows.claimBatch(this.encoded32, RECORD_SIZE >> 2, count, this.revision, audits.length > 0, slots);
    if (audits.length) {
      for (const dir of [EGRESS, INGRESS]) {
        setDirection(enc, count, dir);
        for (let k = 0; k < audits.length; k++) {
          audits[k].decideVerdicts(enc, count, this.verdicts, this.reasons, this.rules);
          this.recordAudits(audits[k], dir, k, count, flows);
        }
      }
    }
    const need = this.need;
    const pending = this.pending;
    let n = this.startPairs(count);
    if (this.anyRemote) {
      for (let i = 0; i < count; i++) {
        if (slots[i] < 0) continue;
        if (this.remoteSrc[i] === 1) flows.setOutcome(slots[i], EGRESS, Outcome.Remote, -1);
        if (this.remoteDst[i] === 1) flows.setOutcome(slots[i], INGRESS, Outcome.Remote, -1);
      }
    }
    const stages = this.enforcing;
    const selected = this.selectedIdx;
    const egress = this.verdicts;
    const ingress = this.ingressVerdicts;
    const codes = this.pairCodes;
    for (let s = 0; s < stages.length && n > 0; s++) {
      const stage = stages[s];
      const m = this.askPairs(stage, s, n, count, codes, false);
      if (m === 0) continue;
      const stageIndex = this.enforcingIndex[s];
      const failed = stage.lastFailure !== undefined;
      for (let j = 0; j < m; j++) {
        const r = selected[j];
        const slot = slots[r];
        let w = need[r];
        if ((w & NEED_EGRESS) !== 0) {
          const v = egress[j];
          if (v === Verdict.Deny || v === Verdict.Accept) {
            if (slot >= 0) this.recordDecided(flows, slot, EGRESS, v, failed, stageIndex, codes.egressReasons[j], codes.egressRules[j]);
            if (v === Verdict.Deny) {
              need[r] = NEED_DENIED;
              continue;
            }
            w &= ~NEED_EGRESS;
          }
        }
        if ((w & NEED_INGRESS) !== 0) {
          const v = ingress[j];
          if (v === Verdict.Deny || v === Verdict.Accept) {
            if (slot >= 0) this.recordDecided(flows, slot, INGRESS, v, failed, stageIndex, codes.ingressReasons[j], codes.ingressRules[j]);
            w &= ~NEED_INGRESS;
            if (v === Verdict.Deny) {
              if ((w & NEED_EGRESS) === 0 || slot < 0) w = NEED_DENIED;
              else if (this.encoded32[r * (RECORD_SIZE >> 2) + ICMP_WORD] !== 0) w |= INGRESS_DENIED;
              else {
                // The packet is denied; which later stage ends its egress only
                // the record needs, so the drain finishes that walk once per
                // key and interval (finishEgress) instead of every packet here.
                flows.setOutcome(slot, EGRESS, Outcome.Pending, stageIndex);
                w = NEED_DENIED;
              }
            }
          }
        }
        need[r] = w === INGRESS_DENIED ? NEED_DENIED : w;
      }
      n = this.keepUndecided(n);
    }
    for (let i = 0; i < count; i++) {
      const w = need[i];
      const allowed = w !== NEED_DENIED && (w & INGRESS_DENIED) === 0;
      out[start + i] = allowed ? 1 : 0;
      const slot = slots[i];
      if (slot < 0) continue;
      if ((w & NEED_EGRESS) !== 0) flows.setOutcome(slot, EGRESS, Outcome.Default, -1);
      if ((w & NEED_INGRESS) !== 0) flows.setOutcome(slot, INGRESS, Outcome.Default, -1);
      flows.setAllowed(slot, allowed);
    }
  }

  /** The recorded pair walks' end of a stage: keeps in `pending[0..n)` the records with a direction still undecided; returns how many. */
  private keepUndecided(n: number): number {
    const need = this.need;
    const pending = this.pending;
    let kept = 0;
    for (let k = 0; k < n; k++) if ((need[pending[k]] & NEED_BOTH) !== 0) pending[kept++] = pending[k];
    return kept;
  }

  /**
   * Whether the recorded chunk walk leaves the Accepts' and Denies' codes to
   * the drain, as the recorded `allows` does: every stage decides pairs
   * and answers from the record and its state (oneDeferred, found with the
   * masks, so only while they are valid).
   */
  private chunkDefers(): boolean {
    return this.masksValid && this.oneDeferred && this.attributesInDrain;
  }

  /** Whether every enforcing stage's pair call of `count` records leaves its answers in place (their sources in `answerSources`). */
  private answersStayInPlace(count: number): boolean {
    const stages = this.enforcing;
    for (let s = 0; s < stages.length; s++) {
      const source = stages[s].pairAnswersInPlace(count);
      if (source === undefined) return false;
      this.answerSources[s] = source;
    }
    return true;
  }

  /**
   * decideChunkRecorded for a pipeline without audit stages whose stages
   * leave their pair calls' answers in place (answersStayInPlace): the walk
   * is the unrecorded one's (the pair calls copy no codes) plus, per
   * direction a stage decides, its outcome word and where that stage's module
   * left the codes; after the walk each record is claimed and written in one
   * pass (FlowBuffer.recordChunk), its codes copied once, from the module's
   * memory into the slot. Each stage is called once per chunk, so its answers
   * are still there. The same slots as decideChunkRecorded, Pending included.
   */
  private decideChunkRecordedInPlace(start: number, count: number, out: Uint8Array, flows: FlowBuffer): void {
    const need = this.need;
    const pending = this.pending;
    const outcomes = this.outcomeWords;
    const codeAt = this.codeAt;
    let n = this.startPairs(count);
    // 0 is Default (stage -1): what a direction no stage decides keeps.
    outcomes.fill(0, 0, 2 * count);
    if (this.anyRemote) {
      for (let i = 0; i < count; i++) {
        if (this.remoteSrc[i] === 1) outcomes[2 * i] = Outcome.Remote;
        if (this.remoteDst[i] === 1) outcomes[2 * i + 1] = Outcome.Remote;
      }
    }
    const stages = this.enforcing;
    const selected = this.selectedIdx;
    const egress = this.verdicts;
    const ingress = this.ingressVerdicts;
    const icmp = this.encoded32;
    // Where the stages' answers follow from the record and their state (multicluster: the walk left to the drain is not), the codes are the drain's to ask.
    const deferred = this.chunkDefers();
    for (let s = 0; s < stages.length && n > 0; s++) {
      const stage = stages[s];
      // Codes the drain asks for need not stay where the call left them: a part of the chunk
      // goes to the module as the unrecorded walk sends it (picked, not packed first).
      const m = this.askPairs(stage, s, n, count, undefined, deferred);
      if (m === 0) continue;
      const stageIndex = this.enforcingIndex[s];
      const tag = (stageIndex + 1) << 8;
      // A failed call's verdicts are its failure policy's: Failure, no codes.
      const failed = stage.lastFailure !== undefined;
      const accept = (failed ? Outcome.Failure : Outcome.Accept) | tag;
      const deny = (failed ? Outcome.Failure : Outcome.Deny) | tag;
      // Not read when the codes are the drain's (answersStayInPlace was not asked).
      const source = deferred ? undefined : this.answerSources[s]!;
      if (!failed && source !== undefined) this.answerWords[stageIndex] = source.answerWords();
      const batchWord = source === undefined ? 0 : source.batchReasonWord;
      const pairWord = source === undefined ? 0 : source.pairReasonWord;
      for (let j = 0; j < m; j++) {
        const r = selected[j];
        let w = need[r];
        // What the call asked (askPairs): both directions put ingress's answer in the pair area.
        const both = (w & NEED_BOTH) === NEED_BOTH;
        const e = 2 * r;
        if ((w & NEED_EGRESS) !== 0) {
          const v = egress[j];
          if (v === Verdict.Deny || v === Verdict.Accept) {
            if (!deferred) codeAt[e] = batchWord + j * (RECORD_SIZE >> 2);
            if (v === Verdict.Deny) {
              outcomes[e] = deny;
              // Ingress is never asked after an egress deny.
              outcomes[e + 1] = Outcome.Skipped;
              need[r] = NEED_DENIED;
              continue;
            }
            outcomes[e] = accept;
            w &= ~NEED_EGRESS;
          }
        }
        if ((w & NEED_INGRESS) !== 0) {
          const v = ingress[j];
          if (v === Verdict.Deny || v === Verdict.Accept) {
            // A pair's ingress answer is in its pair area entry; an ingress-only record's in the record.
            if (!deferred) codeAt[e + 1] = both ? pairWord + j * (PAIR_RESULT_SIZE >> 2) : batchWord + j * (RECORD_SIZE >> 2);
            w &= ~NEED_INGRESS;
            if (v === Verdict.Accept) outcomes[e + 1] = accept;
            else {
              outcomes[e + 1] = deny;
              if ((w & NEED_EGRESS) === 0) w = NEED_DENIED;
              // The drain walks a deferred slot's egress on with its ICMP type (FlowBuffer.icmp).
              else if (!deferred && icmp[r * (RECORD_SIZE >> 2) + ICMP_WORD] !== 0) w |= INGRESS_DENIED;
              else {
                // As decideChunkRecorded: the drain walks this egress on (finishEgress).
                outcomes[e] = Outcome.Pending | tag;
                w = NEED_DENIED;
              }
            }
          }
        }
        need[r] = w === INGRESS_DENIED ? NEED_DENIED : w;
      }
      n = this.keepUndecided(n);
    }
    for (let i = 0; i < count; i++) {
      const w = need[i];
      out[start + i] = w !== NEED_DENIED && (w & INGRESS_DENIED) === 0 ? 1 : 0;
    }
    flows.recordChunk(this.encoded32, RECORD_SIZE >> 2, count, this.revision, out, start, outcomes, codeAt, this.answerWords, deferred);
  }

  /**
   * A stage's Accept or Deny (`v`) in direction `dir`, written to `slot`
   * as the walk reports it: Failure when the stage's call failed (its
   * failure policy answered), with no codes; an egress Deny leaves ingress
   * Skipped, as the walk never asks it.
   */
  private recordDecided(flows: FlowBuffer, slot: number, dir: number, v: number, failed: boolean, stageIndex: number, reason: number, rule: number): void {
    if (failed) flows.setOutcome(slot, dir, Outcome.Failure, stageIndex);
    else flows.setDirection(slot, dir, v === Verdict.Accept ? Outcome.Accept : Outcome.Deny, stageIndex, reason, rule);
    if (dir === EGRESS && v === Verdict.Deny) flows.setOutcome(slot, INGRESS, Outcome.Skipped, -1);
  }

  /**
   * Walks the records whose indices are `pending[0..count)` through the
   * enforcing stages in direction `dir` (`chunk` records are encoded); returns how many were allowed, and
   * leaves their indices in `pending[0..n)`. With `flows`, each record's
   * outcome in this direction goes to its flow buffer slot, as the
   * one-packet walk writes it.
   */
  private *walkBatch(dir: number, count: number, chunk: number, flows: FlowBuffer | undefined): Generator<BatchStep, number> {
    const enc = this.encoded;
    const pending = this.pending;
    const allowed = this.allowedIdx;
    const verdicts = this.verdicts;
    const slots = this.slots;
    const reasons = flows !== undefined ? this.reasons : undefined;
    const rules = flows !== undefined ? this.rules : undefined;
    setDirection(enc, chunk, dir);
    let n = count;
    let nAllowed = 0;
    if (this.anyRemote) {
      const remote = dir === EGRESS ? this.remoteSrc : this.remoteDst;
      let kept = 0;
      for (let k = 0; k < n; k++) {
        const r = pending[k];
        if (remote[r] === 1) {
          allowed[nAllowed++] = r;
          if (flows !== undefined && slots[r] >= 0) flows.setOutcome(slots[r], dir, Outcome.Remote, -1);
        } else pending[kept++] = r;
      }
      n = kept;
    }
    // `enc` serves as the batch while pending is 0, 1, 2, ...; otherwise the pending records are packed into `work`.
    let identity = true;
    for (let k = 0; k < n; k++) if (pending[k] !== k) { identity = false; break; }
    let packed = false;
    const stages = this.enforcing;
    const selected = this.selected;
    for (let s = 0; s < stages.length && n > 0; s++) {
      const stage = stages[s];
      const subjects = stage.subjectFilter();
      let m = n;
      if (subjects !== null && subjects.length === 0) {
        stage.countSkipped(n);
        continue;
      }
      if (subjects !== null) {
        m = 0;
        for (let k = 0; k < n; k++) {
          const r = pending[k];
          if (subjects[this.srcIds[r]] === 1 || subjects[this.dstIds[r]] === 1) selected[m++] = k;
        }
        if (m === 0) {
          stage.countSkipped(n);
          continue;
        }
      }
      if (m === n) {
        let batch = enc;
        if (!identity) {
          if (!packed) this.pack(pending, n);
          packed = true;
          batch = this.work;
        }
        yield this.ask(stage, batch, n, verdicts, reasons, rules);
      } else {
        // Only the records touching a subject go to the module; the rest are Next.
        for (let j = 0; j < m; j++) this.selectedIdx[j] = pending[selected[j]];
        this.pack(this.selectedIdx, m);
        packed = false;
        yield this.ask(stage, this.work, m, this.selectedVerdicts, flows !== undefined ? this.selectedReasons : undefined, flows !== undefined ? this.selectedRules : undefined);
        stage.countSkipped(n - m);
        verdicts.fill(Verdict.Next, 0, n);
        for (let j = 0; j < m; j++) verdicts[selected[j]] = this.selectedVerdicts[j];
        if (reasons !== undefined && rules !== undefined) {
          // Only a decided record's codes are read (and only those were written, decideInto).
          for (let j = 0; j < m; j++) {
            const v = this.selectedVerdicts[j];
            if (v !== Verdict.Accept && v !== Verdict.Deny) continue;
            reasons[selected[j]] = this.selectedReasons[j];
            rules[selected[j]] = this.selectedRules[j];
          }
        }
      }
      let kept = 0;
      if (flows === undefined) {
        for (let k = 0; k < n; k++) {
          const v = verdicts[k];
          if (v === Verdict.Accept) allowed[nAllowed++] = pending[k];
          else if (v !== Verdict.Deny) pending[kept++] = pending[k];
        }
      } else {
        // The same sort, with each decided record's outcome written to its
        // slot on the way: a second pass over the batch per stage cost as
        // much as the writes.
        const stageIndex = this.enforcingIndex[s];
        const failed = stage.lastFailure !== undefined;
        const codes = this.reasons;
        const rulesOf = this.rules;
        for (let k = 0; k < n; k++) {
          const v = verdicts[k];
          const r = pending[k];
          if (v !== Verdict.Accept && v !== Verdict.Deny) {
            pending[kept++] = r;
            continue;
          }
          if (v === Verdict.Accept) allowed[nAllowed++] = r;
          const slot = slots[r];
          if (slot >= 0) this.recordDecided(flows, slot, dir, v, failed, stageIndex, codes[k], rulesOf[k]);
        }
      }
      if (kept !== n) {
        n = kept;
        identity = false;
        packed = false;
      }
    }
    for (let k = 0; k < n; k++) {
      const r = pending[k];
      allowed[nAllowed++] = r;
      if (flows !== undefined && slots[r] >= 0) flows.setOutcome(slots[r], dir, Outcome.Default, -1);
    }
    pending.set(allowed.subarray(0, nAllowed));
    return nAllowed;
  }

  /** Copies the records `indices[0..n)` of `encoded` to the front of `work`, in that order. */
  private pack(indices: Int32Array, n: number): void {
    const f = this.encoded32;
    const t = this.work32;
    // Sixteen stores written out (a record is 64 bytes, ABI 1): the inner loop over a record's words cost
    // about twice as much (it was half of walkBatch's time in a profile).
    for (let k = 0; k < n; k++) {
      const s = indices[k] << 4;
      const d = k << 4;
      t[d] = f[s]; t[d + 1] = f[s + 1]; t[d + 2] = f[s + 2]; t[d + 3] = f[s + 3];
      t[d + 4] = f[s + 4]; t[d + 5] = f[s + 5]; t[d + 6] = f[s + 6]; t[d + 7] = f[s + 7];
      t[d + 8] = f[s + 8]; t[d + 9] = f[s + 9]; t[d + 10] = f[s + 10]; t[d + 11] = f[s + 11];
      t[d + 12] = f[s + 12]; t[d + 13] = f[s + 13]; t[d + 14] = f[s + 14]; t[d + 15] = f[s + 15];
    }
  }

  /**
   * One direction's walk through the enforcing stages (from `from` on): -1 when every stage
   * said Next (allowed), else the deciding stage's index times two, plus one
   * when it accepted. A number, so the recorded and the unrecorded walk share
   * the loop and the unrecorded one allocates nothing.
   */
  private decidingStage(rec: Uint8Array, srcId: number, dstId: number, from = 0): number {
    const stages = this.enforcing;
    for (let i = from; i < stages.length; i++) {
      const stage = stages[i];
      const subjects = stage.subjectFilter();
      if (subjects !== null && subjects[srcId] !== 1 && subjects[dstId] !== 1) {
        stage.countSkipped(1);
        continue;
      }
      const v = stage.decide(rec);
      if (v === Verdict.Accept) return (i << 1) | 1;
      if (v === Verdict.Deny) return i << 1;
    }
    return -1;
  }

  /** Whether one direction's walk allows. */
  private walk(rec: Uint8Array, srcId: number, dstId: number): boolean {
    const d = this.decidingStage(rec, srcId, dstId);
    return d < 0 || (d & 1) === 1;
  }

  /**
   * `walk`, with the outcome (which stage decided, its reason and rule
   * codes) written to the flow buffer's `slot` as direction `dir`.
   */
  private walkRecorded(rec: Uint8Array, srcId: number, dstId: number, flows: FlowBuffer, slot: number, dir: number, from = 0): boolean {
    const d = this.decidingStage(rec, srcId, dstId, from);
    if (d < 0) {
      flows.setOutcome(slot, dir, Outcome.Default, -1);
      return true;
    }
    const i = d >> 1;
    const stage = this.enforcing[i];
    const accepted = (d & 1) === 1;
    const outcome = stage.lastFailure ? Outcome.Failure : accepted ? Outcome.Accept : Outcome.Deny;
    flows.setDecided(slot, dir, outcome, this.enforcingIndex[i], stage);
    return accepted;
  }

  /** The drain's record, apart from the packet path's (finishEgress runs between wakeups, but never inside one). */
  private readonly drainRecord = new Uint8Array(RECORD_SIZE);
  private readonly drainRecord32 = new Uint32Array(this.drainRecord.buffer);

  /**
   * The drain's end of a recorded pair walk (Outcome.Pending): the packet in
   * the flow buffer's `slot` was denied on ingress by the stage the slot's
   * egress names while its egress was undecided; this walks its egress on
   * through the enforcing stages after that one, as the one-direction walk
   * would have, and writes the outcome to the slot (an egress Deny leaves
   * ingress Skipped). It decides against the state of now, up to one drain
   * period after the packet, and its module calls count as decisions.
   */
  finishEgress(flows: FlowBuffer, slot: number): void {
    const pending = flows.direction(slot, EGRESS);
    if (pending.outcome !== Outcome.Pending) return;
    // A pipeline replaced and disposed since cannot ask its modules any more: the walk never ran.
    if (this.disposed) {
      flows.setOutcome(slot, EGRESS, Outcome.Skipped, -1);
      return;
    }
    const after = this.enforcingIndex.indexOf(pending.stage);
    flows.recordOf(slot, this.drainRecord32);
    const rec = this.drainRecord;
    rec[OFF_DIRECTION] = EGRESS;
    const allowed = this.walkRecorded(rec, flows.srcPod(slot), flows.dstPod(slot), flows, slot, EGRESS, after < 0 ? this.enforcing.length : after + 1);
    if (!allowed) flows.setOutcome(slot, INGRESS, Outcome.Skipped, -1);
  }

  /** Audit stages see every packet in both directions; their verdicts are counted, never used. */
  private audit(rec: Uint8Array): void {
    for (const dir of [EGRESS, INGRESS]) {
      rec[OFF_DIRECTION] = dir;
      for (const s of this.auditing) s.decide(rec);
    }
  }

  /** The explained path: the same walk, with every stage's verdict and reason recorded. */
  evaluate(packet: Packet, srcPod?: PodInfo, dstPod?: PodInfo): Decision {
    const src = srcPod ?? this.state.podByIP(packet.src);
    const dst = dstPod ?? this.state.podByIP(packet.dst);
    const rec = new Uint8Array(RECORD_SIZE);
    encodeRecord(rec, 0, packet, src ? src.id : 0, dst ? dst.id : 0);
    const budget = { left: this.stages[0]?.compiled.limits.maxExplainBytes ?? 0 };
    rec[OFF_DIRECTION] = EGRESS;
    const egress = this.isRemote(src) ? { allowed: true, trace: [] } : this.walkTraced(rec, budget);
    rec[OFF_DIRECTION] = INGRESS;
    const ingress = this.isRemote(dst) ? { allowed: true, trace: [] } : this.walkTraced(rec, budget);
    return { allowed: egress.allowed && ingress.allowed, egress, ingress };
  }

  private walkTraced(rec: Uint8Array, budget: { left: number }): DirectionResult {
    const trace: StageTrace[] = [];
    let decided: boolean | undefined;
    for (const stage of this.stages) {
      if (decided !== undefined && stage.mode === 'enforce') continue;
      const v = stage.decide(rec);
      const step: StageTrace = { stage: stage.name, label: stage.label, verdict: verdictName(v), mode: stage.mode };
      if (stage.lastFailure) step.failure = stage.lastFailure;
      else {
        const reason = stage.lastExplanation();
        if (v !== Verdict.Next) {
          const codes = stage.lastCodes();
          const attribution = stage.attribution(codes.reason, codes.rule);
          // A module without attribution of its own (before ABI 1.3) only repeats its reason text: the trace has that already.
          if (attribution && (attribution.rule !== '' || attribution.policy !== reason)) step.attribution = attribution;
        }
        if (reason) {
          // One explanation's reasons share maxExplainBytes (counted in UTF-16 units, at most the bytes they take).
          if (reason.length <= budget.left) {
            step.reason = reason;
            budget.left -= reason.length;
          } else {
            step.reason = `(reason left out: this explanation's reasons are over ${stage.compiled.limits.maxExplainBytes} bytes, sandbox limit maxExplainBytes)`;
            budget.left = 0;
          }
        }
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

  private disposed = false;

  /** Releases this pipeline's hold on each stage (a stage shared with another live pipeline keeps running); once. */
  dispose(): void {
    if (this.disposed) return;
    // The records this pipeline decided are drained while its stages can still be asked (attributeDeferred, finishEgress).
    for (const buffer of this.recordedTo) buffer.settle();
    this.disposed = true;
    this.masksValid = false;
    for (const release of this.releases.splice(0)) release();
    // Walks already asked for finish first: their packets get the modules' verdicts, not the failure policy.
    if (this.walksInFlight > 0) {
      void this.walking.then(() => { for (const s of this.stages) s.dispose(); });
      return;
    }
    for (const s of this.stages) s.dispose();
  }
}
