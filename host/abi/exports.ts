// What a module exports (sdk/ABI.md, "Exports"): the names the loader
// requires and the signatures the instance calls them with. The SDK's side is
// `sdk/exports.ts`.

export const REQUIRED_FUNCTIONS = [
  'kwp_alloc', 'kwp_configure', 'kwp_pod_upsert', 'kwp_pod_delete', 'kwp_object',
  'kwp_batch', 'kwp_batch_capacity', 'kwp_decide', 'kwp_explain', 'kwp_subjects', 'kwp_result',
] as const;

const I32 = 0x7f;
const fn = (params: number, results: number) => ({ params: Array(params).fill(I32), results: Array(results).fill(I32) });

/**
 * The exact type of every function export the host calls (sdk/ABI.md,
 * "Exports"). JavaScript converts whatever a wrong type returns: an f64 or a
 * multi-value batch address read the verdicts at NaN (every decision
 * undefined while the stage looked healthy), an i64 one made BigInt
 * arithmetic throw outside any call; so the loader refuses any other type.
 */
export const EXPORT_TYPES: Readonly<Record<string, { params: number[]; results: number[] }>> = {
  kwp_alloc: fn(1, 1), kwp_configure: fn(2, 1), kwp_pod_upsert: fn(2, 0), kwp_pod_delete: fn(1, 0),
  kwp_object: fn(4, 1), kwp_batch: fn(0, 1), kwp_batch_capacity: fn(0, 1), kwp_decide: fn(1, 1),
  kwp_explain: fn(1, 1), kwp_subjects: fn(0, 1), kwp_result: fn(0, 1),
  kwp_decision_cache_stats: fn(0, 1), kwp_attribution: fn(2, 1), kwp_pair_results: fn(0, 1), kwp_decide_pair: fn(1, 1),
};

/** Exports a module may leave out, with the minor version that added each. */
export const OPTIONAL_FUNCTIONS = [
  { name: 'kwp_decision_cache_stats', since: { major: 1, minor: 1 } },
  { name: 'kwp_attribution', since: { major: 1, minor: 3 } },
  { name: 'kwp_pair_results', since: { major: 1, minor: 4 } },
  { name: 'kwp_decide_pair', since: { major: 1, minor: 4 } },
] as const;

/** A module's exports as the host calls them (pointers are offsets into its memory). */
export interface AbiExports {
  memory: WebAssembly.Memory;
  kwp_alloc(size: number): number;
  kwp_configure(ptr: number, len: number): number;
  kwp_pod_upsert(ptr: number, len: number): void;
  kwp_pod_delete(id: number): void;
  kwp_object(kind: number, op: number, ptr: number, len: number): number;
  kwp_batch(): number;
  kwp_batch_capacity(): number;
  kwp_decide(count: number): number;
  kwp_explain(reason: number): number;
  kwp_subjects(): number;
  kwp_result(): number;
  /** Optional (1.1): address of two u64 counters, decision-cache hits and misses; 0 when the cache is off. */
  kwp_decision_cache_stats?: () => number;
  /** Optional (1.3): the length of a JSON attribution for (reason, rule) in the result buffer; 0 for none. */
  kwp_attribution?: (reason: number, rule: number) => number;
  /** Optional (1.4): the address of the pair area (kwp_batch_capacity entries of PAIR_RESULT_SIZE bytes), 0 when the module does not decide both directions in one call. */
  kwp_pair_results?: () => number;
  /** Optional (1.4): decide `count` records of the batch area, each in the direction or directions its direction byte asks for. */
  kwp_decide_pair?: (count: number) => number;
}

/** Byte size of the counters `kwp_decision_cache_stats` points at: hits, then misses, u64 each. */
export const DECISION_CACHE_STATS_SIZE = 16;
