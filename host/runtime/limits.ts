// The sandbox's limits and their defaults: every bound the host puts on a
// module, an upload, a pipeline or what a module may write, as one field each
// (docs/sandbox.md has a row per field: default, how to set it, the attack it
// stops). Every limit is enforced by the loader, the instance, the stage, the
// engine or the admin API; a value that cannot be enforced is refused rather
// than accepted and ignored.

import { MAX_RECORDS_PER_CALL } from '../abi/record.js';

export interface SandboxLimits {
  /** Largest module accepted, in bytes. */
  maxModuleBytes: number;
  /**
   * Largest linear memory a module that defines its own may have, in 64 KiB
   * pages; for a module that imports env.memory (the built-ins do), the part
   * of its per-stage cap that does not depend on the state (see
   * `memoryCapForState`).
   */
  maxMemoryPages: number;
  /**
   * Bytes of memory a stage whose module imports env.memory may use per byte
   * of state the host delivers to it (PodInfo records and objects' JSON), on
   * top of maxMemoryPages.
   */
  memoryPerStateByte: number;
  /** The per-stage cap's ceiling however large the state, in pages. */
  maxStageMemoryPages: number;
  /**
   * Fuel for one decision record (scaled by batch size), one kwp_explain and
   * one kwp_attribution call. A unit is 16 weighted instructions or 16 bytes
   * of a bulk instruction (fuel-charges.ts, docs/sandbox.md "How fuel is
   * counted").
   */
  fuelPerDecision: number;
  /**
   * Fuel for every other call (configuration, deliveries, kwp_subjects) of a
   * stage without state beyond the base memory cap, and for the start
   * function.
   */
  fuelPerCall: number;
  /**
   * Fuel a call gets on top of fuelPerCall per byte of state its stage's
   * memory cap was sized for (memoryCapForState): the Synced step of a
   * delivery compiles the whole state in one call.
   */
  fuelPerStateByte: number;
  /** Log lines per second one instance may emit before the host drops them. */
  logLinesPerSecond: number;

  // ---- the shape of a module (checked before any code runs) ----
  /** Tables a module may define. */
  maxTables: number;
  /** Elements a table may have, at start and at its maximum (a table must declare one). */
  maxTableElements: number;
  /** Functions a module may define or import. */
  maxFunctions: number;
  /** Globals a module may define or import. */
  maxGlobals: number;
  /** Entries of the data section. */
  maxDataSegments: number;
  /** Entries of the element section. */
  maxElementSegments: number;

  // ---- pipelines and the memory of all their instances ----
  /** Stages one pipeline may have. */
  maxStages: number;
  /**
   * What all instances of all pipelines kept (active, the rollback one, one
   * being built) may reserve together, in MiB: each stage counts its memory
   * maximum and its tables at their maximum.
   */
  memoryBudgetMiB: number;
  /** V8 heap of the process that validates and self-tests uploads (and of the instrumentation helper thread), in MiB. */
  validationHeapMiB: number;

