// One running instance of a compiled evaluator: its own memory, its own state.
// Every call into the module goes through `guarded`, which refills the fuel
// tank and turns traps into typed errors; after a trap the instance is marked
// broken and must not be called again (its heap may be half-updated).
import { fueledCall } from './fueled-call.js';
import { KwpError } from '../errors.js';
import type { AbiExports } from '../abi/exports.js';
import { DECISION_CACHE_STATS_SIZE } from '../abi/exports.js';
import { LOG_LEVELS } from '../abi/imports.js';
import { DIRECTION_BOTH, OFF_DIRECTION, OFF_REASON, OFF_RULE, OFF_VERDICT, PAIR_OFF_REASON, PAIR_OFF_RULE, PAIR_OFF_VERDICT, PAIR_RESULT_SIZE, RECORD_SIZE, readReason, readRule } from '../abi/record.js';
import { endianness } from 'node:os';
import { Verdict } from '../abi/verdict.js';
import { ATTRIBUTION_MINOR, PAIR_MINOR } from '../abi/version.js';
import { parseAttribution, type Attribution } from '../abi/attribution.js';
import type { CompiledEvaluator } from './loader.js';
import { LineRate } from './line-rate.js';
import { callFuelForCap, MAX_FUEL } from './limits.js';
import type { HostLogger } from '../logger.js';
import { ObjectOp } from '../abi/objects.js';
import { TimeSlices } from '../time-slices.js';


/**
 * An object a module refused or warned about while taking it: the log line's
 * `rejected` field, which the stage counts (kwp_objects_rejected). Logs are
 * how it travels, so it reaches the stage from an instance in another thread too.
 */
export interface RejectedObject { kind: string; namespace?: string; name: string }

function rejectedObject(json: Uint8Array): RejectedObject | undefined {
  try {
    const obj = JSON.parse(textDecoder.decode(json));
    const name = obj?.metadata?.name;
    if (typeof obj?.kind !== 'string' || typeof name !== 'string') return undefined;
    const namespace = typeof obj.metadata.namespace === 'string' && obj.metadata.namespace ? obj.metadata.namespace : undefined;
    return { kind: obj.kind, ...(namespace ? { namespace } : {}), name };
  } catch {
    return undefined;
  }
}

function describeRejected(r: RejectedObject): string {
  return `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
}

const textDecoder = new TextDecoder();
const textEncoder = new TextEncoder();
const textDecoderUtf16 = new TextDecoder('utf-16le');

/**
 * Text a module wrote, as the host passes it on (log lines, reasons, refusals,
 * abort messages): control characters, line separators and what was not valid
 * UTF-8 (or UTF-16) become '?'. A newline would forge a line of the text log,
 * and a NUL takes 6 bytes in a JSON one; this way a text is never more bytes
 * than the module's bytes it came from (JSON escapes only quotes and
 * backslashes, at 2 bytes each), so the size limits bound what is written.
 */
function visible(text: string): string {
  return text.replace(/[\u0000-\u0008\u000a-\u001f\u007f\u2028\u2029\ufffd]/g, '?');
}

/** Thrown by env.abort so a module's own abort is told apart from a trap. */
class ModuleAbort extends Error {}

/** The exports plus the fuel tank the instrumentation added (host/runtime/fuel.ts). */
interface Exports extends AbiExports {
  kwp_fuel: WebAssembly.Global;
}

/**
 * An instance's whole state between two calls: its linear memory and its
 * mutable globals (values in the order of CompiledEvaluator.imageGlobals).
 * An instance made from it answers every later call as the instance it was
 * taken from would: same memory, same globals, same compiled code. Only the
 * memory's blocks that are not all zero are kept: a fresh memory is zero, and
 * a page nobody writes costs no resident memory.
 */
export interface MemoryImage {
  /** The memory's size in 64 KiB pages. */
  pages: number;
  /** Byte offsets of the IMAGE_BLOCK-sized blocks that are not all zero, ascending. */
  blocks: Uint32Array;
  /**
   * Those blocks' bytes, one after another, in pieces of IMAGE_PIECE_BLOCKS
   * blocks (the last may have fewer), each its own buffer.
   */
  data: Uint8Array[];
  globals: Array<number | bigint>;
  /**
   * When set, the restore takes the pieces from it, in order, instead of
   * from `data`: a feed thread's image, received one piece at a time.
   */
  nextPiece?: () => Uint8Array;
}

/** The unit of a memory image: the size of an OS page, what is resident or not. */
export const IMAGE_BLOCK = 4096;

/**
 * The blocks in one piece of an image's data (256 KiB). A feed thread sends
 * its image as these pieces, and the stage's restore receives each only when
 * it copies it and drops it after: V8 counts a buffer this thread holds as
 * external memory against the old generation's limit, and a piece that dies
 * before two scavenges is freed by the next one. The whole image in one
 * message (9 MiB for np at the default scale) was counted at once, enough to
 * start the marking of a mark-compact in the packet path's thread.
 */
export const IMAGE_PIECE_BLOCKS = 64;

/**
 * How long a closed instance's memory is kept for the next restore of the
 * same module with the same cap. A swap that feeds a stage anew closes the
 * stage it replaces a swap or two later (the agent keeps the previous
 * pipeline for rollback), and the next such swap restores into that memory:
 * no new memory, so V8 counts no new external memory against the old
 * generation's limit (a new memory of 11 MiB for np at the default scale is
 * most of what set off a mark-compact of the packet path's thread in every
 * feeding swap), and the retired one is not freed by that collection either.
 * Kept no longer than this, so a memory nobody restores into again costs its
 * resident pages for a while, not for good.
 */
export const RETIRED_MEMORY_KEEP_MS = 60_000;

interface RetiredMemory { memory: WebAssembly.Memory; capPages: number; timer: ReturnType<typeof setTimeout> }

/** One retired memory per module (its last closed instance's), while it is kept. */
const retiredMemories = new WeakMap<CompiledEvaluator, RetiredMemory>();

/** Takes `compiled`'s retired memory when its maximum is `capPages` and it is no bigger than `pages`; else undefined. */
function takeRetiredMemory(compiled: CompiledEvaluator, capPages: number, pages: number): WebAssembly.Memory | undefined {
  const retired = retiredMemories.get(compiled);
  if (!retired || retired.capPages !== capPages || retired.memory.buffer.byteLength / 65536 > pages) return undefined;
  retiredMemories.delete(compiled);
  clearTimeout(retired.timer);
  return retired.memory;
}

function keepRetiredMemory(compiled: CompiledEvaluator, memory: WebAssembly.Memory, capPages: number): void {
  const before = retiredMemories.get(compiled);
  if (before) clearTimeout(before.timer);
  const timer = setTimeout(() => { if (retiredMemories.get(compiled)?.memory === memory) retiredMemories.delete(compiled); }, RETIRED_MEMORY_KEEP_MS);
  timer.unref();
  retiredMemories.set(compiled, { memory, capPages, timer });
}

/** The most blocks a restore scans for what to clear between two of its slices (1 MiB). */
const CLEAR_SCAN_BLOCKS = 256;

/** Offsets of the blocks of `u8` (a whole number of blocks) holding a byte that is not zero. */
function nonZeroBlocks(u8: Uint8Array): number[] {
  const words = new Uint32Array(u8.buffer, u8.byteOffset, u8.byteLength >>> 2);
  const per = IMAGE_BLOCK >>> 2;
  const out: number[] = [];
  for (let w = 0; w < words.length; w += per) {
    for (let i = w, end = w + per; i < end; i++) {
      if (words[i] !== 0) { out.push(w << 2); break; }
    }
  }
  return out;
}

/** A module's decision-cache counters since it started (ABI.md, optional kwp_decision_cache_stats). */
export interface DecisionCacheStats { hits: number; misses: number }

/**
 * What a stage calls on an instance, wherever the instance runs: in the
 * calling thread (EvaluatorInstance) or in a thread of its own that the host
 * can stop (IsolatedInstance, isolated-instance.ts). Every method throws a
 * KwpError when the call traps, runs out of fuel or (isolated) out of time,
 * and the instance is then broken for good.
 */
export interface ModuleInstance {
  readonly name: string;
  readonly batchCapacity: number;
  readonly memoryCapPages: number;
  readonly memoryBytes: number;
  readonly broken: KwpError | undefined;
  configure(config: unknown): void;
  upsertPod(record: Uint8Array): void;
  deletePod(id: number): void;
  object(kind: number, op: number, json?: Uint8Array): void;
  decideOne(record: Uint8Array): number;
  lastReason(): number;
  /** The rule code of the last decideOne (ABI 1.3), 0 when the module has none. */
  lastRule(): number;
  /** With `reasons` and `rules`, also the reason and rule codes of each record not answered Next (flow recording); a Next record's entries are left as they were. */
  decideInto(records: Uint8Array, first: number, n: number, verdicts: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array): void;
  explain(reason: number): string;
  /** Which policy and rule a (reason, rule) pair stands for (ABI 1.3 kwp_attribution, else the reason text). */
  attribution(reason: number, rule: number): Attribution | undefined;
  decisionCacheStats(): DecisionCacheStats | undefined;
  /** 'all', or the pod ids the module selects; a count above `maxIds` (the pods delivered) means all. */
  subjects(maxIds?: number): 'all' | number[];
  /**
   * Frees what the instance holds beyond its memory (an isolated one's
   * thread). Idempotent. `keepMemory`: the instance is retired by a swap
   * (its stage disposed), and the next feeding swap of its module may
   * restore into its memory (EvaluatorInstance, RETIRED_MEMORY_KEEP_MS).
   */
  close(keepMemory?: boolean): void;
  /**
   * Isolated instances only: while `feeding` is set, configuration and
   * delivery calls return at once and run in the instance's thread; `settle`
   * waits for the last one without blocking (feedDeadlineMs) and throws its
   * error. A build feeds an instance this way before it answers anything.
   */
  feeding?: boolean;
  settle?(): Promise<void>;
  /**
   * Optional (an instance in a thread of its own): decideInto without
   * blocking the caller; the verdicts are in place when it resolves.
   */
  decideIntoAsync?(records: Uint8Array, first: number, n: number, verdicts: Uint8Array): Promise<void>;
  /** Whether decidePairsInto may be called: the module offers kwp_decide_pair (ABI 1.4) and this instance calls it. */
  readonly decidesPairs?: boolean;
  /** Whether decidePairOne may be called (EvaluatorInstance.decidePairOne). */
  readonly decidesPairOne?: boolean;
  /** Optional (decidesPairOne): decidePairsInto for one record given as its sixteen words; returns `egress | ingress << 8`. */
  decidePairOne?(record: Uint32Array): number;
  /**
   * Optional (decidesPairs): decides records `first .. first+n` of `records`,
   * each in the direction(s) its direction byte asks for (0 egress, 1
   * ingress, DIRECTION_BOTH). Writes the
   * egress verdict to `egress[first + i]` and the ingress one to
   * `ingress[first + i]` for each direction asked; a record asking for both
   * whose egress is Deny gets Next for ingress (the module need not decide
   * it: the packet is denied).
   */
  decidePairsInto?(records: Uint8Array, first: number, n: number, egress: Uint8Array, ingress: Uint8Array, codes?: PairCodes): void;
  /**
   * Optional (decidesPairs): decidePairsInto for the records of a chunk (as
   * words) at the indices `picked[0..n)`, answers by position in the call;
   * false, having done nothing, when one call cannot take them (EvaluatorInstance.decidePairsPicked).
   */
  decidePairsPicked?(records: Uint32Array, picked: Int32Array, n: number, egress: Uint8Array, ingress: Uint8Array): boolean;
  /**
   * Optional (decidesPairs): where a pair call of `n` records leaves its
   * answers, when one call takes them all and they stay in the module's
   * batch and pair areas until its next call (no split into calls of at most
   * batchCapacity, no halving for fuel, word-aligned areas on a
   * little-endian host, rule codes: ABI 1.3); else undefined. Flow recording
   * then reads the deciding stages' codes at the end of a chunk, one copy
   * into the record's slot (Pipeline.decideChunkRecordedInPlace).
   */
  pairAnswersInPlace?(n: number): PairAnswers | undefined;
}

/**
 * The answers of an instance's last pair call, in place (pairAnswersInPlace):
 * record j's reason and rule codes are words `batchReasonWord + 16 j` and the
 * next of `answerWords()` (its egress, or its ingress when it asked for
 * ingress only), a pair's ingress codes words `pairReasonWord + 4 j` and the
 * next.
 */
export interface PairAnswers {
  /** The module's memory as words; ask after the call (a call may grow the memory, which detaches the old view). */
  answerWords(): Uint32Array | undefined;
  readonly batchReasonWord: number;
  readonly pairReasonWord: number;
}

/**
 * Where a pair call (decidePairsInto) puts each direction's reason and rule
 * codes, indexed as the verdicts; flow recording asks for them. Written only
 * for a direction the module answered Accept or Deny (the walk reads no other).
 */
export interface PairCodes {
  egressReasons: Uint32Array;
  egressRules: Uint32Array;
  ingressReasons: Uint32Array;
  ingressRules: Uint32Array;
}

/** A little-endian word of module memory at byte `p` (the pair area need not be word-aligned). */
function readPairWord(mem: Uint8Array, p: number): number {
  return (mem[p] | (mem[p + 1] << 8) | (mem[p + 2] << 16) | (mem[p + 3] << 24)) >>> 0;
}

/** Module memory is little-endian; a Uint32Array reads it as such only on a little-endian host. */
const WORD_READS = endianness() === 'LE';
const RECORD_WORDS = RECORD_SIZE >> 2;

export class EvaluatorInstance implements ModuleInstance, PairAnswers {
  readonly compiled: CompiledEvaluator;
  private readonly exports: Exports;
  /**
   * Unset only while the start function of a module that defines its own
   * memory runs: that memory is an export, which the host cannot see until
   * instantiation returns (bytes() then answers an empty view).
   */
  private memory: WebAssembly.Memory;
  private readonly fuel: WebAssembly.Global;
  private readonly decide: (count: number) => number;
  /** `decide` with the tank filled in the same call (fueled-call.ts), when the module's exports allow it. */
  private readonly decideFueled: ((tank: number, count: number) => number) | undefined;
  /** The same for kwp_decide_pair. */
  private decidePairFueled: ((tank: number, count: number) => number) | undefined;
  /** kwp_decide_pair, when the module offers it (kwp_pair_results gave an area), else undefined. */
  private decidePair: ((count: number) => number) | undefined;
  /** The pair area's address (ABI 1.4), 0 when the module decides one direction per call. */
  pairPtr = 0;
  private u8 = new Uint8Array(0);
  private u32: Uint32Array | undefined;
  /** Where the module takes a batch of records, and how many; read by readBatchArea once its state is in. */
  batchPtr = 0;
  batchCapacity = 0;
  private readonly decideFuel: number;
  private readonly callFuel: number;
  /** Set once a call trapped or ran out of fuel, or the instance was closed. */
  broken: KwpError | undefined;
  /** Whether the memory is the host's (imported): a closed instance's may be restored into again. */
  private readonly ownsMemory: boolean = false;
  private closed = false;
  private readonly logRate: LineRate;
  /** The object being upserted, until the module's first warning about it (onLog). */
  private delivering: Uint8Array | undefined;
  /** Log lines dropped by the rate limit. */
  get droppedLogLines(): number { return this.logRate.dropped; }
  /** The most pages this instance's memory can grow to. */
  readonly memoryCapPages: number;
  /** Whether records of this module carry a rule code (ABI 1.3 or later); older modules' byte 60 is reserved. */
  readonly attributesRules: boolean;

  /**
   * `memoryPages` caps an imported memory (default: the limits'
   * maxMemoryPages); stages pass the cap for the state they deliver
   * (limits.ts, memoryCapForState). A module that defines its memory keeps
   * the maximum it declares, which the loader held to maxMemoryPages.
   */
  constructor(compiled: CompiledEvaluator, private readonly logger?: HostLogger, options: { memoryPages?: number; image?: MemoryImage; memory?: WebAssembly.Memory } = {}) {
    this.compiled = compiled;
    const { major, minor } = compiled.meta.abi;
    this.attributesRules = major > 1 || minor >= ATTRIBUTION_MINOR;
    this.decideFuel = compiled.limits.fuelPerDecision;
    this.logRate = new LineRate(compiled.limits.logLinesPerSecond);
    let memory: WebAssembly.Memory | undefined;
    const env: Record<string, unknown> = {
      abort: (msg: number, file: number, line: number, col: number) => {
        throw new ModuleAbort(`abort: ${this.readAsString(msg)} at ${this.readAsString(file)}:${line}:${col}`);
      },
    };
    const capPages = EvaluatorInstance.capPagesFor(compiled, options.memoryPages);
    if (compiled.memoryImport) {
      // A retired memory (fromImageInSlices) has this cap as its maximum, and the restore clears it.
      memory = options.memory ?? new WebAssembly.Memory({ initial: compiled.memoryImport.min, maximum: capPages });
      this.ownsMemory = true;
      env.memory = memory;
      // Before instantiation: the start function may call kwp.log or env.abort, which read it.
      this.memory = memory;
    }
    this.memoryCapPages = capPages;
    // The tank follows the state like the memory cap does: the Synced step compiles all of it in one call.
    this.callFuel = callFuelForCap(compiled.limits, capPages);
    const imports = { env, kwp: { log: (level: number, ptr: number, len: number) => this.onLog(level, ptr, len) } };
    let instance: WebAssembly.Instance;
    try {
      instance = new WebAssembly.Instance(compiled.module, imports as WebAssembly.Imports);
    } catch (err) {
      throw new KwpError('KWP_ERR_INSTANTIATE', `${compiled.source}: instantiation failed: ${describe(err)}`, { cause: err });
    }
    this.exports = instance.exports as unknown as Exports;
    this.memory = memory ?? this.exports.memory;
    this.fuel = this.exports.kwp_fuel;
    this.decide = this.exports.kwp_decide;
    this.decideFueled = fueledCall(this.fuel, this.decide);
    if (options.image) for (const _ of this.restore(options.image));
    this.readBatchArea();
  }

  /** The most pages an instance of `compiled` asked for `memoryPages` may grow to. */
  private static capPagesFor(compiled: CompiledEvaluator, memoryPages: number | undefined): number {
    // A defined memory's maximum is in the binary, at most maxMemoryPages (the loader checked).
    if (!compiled.memoryImport) return compiled.limits.maxMemoryPages;
    const cap = Math.min(memoryPages ?? compiled.limits.maxMemoryPages, compiled.limits.maxStageMemoryPages);
    return Math.max(compiled.memoryImport.min, Math.min(compiled.memoryImport.max ?? cap, cap));
  }

  /** Asks the module where its batch area is, from the state it holds now (after an image's restore, that image's). */
  private readBatchArea(): void {
    this.u8 = new Uint8Array(this.memory.buffer);
    this.batchPtr = this.guarded(() => this.exports.kwp_batch(), this.callFuel, 'kwp_batch');
    this.batchCapacity = this.guarded(() => this.exports.kwp_batch_capacity(), this.callFuel, 'kwp_batch_capacity');
    if (this.batchCapacity < 1) throw new KwpError('KWP_ERR_INSTANTIATE', `${this.compiled.source}: kwp_batch_capacity returned ${this.batchCapacity}; it must be at least 1`);
    this.readPairArea();
  }

  /**
   * ABI 1.4: whether the module decides both directions of a record in one
   * call, and where it puts the ingress answers. The area must lie inside
   * the memory (which never shrinks): the host reads it after every pair
   * call, and a read past the end would be a Next, not an error.
   */
  private readPairArea(): void {
    this.pairPtr = 0;
    this.decidePair = undefined;
    this.decidePairFueled = undefined;
    const { major, minor } = this.compiled.meta.abi;
    const results = this.exports.kwp_pair_results;
    const decide = this.exports.kwp_decide_pair;
    if ((major === 1 && minor < PAIR_MINOR) || typeof results !== 'function' || typeof decide !== 'function') return;
    const ptr = this.guarded(() => results(), this.callFuel, 'kwp_pair_results');
    if (ptr === 0) return;
    const bytes = this.memory.buffer.byteLength;
    const size = this.batchCapacity * PAIR_RESULT_SIZE;
    if (!Number.isInteger(ptr) || ptr < 0 || ptr + size > bytes) {
      throw new KwpError('KWP_ERR_INSTANTIATE', `${this.compiled.source}: kwp_pair_results returned ${ptr >>> 0}, but its ${this.batchCapacity} entries of ${PAIR_RESULT_SIZE} bytes (${size} bytes) must lie inside the module's memory (${bytes} bytes); return 0 to decide one direction per call`);
    }
    this.pairPtr = ptr;
    this.decidePair = decide;
    this.decidePairFueled = fueledCall(this.fuel, decide);
  }

  get decidesPairs(): boolean { return this.decidePair !== undefined; }

  get name(): string { return this.compiled.meta.name; }

  /** The module's mutable globals, in the order of compiled.imageGlobals (throws when the module has none to image). */
  private imageGlobals(): WebAssembly.Global[] {
    const names = this.compiled.imageGlobals;
    if (names === undefined) throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: its state cannot be imaged (a mutable global JavaScript cannot read)`);
    const exports = this.exports as unknown as Record<string, WebAssembly.Global>;
    return names.map((n) => exports[n]);
  }

  /**
   * A copy of this instance's state (memory and mutable globals), taken
   * between calls. Throws on a broken instance: its heap may be half-updated.
   */
  image(): MemoryImage {
    if (this.broken) throw this.broken;
    const u8 = new Uint8Array(this.memory.buffer);
    const blocks = nonZeroBlocks(u8);
    const data: Uint8Array[] = [];
    for (let first = 0; first < blocks.length; first += IMAGE_PIECE_BLOCKS) {
      const piece = new Uint8Array(Math.min(IMAGE_PIECE_BLOCKS, blocks.length - first) * IMAGE_BLOCK);
      for (let j = 0; j * IMAGE_BLOCK < piece.length; j++) piece.set(u8.subarray(blocks[first + j], blocks[first + j] + IMAGE_BLOCK), j * IMAGE_BLOCK);
      data.push(piece);
    }
    return { pages: u8.byteLength / 65536, blocks: Uint32Array.from(blocks), data, globals: this.imageGlobals().map((g) => g.value as number | bigint) };
  }

  /**
   * Right after instantiation: makes this instance's state `image`'s. The
   * memory grows to the image's size first (within this instance's cap);
   * what the start function wrote where the image is zero is cleared, and
   * only the image's blocks are written.
   */
  private *restore(image: MemoryImage): Generator<void> {
    const globals = this.imageGlobals();
    const pieces = Math.ceil(image.blocks.length / IMAGE_PIECE_BLOCKS);
    const pieceBytes = (k: number) => Math.min(IMAGE_PIECE_BLOCKS, image.blocks.length - k * IMAGE_PIECE_BLOCKS) * IMAGE_BLOCK;
    const pieced = image.nextPiece !== undefined || (image.data.length === pieces && image.data.every((d, k) => d.byteLength === pieceBytes(k)));
    if (image.globals.length !== globals.length || !pieced) {
      const bytes = image.data.reduce((n, d) => n + d.byteLength, 0);
      throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: the memory image does not fit this module (${image.globals.length} globals for ${globals.length}, ${image.blocks.length} blocks in ${image.data.length} pieces of ${bytes} bytes)`);
    }
    if (image.pages > this.memoryCapPages) {
      throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: the memory image has ${image.pages} pages, over this instance's cap of ${this.memoryCapPages}`);
    }
    const have = this.memory.buffer.byteLength / 65536;
    if (have > image.pages) throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: the memory image has ${image.pages} pages, fewer than the ${have} the module starts with`);
    // What is not zero where the image is zero (what the start function wrote, or all a retired
    // memory held) is cleared; blocks the image has are written below. Sliced: a retired memory is
    // the image's size, 11 MiB for np at the default scale.
    const started = new Uint8Array(this.memory.buffer);
    const words = new Uint32Array(started.buffer);
    const perBlock = IMAGE_BLOCK >>> 2;
    let next = 0;
    for (let at = 0, scanned = 0; at < started.byteLength; at += IMAGE_BLOCK) {
      while (next < image.blocks.length && image.blocks[next] < at) next++;
      if (next < image.blocks.length && image.blocks[next] === at) continue;
      for (let w = at >>> 2, end = w + perBlock; w < end; w++) {
        if (words[w] !== 0) { started.fill(0, at, at + IMAGE_BLOCK); break; }
      }
      if (++scanned % CLEAR_SCAN_BLOCKS === 0) yield;
    }
    // Grown in one step. The memory's whole range is reserved when it is made, so a grow only makes
    // pages accessible (174 pages in 0.01-0.5 ms here, against 6 steps of 32 pages, one slice each);
    // the kernel zeroes a page when it is first written, by the sliced block copies below. And each
    // grow detaches the buffer and reports the new size to V8 as external memory, which may start
    // or advance incremental marking inside the call (a single 32-page step took 11-40 ms that way).
    if (image.pages > have) this.memory.grow(image.pages - have);
    yield;
    const u8 = new Uint8Array(this.memory.buffer);
    for (let k = 0; k < pieces; k++) {
      const piece = image.nextPiece ? image.nextPiece() : image.data[k];
      if (piece.byteLength !== pieceBytes(k)) {
        throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: piece ${k} of the memory image has ${piece.byteLength} bytes, not ${pieceBytes(k)}`);
      }
      for (let j = 0, i = k * IMAGE_PIECE_BLOCKS; j * IMAGE_BLOCK < piece.byteLength; j++, i++) {
        u8.set(piece.subarray(j * IMAGE_BLOCK, (j + 1) * IMAGE_BLOCK), image.blocks[i]);
      }
      if ((k & 3) === 3) yield;
    }
    globals.forEach((g, i) => { g.value = image.globals[i]; });
  }

  /**
   * An instance made from `image`, its blocks copied in slices of at most
   * `sliceMs` between turns of the event loop (the NetworkPolicy stage's
   * image at 100,000 policies is 176 MiB: a second and more of copying and
   * first-touch page faults in one call on a loaded node). Nothing calls the
   * instance before it is returned. The memory is the last closed instance's of this module when it has
   * the same cap and is no bigger than the image (RETIRED_MEMORY_KEEP_MS).
   */
  static async fromImageInSlices(compiled: CompiledEvaluator, logger: HostLogger | undefined, options: { memoryPages: number; image: MemoryImage }, sliceMs: number): Promise<EvaluatorInstance> {
    const memory = compiled.memoryImport && takeRetiredMemory(compiled, EvaluatorInstance.capPagesFor(compiled, options.memoryPages), options.image.pages);
    const inst = new EvaluatorInstance(compiled, logger, { memoryPages: options.memoryPages, memory });
    const slices = new TimeSlices(sliceMs);
    for (const _ of inst.restore(options.image)) if (slices.due()) await slices.yield();
    // What the constructor read from the module before its image was in: read again from the image's state.
    inst.readBatchArea();
    return inst;
  }

  /**
   * Nothing to free (the garbage collector takes the instance with its last
   * reference), but with `keepMemory` the memory is kept for the next
   * restore of this module (RETIRED_MEMORY_KEEP_MS), so a closed instance
   * must never run again: every later call throws.
   */
  close(keepMemory = false): void {
    if (this.closed) return;
    this.closed = true;
    this.broken ??= new KwpError('KWP_ERR_INTERNAL', `module ${this.name}: called after its instance was closed`);
    // Only a swap's: an instance replaced by a rebuild or a bulk refresh has its successor
    // restored already, and its memory kept would only add to the RSS (6-7 MiB in the memory
    // bench's child, which refreshes every stage once from an empty state).
    if (keepMemory && this.ownsMemory) keepRetiredMemory(this.compiled, this.memory, this.memoryCapPages);
  }

  /** The memory view, re-created when memory.grow detached the old buffer. */
  private bytes(): Uint8Array {
    // A start function that logs or aborts before the host can see its own memory: an empty
    // view, so the text reads as out of bounds ('?', a line without text) instead of a TypeError
    // that made every such module fail to instantiate with "Cannot read properties of undefined".
    if (this.u8.byteLength === 0 && this.memory !== undefined) this.u8 = new Uint8Array(this.memory.buffer);
    return this.u8;
  }

  /**
   * The memory as little-endian words, for reading a batch's codes one load
   * each; undefined when the batch is not word-aligned or the host is
   * big-endian (then the codes are assembled from bytes).
   */
  private words(): Uint32Array | undefined {
    if (!WORD_READS || (this.batchPtr & 3) !== 0) return undefined;
    // As `bytes`: a view of a buffer memory.grow detached has length 0 (reading memory.buffer itself costs an API call).
    if (this.u32 === undefined || this.u32.length === 0) this.u32 = new Uint32Array(this.memory.buffer);
    return this.u32;
  }

  get memoryBytes(): number { return this.memory.buffer.byteLength; }

  private guarded<T>(call: () => T, fuel: number, what: string): T {
    if (this.broken) throw this.broken;
    this.fuel.value = fuel;
    try {
      return call();
    } catch (err) {
      throw this.trapped(err, fuel, what);
    }
  }

  /** Marks the instance broken by `err` and returns the typed error to throw. */
  private trapped(err: unknown, fuel: number, what: string): KwpError {
    const exhausted = (this.fuel.value as number) < 0;
    const code = exhausted ? 'KWP_ERR_FUEL_EXHAUSTED' : 'KWP_ERR_TRAP';
    const text = exhausted ? `ran out of fuel (${fuel} units) in ${what}` : `trapped in ${what}: ${describe(err)}`;
    this.broken = new KwpError(code, `module ${this.name}: ${text}`, { cause: err });
    return this.broken;
  }

  private readAsString(ptr: number): string {
    // AssemblyScript strings: UTF-16 code units, byte length in the header word before them.
    // Only the first maxAbortMessageChars are copied: the length is the module's to choose.
    const mem = this.bytes();
    if (ptr < 4 || ptr > mem.length) return '?';
    const len = new DataView(mem.buffer).getUint32(ptr - 4, true);
    if (ptr + len > mem.length) return '?';
    const max = this.compiled.limits.maxAbortMessageChars;
    const units = Math.min(len >>> 1, max);
    const text = visible(textDecoderUtf16.decode(mem.subarray(ptr, ptr + units * 2)));
    return units < len >>> 1 ? `${text}… (${(len >>> 1) - units} more characters cut)` : text;
  }

  private onLog(level: number, ptr: number, len: number): void {
    const name = LOG_LEVELS[level] ?? 'info';
    // The first warning about an object being delivered is a rejection: it
    // is logged whatever the rate limit (one per delivery at most) and names
    // the object, so an operator can find what the module cannot use.
    const rejection = this.delivering && (name === 'warn' || name === 'error') ? this.delivering : undefined;
    if (rejection) this.delivering = undefined;
    const note = rejection ? '' : this.logRate.take();
    if (note === undefined) return;
    const mem = this.bytes();
    if (this.memory === undefined) {
      this.logger?.[name]({ module: this.name }, `(a line logged by the start function, before the host can read a memory the module defines; import env.memory to log from it)${note}`);
      return;
    }
    if (ptr < 0 || len < 0 || ptr + len > mem.length) return;
    // Only the first maxLogLineBytes are decoded: one call could name all of memory.
    const max = this.compiled.limits.maxLogLineBytes;
    const cut = len > max ? `… (${len - max} more bytes cut)` : '';
    const message = visible(textDecoder.decode(mem.subarray(ptr, ptr + Math.min(len, max)))) + cut + note;
    const rejected = rejection && rejectedObject(rejection);
    if (rejected) this.logger?.[name]({ module: this.name, rejected }, `module ${this.name} cannot use ${describeRejected(rejected)}: ${message}`);
    else this.logger?.[name]({ module: this.name }, message);
  }

  /** Copies bytes into a buffer the module allocates; the callee frees it. */
  private pass(data: Uint8Array, what: string): number {
    const ptr = this.guarded(() => this.exports.kwp_alloc(data.length), this.callFuel, `kwp_alloc for ${what}`);
    const mem = this.bytes();
    // The pointer is the module's to choose: one outside its memory made the
    // copy throw a bare RangeError (a 500 for a pipeline change, a state
    // "too large" for a delivery) and left the instance in use.
    if (ptr < 0 || ptr + data.length > mem.length) {
      this.broken = new KwpError('KWP_ERR_TRAP', `module ${this.name}: kwp_alloc(${data.length}) for ${what} returned ${ptr >>> 0}, a buffer outside the module's memory (${mem.length} bytes)`);
      throw this.broken;
    }
    mem.set(data, ptr);
    return ptr;
  }

  private resultBytes(len: number): Uint8Array {
    const ptr = this.guarded(() => this.exports.kwp_result(), this.callFuel, 'kwp_result');
    return this.bytes().slice(ptr, ptr + len);
  }

  /**
   * A refusal's text (kwp_configure, kwp_object): the status is its length and
   * the module's to choose, so only the first maxReasonBytes are copied, like
   * an explanation's reason; it ends up in an error answer or a log line.
   */
  private resultText(len: number): string {
    const max = this.compiled.limits.maxReasonBytes;
    if (len <= max) return visible(textDecoder.decode(this.resultBytes(len)));
    return `${visible(textDecoder.decode(this.resultBytes(max)))}… (${len - max} more bytes cut)`;
  }

  configure(config: unknown): void {
    const data = textEncoder.encode(JSON.stringify(config ?? {}));
    const ptr = this.pass(data, 'kwp_configure');
    const status = this.guarded(() => this.exports.kwp_configure(ptr, data.length), this.callFuel, 'kwp_configure');
    if (status !== 0) {
      const text = this.resultText(status);
      throw new KwpError('KWP_ERR_CONFIG_REJECTED', `module ${this.name} refused its config ${JSON.stringify(config ?? {})}: ${text || 'no reason given'}`);
    }
  }

  upsertPod(record: Uint8Array): void {
    const ptr = this.pass(record, 'kwp_pod_upsert');
    this.guarded(() => this.exports.kwp_pod_upsert(ptr, record.length), this.callFuel, 'kwp_pod_upsert');
  }

  deletePod(id: number): void {
    this.guarded(() => this.exports.kwp_pod_delete(id), this.callFuel, 'kwp_pod_delete');
  }

  object(kind: number, op: number, json?: Uint8Array): void {
    let ptr = 0;
    let len = 0;
    if (json) { ptr = this.pass(json, 'kwp_object'); len = json.length; }
    this.delivering = json && op === ObjectOp.Upsert ? json : undefined;
    let status: number;
    try {
      status = this.guarded(() => this.exports.kwp_object(kind, op, ptr, len), this.callFuel, 'kwp_object');
    } finally {
      this.delivering = undefined;
    }
    if (status !== 0) {
      // One line per refused object would be one per delivery: these lines share the module's log rate.
      const note = this.logRate.take();
      if (note === undefined) return;
      const rejected = json && op === ObjectOp.Upsert ? rejectedObject(json) : undefined;
      const what = rejected ? describeRejected(rejected) : `an object of kind ${this.compiled.meta.kinds[kind]}`;
      this.logger?.warn(rejected ? { module: this.name, rejected } : { module: this.name }, `module ${this.name} could not take ${what}: ${this.resultText(status)}${note}`);
    }
  }

  /**
   * Decides one 64-byte record: copies it into the batch area, runs the
   * module and returns the verdict byte. The reason code stays in the batch
   * area for `lastReason()`.
   */
  decideOne(record: Uint8Array): number {
    // Before the write: a closed instance's memory may be another instance's by now (close).
    if (this.broken) throw this.broken;
    this.bytes().set(record, this.batchPtr);
    this.runDecide(1);
    return this.bytes()[this.batchPtr + OFF_VERDICT];
  }

  lastReason(): number {
    // One word load where the batch is word-aligned: the recorded packet path reads it per decision.
    const words = this.words();
    return words !== undefined ? words[(this.batchPtr + OFF_REASON) >> 2] : readReason(this.bytes(), this.batchPtr);
  }


  /** The rule code of the last `decideOne`, 0 from a module older than ABI 1.3 (whose byte 60 is reserved). */
  lastRule(): number {
    if (!this.attributesRules) return 0;
    const words = this.words();
    return words !== undefined ? words[(this.batchPtr + OFF_RULE) >> 2] : readRule(this.bytes(), this.batchPtr);
  }

  /**
   * Which policy and rule (reason, rule) stand for: kwp_attribution when the
   * module exports it, else the reason's explanation as the policy. Off the
   * packet path; undefined when the module has nothing to say. It gets the
   * tank of a delivery call, not of a decision: building text allocates, and
   * an allocation may run a step of the module's collector over all of its
   * state (the NetworkPolicy module at 10,000 pods and 1,000 policies ran
   * out of a decision's fuel in about one call of 400, which broke the
   * instance, so the stage answered its failure policy from then on).
   */
  attribution(reason: number, rule: number): Attribution | undefined {
    const fn = this.exports.kwp_attribution;
    if (typeof fn === 'function' && this.attributesRules) {
      const len = this.guarded(() => fn(reason, rule), this.callFuel, 'kwp_attribution');
      if (len <= 0) return undefined;
      // Longer than maxReasonBytes: the module's output is cut, and cut JSON is no attribution.
      if (len > this.compiled.limits.maxReasonBytes) return undefined;
      return parseAttribution(this.resultText(len));
    }
    const text = this.explain(reason);
    return text ? { policy: text, rule: '' } : undefined;
  }

  /**
   * The packet path's call into the module: no closure, one fuel refill.
   * Same failure semantics as `guarded`.
   */
  private runDecide(n: number, fuel = this.decideFuel * n, decide = this.decide, fueled = this.decideFueled, name = 'kwp_decide'): void {
    if (this.broken) throw this.broken;
    try {
      if (fueled !== undefined) fueled(fuel, n);
      else {
        this.fuel.value = fuel;
        decide(n);
      }
    } catch (err) {
      throw this.trapped(err, fuel, name);
    }
  }

  /** Copies records `first .. first+n` of `records` into the module's batch area. */
  private writeBatch(records: Uint8Array, first: number, n: number): void {
    const from = first * RECORD_SIZE;
    this.bytes().set(from === 0 && records.length === n * RECORD_SIZE ? records : records.subarray(from, from + n * RECORD_SIZE), this.batchPtr);
  }

  /**
   * ModuleInstance.decidePairsInto. The tank is fuelPerDecision for each
   * direction asked, as two kwp_decide calls would get for the same records;
   * verdicts are read from the batch area and the pair area only, both inside
   * the memory (readPairArea).
   */
  decidePairsInto(records: Uint8Array, first: number, n: number, egress: Uint8Array, ingress: Uint8Array, codes?: PairCodes): void {
    const decide = this.decidePair;
    if (decide === undefined) throw new KwpError('KWP_ERR_INSTANTIATE', `module ${this.name}: does not decide both directions in one call (no kwp_pair_results area)`);
    if (this.broken) throw this.broken;
    const base = this.batchPtr;
    const from = first * RECORD_SIZE;
    let directions = n;
    for (let i = 0, r = from + OFF_DIRECTION; i < n; i++, r += RECORD_SIZE) if (records[r] === DIRECTION_BOTH) directions++;
    // The limits fit fuelPerDecision for MAX_RECORDS_PER_CALL records into the 31-bit tank, not twice as many: halves then.
    if (this.decideFuel * directions > MAX_FUEL && n > 1) {
      const half = n >> 1;
      this.decidePairsInto(records, first, half, egress, ingress, codes);
      this.decidePairsInto(records, first + half, n - half, egress, ingress, codes);
      return;
    }
    this.writeBatch(records, first, n);
    this.runDecide(n, this.decideFuel * directions, decide, this.decidePairFueled, 'kwp_decide_pair');
    const mem = this.bytes();
    if (codes !== undefined) {
      this.readPairCodes(records, first, n, egress, ingress, codes);
      return;
    }
    for (let i = 0, p = base, q = this.pairPtr + PAIR_OFF_VERDICT, r = from + OFF_DIRECTION; i < n; i++, p += RECORD_SIZE, q += PAIR_RESULT_SIZE, r += RECORD_SIZE) {
      const dir = records[r];
      const v = mem[p + OFF_VERDICT];
      if (dir === DIRECTION_BOTH) {
        egress[first + i] = v;
        ingress[first + i] = v === Verdict.Deny ? Verdict.Next : mem[q];
      } else if (dir === 0) egress[first + i] = v;
      else ingress[first + i] = v;
    }
  }

  pairAnswersInPlace(n: number): PairAnswers | undefined {
    if (this.decidePair === undefined || !this.attributesRules || !WORD_READS) return undefined;
    if (((this.batchPtr | this.pairPtr) & 3) !== 0 || n > this.batchCapacity || this.decideFuel * 2 * n > MAX_FUEL) return undefined;
    return this;
  }

  answerWords(): Uint32Array | undefined { return this.words(); }
  get batchReasonWord(): number { return (this.batchPtr + OFF_REASON) >> 2; }
  get pairReasonWord(): number { return (this.pairPtr + PAIR_OFF_REASON) >> 2; }

  /**
   * decidePairsInto for the one-packet walk's single record, given as its
   * sixteen words: copied into the batch area word by word (no
   * TypedArray.set, whose builtin is cold after the agent slept), the pair
   * call made, and the answers returned as `egress | ingress << 8` (ingress
   * Next when egress is denied; the direction not asked is 0). Undefined
   * when the instance cannot take this path (no pair call, an unaligned
   * batch area, a big-endian host): then decidePairsInto.
   */
  decidePairOne(record: Uint32Array): number {
    if (this.broken) throw this.broken;
    const words = this.words()!;
    const base = this.batchPtr;
    const w = base >> 2;
    for (let i = 0; i < RECORD_WORDS; i++) words[w + i] = record[i];
    const dir = record[0] & 0xff;
    const fuel = dir === DIRECTION_BOTH ? this.decideFuel * 2 : this.decideFuel;
    try {
      this.decidePairFueled!(fuel, 1);
    } catch (err) {
      throw this.trapped(err, fuel, 'kwp_decide_pair');
    }
    const mem = this.bytes();
    const v = mem[base + OFF_VERDICT];
    if (dir === 0) return v;
    if (dir === 1) return v << 8;
    return v | ((v === Verdict.Deny ? Verdict.Next : mem[this.pairPtr + PAIR_OFF_VERDICT]) << 8);
  }

  /**
   * ModuleInstance.decidePairsPicked: decidePairsInto for the records of
   * `records` (a chunk as words) at the indices `picked[0..n)`, copied word by
   * word straight into the batch area, so that the batched pair walk does
   * not first pack them into a buffer of its own to have them copied again.
   * Answers by position in the call: `egress[j]`, `ingress[j]` for record
   * `picked[j]`, as decidePairsInto writes them. Returns false, having done
   * nothing, when one call cannot take them (more than batchCapacity
   * records, a tank over MAX_FUEL, no fueled pair call, an unaligned batch
   * area, a big-endian host): the caller then packs them for decidePairsInto.
   */
  decidePairsPicked(records: Uint32Array, picked: Int32Array, n: number, egress: Uint8Array, ingress: Uint8Array): boolean {
    const fueled = this.decidePairFueled;
    if (fueled === undefined || n > this.batchCapacity || !this.decidesPairOne) return false;
    let directions = n;
    for (let j = 0; j < n; j++) if ((records[picked[j] << 4] & 0xff) === DIRECTION_BOTH) directions++;
    const fuel = this.decideFuel * directions;
    if (fuel > MAX_FUEL) return false;
    if (this.broken) throw this.broken;
    const words = this.words()!;
    // Sixteen stores written out, as Pipeline.pack: a loop over a record's words costs about twice as much.
    for (let j = 0, d = this.batchPtr >> 2; j < n; j++, d += RECORD_WORDS) {
      const s = picked[j] << 4;
      words[d] = records[s]; words[d + 1] = records[s + 1]; words[d + 2] = records[s + 2]; words[d + 3] = records[s + 3];
      words[d + 4] = records[s + 4]; words[d + 5] = records[s + 5]; words[d + 6] = records[s + 6]; words[d + 7] = records[s + 7];
      words[d + 8] = records[s + 8]; words[d + 9] = records[s + 9]; words[d + 10] = records[s + 10]; words[d + 11] = records[s + 11];
      words[d + 12] = records[s + 12]; words[d + 13] = records[s + 13]; words[d + 14] = records[s + 14]; words[d + 15] = records[s + 15];
    }
    try {
      fueled(fuel, n);
    } catch (err) {
      throw this.trapped(err, fuel, 'kwp_decide_pair');
    }
    const mem = this.bytes();
    for (let j = 0, p = this.batchPtr + OFF_VERDICT, q = this.pairPtr + PAIR_OFF_VERDICT; j < n; j++, p += RECORD_SIZE, q += PAIR_RESULT_SIZE) {
      const dir = records[picked[j] << 4] & 0xff;
      const v = mem[p];
      if (dir === DIRECTION_BOTH) {
        egress[j] = v;
        ingress[j] = v === Verdict.Deny ? Verdict.Next : mem[q];
      } else if (dir === 0) egress[j] = v;
      else ingress[j] = v;
    }
    return true;
  }

  /** Whether decidePairOne may be called. */
  get decidesPairOne(): boolean {
    return this.decidePairFueled !== undefined && WORD_READS && (this.batchPtr & 3) === 0;
  }

  /**
   * decidePairsInto's reading of the answers while flows are recorded: the
   * verdicts as without codes, and the codes of every direction answered
   * Accept or Deny (an ingress-only record's answer is in the record, as
   * kwp_decide's; a pair's ingress answer in its pair area entry).
   */
  private readPairCodes(records: Uint8Array, first: number, n: number, egress: Uint8Array, ingress: Uint8Array, codes: PairCodes): void {
    const mem = this.bytes();
    const withRules = this.attributesRules;
    const { egressReasons, egressRules, ingressReasons, ingressRules } = codes;
    const base = this.batchPtr;
    const pairs = this.pairPtr;
    // One load per code where both areas are word-aligned (the SDK's are): assembling them from bytes cost as much as the rest of the recording.
    const words = (pairs & 3) === 0 ? this.words() : undefined;
    for (let i = 0, p = base, q = pairs, r = first * RECORD_SIZE + OFF_DIRECTION; i < n; i++, p += RECORD_SIZE, q += PAIR_RESULT_SIZE, r += RECORD_SIZE) {
      const dir = records[r];
      const at = first + i;
      const v = mem[p + OFF_VERDICT];
      // Only an Accept's or a Deny's codes are read (a walk goes on after Next and Pass), so only those are copied.
      const said = v === Verdict.Accept || v === Verdict.Deny;
      if (dir === 1) {
        ingress[at] = v;
        if (said) {
          ingressReasons[at] = words !== undefined ? words[(p + OFF_REASON) >> 2] : readReason(mem, p);
          ingressRules[at] = !withRules ? 0 : words !== undefined ? words[(p + OFF_RULE) >> 2] : readRule(mem, p);
        }
        continue;
      }
      egress[at] = v;
      if (said) {
        egressReasons[at] = words !== undefined ? words[(p + OFF_REASON) >> 2] : readReason(mem, p);
        egressRules[at] = !withRules ? 0 : words !== undefined ? words[(p + OFF_RULE) >> 2] : readRule(mem, p);
      }
      if (dir !== DIRECTION_BOTH) continue;
      if (v === Verdict.Deny) {
        ingress[at] = Verdict.Next;
        continue;
      }
      const w = (ingress[at] = mem[q + PAIR_OFF_VERDICT]);
      if (w === Verdict.Accept || w === Verdict.Deny) {
        ingressReasons[at] = words !== undefined ? words[(q + PAIR_OFF_REASON) >> 2] : readPairWord(mem, q + PAIR_OFF_REASON);
        ingressRules[at] = !withRules ? 0 : words !== undefined ? words[(q + PAIR_OFF_RULE) >> 2] : readPairWord(mem, q + PAIR_OFF_RULE);
      }
    }
  }


  /**
   * Decides records `first .. first+n` of `records` (n ≤ batchCapacity) and
   * writes their verdict bytes to `verdicts[first .. first+n]`. The records
   * are not written back: the batched pipeline needs only the verdicts.
   */
  decideInto(records: Uint8Array, first: number, n: number, verdicts: Uint8Array, reasons?: Uint32Array, rules?: Uint32Array): void {
    if (this.broken) throw this.broken;
    const base = this.batchPtr;
    this.writeBatch(records, first, n);
    this.runDecide(n);
    const mem = this.bytes();
    if (reasons === undefined || rules === undefined) {
      for (let i = 0, p = base + OFF_VERDICT; i < n; i++, p += RECORD_SIZE) verdicts[first + i] = mem[p];
      return;
    }
    // Flow recording asks for the reason and rule codes too (host/flow-records/),
    // in the same pass, and only where the module said more than Next (most
    // stages pass most records on): a second pass assembling every code from
    // bytes was most of what recording cost the batched walk. A Next record's
    // codes are left as they were, not zeroed: nobody reads them, and the two
    // stores per record and stage call were a third of recording's cost.
    const withRules = this.attributesRules;
    const words = this.words();
    if (words === undefined) {
      for (let i = 0, p = base; i < n; i++, p += RECORD_SIZE) {
        const v = (verdicts[first + i] = mem[p + OFF_VERDICT]);
        if (v === Verdict.Next) continue;
        reasons[first + i] = readReason(mem, p);
        rules[first + i] = withRules ? readRule(mem, p) : 0;
      }
      return;
    }
    for (let i = 0, p = base, w = (base + OFF_REASON) >> 2; i < n; i++, p += RECORD_SIZE, w += RECORD_SIZE >> 2) {
      const v = (verdicts[first + i] = mem[p + OFF_VERDICT]);
      if (v === Verdict.Next) continue;
      reasons[first + i] = words[w];
      // OFF_RULE is the word after OFF_REASON.
      rules[first + i] = withRules ? words[w + 1] : 0;
    }
  }

  /** The text of a reason code; off the packet path, with a delivery call's tank (as `attribution`, for the same reason). */
  explain(reason: number): string {
    if (reason === 0) return '';
    const len = this.guarded(() => this.exports.kwp_explain(reason), this.callFuel, 'kwp_explain');
    // Only the first maxReasonBytes are copied out of the module.
    return this.resultText(len);
  }

  /**
   * The module's decision-cache counters, or undefined when it has no cache
   * or has it turned off. Safe to read between decisions: one call returns
   * the counters' address.
   */
  decisionCacheStats(): DecisionCacheStats | undefined {
    const stats = this.exports.kwp_decision_cache_stats;
    if (typeof stats !== 'function' || this.broken) return undefined;
    const ptr = this.guarded(() => stats(), this.callFuel, 'kwp_decision_cache_stats');
    if (!ptr) return undefined;
    const u8 = this.bytes();
    if (ptr + DECISION_CACHE_STATS_SIZE > u8.byteLength) return undefined;
    const view = new DataView(u8.buffer, ptr, DECISION_CACHE_STATS_SIZE);
    return { hits: Number(view.getBigUint64(0, true)), misses: Number(view.getBigUint64(8, true)) };
  }

  /**
   * 'all', or the pod ids the module needs to see traffic for. `maxIds` is
   * how many pods the host gave the module: the count is the module's to
   * choose, and a longer list cannot be a selection of them, so it means all
   * traffic (the host would otherwise build an array of up to a quarter of
   * the module's memory, outside every budget).
   */
  subjects(maxIds = Infinity): 'all' | number[] {
    const n = this.guarded(() => this.exports.kwp_subjects(), this.callFuel, 'kwp_subjects');
    if (n < 0 || n > maxIds || n * 4 > this.bytes().length) return 'all';
    const bytes = this.resultBytes(n * 4);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(view.getUint32(i * 4, true));
    return ids;
  }
}

function describe(err: unknown): string {
  if (err instanceof ModuleAbort) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}