  // ---- what a module may write ----
  /** Bytes of one kwp.log line; the rest is cut, with a note saying how much. */
  maxLogLineBytes: number;
  /** Bytes of one explanation reason (kwp_explain's text). */
  maxReasonBytes: number;
  /** Bytes of all reasons of one explained flow, both directions; later reasons are left out with a note. */
  maxExplainBytes: number;
  /** UTF-16 code units of an env.abort message (and of its file name) the host copies. */
  maxAbortMessageChars: number;
  /** Bytes of the kwp.meta custom section. */
  maxMetaBytes: number;
  /** Characters of any one kwp.meta string (name, version, description, each kind). */
  maxMetaStringChars: number;
  /** Entries of kwp.meta's kinds list. */
  maxMetaKinds: number;
  /** Failure-policy error lines one stage may log per second; the rest are counted and reported with the next line. */
  failureLinesPerSecond: number;
  // ---- wall-clock bounds (what fuel cannot promise) ----
  /**
   * An upload's self-test (instantiation, configuration, the probe
   * decisions), in ms. Past it the process running the self-test is killed
   * and the upload refused; the uploads queued behind it start at once on a
   * fresh process.
   */
  selfTestTimeoutMs: number;
  /**
   * One kwp_decide call (a batch of up to 64 records, or the one record of
   * an explanation), in ms, counted from when the instance's thread began
   * it. Past it the thread is stopped, the call's records get the stage's
   * failure policy and the stage is rebuilt (docs/sandbox.md, "The
   * wall-clock backstop"). Below 1000: the calling thread waits for it.
   */
  decisionDeadlineMs: number;
  /**
   * Every other call into a module (instantiation with its start function,
   * kwp_configure, pod and object deliveries, kwp_subjects, kwp_explain's
   * text), in ms, counted the same way. Below 1000 for the same reason.
   */
  callDeadlineMs: number;
  /**
   * A build's calls into an instance that does not answer yet (kwp_configure
   * and the deliveries that feed it the state), in ms, counted the same way.
   * The main thread does not wait for them (it awaits each, answering
   * /healthz meanwhile), so this may be long: a large state's processing on
   * a loaded node takes seconds; it only stops a build that would not end.
   */
  feedDeadlineMs: number;
  /**
   * How long a stage whose call overran a deadline answers its failure
   * policy before its module is rebuilt, in ms; it doubles with every
   * further overrun (up to 5 minutes) and starts over after 5 minutes
   * without one. Stops a module that hangs on every packet from turning the
   * agent into a loop of thread starts and state replays.
   */
  deadlineQuarantineMs: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  maxModuleBytes: 4 * 1024 * 1024,
  maxMemoryPages: 1024,
  // Measured (docs/sandbox.md): the NetworkPolicy module needs about 3 bytes
  // per delivered byte for the bench generator's policies, 6 for policies
  // that share no selector; 8 leaves room for the collector's garbage and for
  // growth until the next rebuild.
  memoryPerStateByte: 8,
  maxStageMemoryPages: 8192,
  // Measured (docs/sandbox.md, "How fuel is counted"): a unit of the slowest
  // straight-line code took up to 17 ns of CPU on this 2-core machine under
  // load (a few ns when quiet), so a decision's tank lasts a few ms and a
  // call's base tank tens of ms: the agent's main thread, which answers
  // /healthz, runs these calls unless --module-threads; a call's base tank
  // also fills the base memory cap twice (a start function zeroing its
  // memory). The built-ins need up
  // to ~41,000 units for a decision (kwp_attribution at 100,000
  // NetworkPolicies), 1.6 million for a pod delivery at 20,000 pods, and for
  // the Synced step ~15 units per state byte at 100,000 NetworkPolicies but
  // over 35 at the bench's 10,000 pods and 100 cluster policies (pods times
  // policies): fuelPerStateByte leaves room for that. The cluster policy
  // modules fill every pod's list in Synced up to a million pod-policy pairs
  // (about 320 units each); their state is smallest for that work with
  // pods and policies alike in number (1,000 x 1,000: 276 million units at
  // 512 a byte, 320 million needed), so 1,024 a byte covers it 1.4 times.
  fuelPerDecision: 1_000_000,
  fuelPerCall: 8_000_000,
  fuelPerStateByte: 1024,
  logLinesPerSecond: 20,
  maxTables: 4,
  maxTableElements: 65_536,
  maxFunctions: 50_000,
  maxGlobals: 10_000,
  maxDataSegments: 100_000,
  maxElementSegments: 10_000,
  maxStages: 32,
  memoryBudgetMiB: 2048,
  validationHeapMiB: 512,
  maxLogLineBytes: 4096,
  maxReasonBytes: 1024,
  maxExplainBytes: 65_536,
  maxAbortMessageChars: 512,
  maxMetaBytes: 16_384,
  maxMetaStringChars: 1024,
  maxMetaKinds: 64,
  failureLinesPerSecond: 1,
  selfTestTimeoutMs: 1000,
  decisionDeadlineMs: 50,
  callDeadlineMs: 500,
  feedDeadlineMs: 60_000,
  deadlineQuarantineMs: 1000,
};

/**
 * The thread that asks a module for a decision (the agent's main thread,
 * which also answers /healthz and the admin API) waits for the call up to
 * its deadline, so a deadline must stay below the 1 s within which /healthz
 * answers.
 */
export const MAX_DEADLINE_MS = 999;

/** What one table element costs the host: V8 keeps the table and the instance's dispatch table, 8 bytes an entry each. */
export const TABLE_ELEMENT_BYTES = 16;
/** V8 refuses tables larger than this, so a larger limit could not be what bounds them. */
const V8_MAX_TABLE_ELEMENTS = 10_000_000;

export function resolveLimits(partial?: Partial<SandboxLimits>): SandboxLimits {
  const unknown = Object.keys(partial ?? {}).filter((k) => !(k in DEFAULT_LIMITS));
  if (unknown.length) throw new RangeError(`unknown sandbox limit(s) ${unknown.join(', ')}; the limits are ${Object.keys(DEFAULT_LIMITS).join(', ')}`);
  const defined = Object.fromEntries(Object.entries(partial ?? {}).filter(([, v]) => v !== undefined));
  const limits = { ...DEFAULT_LIMITS, ...defined } as SandboxLimits;
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`sandbox limit ${key} must be a positive integer, got ${value}`);
  }
  if (limits.maxStageMemoryPages > 65536) throw new RangeError('sandbox limit maxStageMemoryPages cannot exceed 65536 (4 GiB)');
  if (limits.maxMemoryPages > limits.maxStageMemoryPages) {
    throw new RangeError(`sandbox limit maxMemoryPages (${limits.maxMemoryPages}) cannot exceed maxStageMemoryPages (${limits.maxStageMemoryPages})`);
  }
  if (limits.fuelPerCall > MAX_FUEL || limits.fuelPerDecision * MAX_RECORDS_PER_CALL > MAX_FUEL) {
    throw new RangeError(`fuel limits must fit the 31-bit fuel counter (fuelPerDecision * ${MAX_RECORDS_PER_CALL} and fuelPerCall <= 2^31-1)`);
  }
  if (limits.maxTableElements > V8_MAX_TABLE_ELEMENTS) {
    throw new RangeError(`sandbox limit maxTableElements cannot exceed ${V8_MAX_TABLE_ELEMENTS} (V8's own table limit)`);
  }
  const oneStageMiB = Math.ceil(limits.maxMemoryPages / 16);
  if (limits.memoryBudgetMiB < oneStageMiB) {
    throw new RangeError(`sandbox limit memoryBudgetMiB (${limits.memoryBudgetMiB}) is below one stage at maxMemoryPages (${oneStageMiB} MiB), so no pipeline could be built`);
  }
  for (const key of ['decisionDeadlineMs', 'callDeadlineMs'] as const) {
    if (limits[key] > MAX_DEADLINE_MS) throw new RangeError(`sandbox limit ${key} cannot exceed ${MAX_DEADLINE_MS} ms: the agent's main thread waits for a module call up to its deadline, and /healthz must answer within a second`);
  }
  if (limits.feedDeadlineMs > 600_000) throw new RangeError('sandbox limit feedDeadlineMs cannot exceed 600000 (10 minutes)');
  if (limits.deadlineQuarantineMs > 300_000) throw new RangeError('sandbox limit deadlineQuarantineMs cannot exceed 300000 (5 minutes, the most a quarantine doubles to)');
  if (limits.validationHeapMiB < 16) throw new RangeError('sandbox limit validationHeapMiB must be at least 16 (V8 needs that much to start a thread)');
  return limits;
}

/**
 * `NAME=VALUE` settings (the agent's repeatable --sandbox-limit flag), each
 * checked against the field list; resolveLimits checks the values together.
 */
export function parseLimitSettings(settings: string[], where: string): Partial<SandboxLimits> {
  const out: Partial<Record<keyof SandboxLimits, number>> = {};
  for (const setting of settings) {
    const m = /^([A-Za-z]+)=(\d+)$/.exec(setting.trim());
    if (!m) throw new RangeError(`${where}: "${setting}" is not NAME=VALUE with a whole number, e.g. maxStages=16`);
    if (!(m[1] in DEFAULT_LIMITS)) throw new RangeError(`${where}: unknown sandbox limit "${m[1]}"; the limits are ${Object.keys(DEFAULT_LIMITS).join(', ')} (docs/sandbox.md)`);
    out[m[1] as keyof SandboxLimits] = Number(m[2]);
  }
  return out;
}

export const PAGE_BYTES = 65536;
/** The fuel tank is an i32 global; a charge that takes it below zero traps. */
export const MAX_FUEL = 0x7fffffff;

/** The bytes of state a memory cap of `capPages` was sized for (the inverse of memoryCapForState). */
export function stateBytesOfCap(limits: SandboxLimits, capPages: number): number {
  return Math.floor((Math.max(0, capPages - limits.maxMemoryPages) * PAGE_BYTES) / limits.memoryPerStateByte);
}

/**
 * The tank of a call other than a decision into an instance whose memory
 * cap is `capPages`: fuelPerCall, plus fuelPerStateByte for every byte of
 * state the cap was sized for. The work of delivering a state (the Synced
 * step compiles all of it in one call) grows with the state, and so does the
 * time a module may take per call. The tank is at most the counter's 2^31-1
 * (with the defaults, a stage at maxStageMemoryPages gets 1.9 billion).
 */
export function callFuelForCap(limits: SandboxLimits, capPages: number): number {
  return Math.min(MAX_FUEL, limits.fuelPerCall + limits.fuelPerStateByte * stateBytesOfCap(limits, capPages));
}

/**
 * The memory cap, in pages, of a stage instance that is to hold `stateBytes`
 * of delivered state: maxMemoryPages plus memoryPerStateByte bytes for every
 * byte, at most maxStageMemoryPages. It applies to modules that import
 * env.memory; a module that defines its memory keeps the maximum it declares.
 */
export function memoryCapForState(limits: SandboxLimits, stateBytes: number): number {
  const pages = limits.maxMemoryPages + Math.ceil((stateBytes * limits.memoryPerStateByte) / PAGE_BYTES);
  return Math.min(limits.maxStageMemoryPages, pages);
}
