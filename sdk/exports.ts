// The ABI's exports (ABI.md). A module's entry file re-exports this file:
//   export * from "kube-wasm-policies/sdk/exports";
// Everything here only adapts raw memory to the Evaluator API.

import { parseJSON, jsonError, JValue, JKind } from "./json";
import { decodePodInfo } from "./podinfo";
import { pods } from "./registry";
import { invalidatePodCaches } from "./podcache";
import { Decision, RECORD_SIZE, OFF_DIRECTION, OFF_VERDICT, OFF_REASON, OFF_RULE, Verdict, DIRECTION_BOTH, PAIR_RESULT_SIZE, PAIR_OFF_VERDICT, PAIR_OFF_REASON, PAIR_OFF_RULE } from "./decision";
import { registered, registeredDecidesPairs, Evaluator } from "./evaluator";
import * as decisionCache from "./decision-cache";
import { setRuleIndexEnabled } from "./rule-index-switch";

/** ABI 1.4. The host reads this initializer from the binary. */
export const kwp_abi_version: i32 = 0x00010004;

const BATCH_CAPACITY: i32 = 64;
const batchArea = memory.data(<i32>(BATCH_CAPACITY * <i32>RECORD_SIZE), 16);
// kwp_decide_pair's ingress answers, one entry per record of the batch area (ABI 1.4).
const pairArea = memory.data(<i32>(BATCH_CAPACITY * <i32>PAIR_RESULT_SIZE), 16);
const decision = new Decision();

let result: ArrayBuffer = new ArrayBuffer(256);

function setResultText(text: string): i32 {
  result = String.UTF8.encode(text);
  return result.byteLength;
}

export function kwp_alloc(size: i32): usize {
  return heap.alloc(size > 0 ? <usize>size : 1);
}

export function kwp_result(): usize {
  return changetype<usize>(result);
}

export function kwp_configure(ptr: usize, len: i32): i32 {
  // The host always sends a JSON object, "{}" when the stage has no config.
  const cfg = parseJSON(ptr, <usize>len);
  if (ptr != 0) heap.free(ptr);
  if (cfg == null) return max(1, setResultText("config is not valid JSON: " + jsonError));
  decisionCache.objectsChanged();
  const cacheErr = takeDecisionCacheKey(cfg);
  if (cacheErr != null) return max(1, setResultText(cacheErr));
  const indexErr = takeRuleIndexKey(cfg);
  if (indexErr != null) return max(1, setResultText(indexErr));
  const err = registered().configure(cfg);
  if (err != null) return max(1, setResultText(err));
  return 0;
}

// `decisionCache` and `ruleIndex` are the SDK's keys, not the evaluator's:
// they are taken out of the config before the evaluator sees it, so
// evaluators that refuse unknown keys keep doing so for their own.
const KEY_ABSENT: i32 = -1;
const KEY_NOT_BOOL: i32 = -2;

/** Removes `name` from an object config: KEY_ABSENT, KEY_NOT_BOOL, or 0/1 for false/true. */
function takeBoolKey(cfg: JValue, name: string): i32 {
  if (cfg.kind != JKind.Object) return KEY_ABSENT;
  const keys = cfg.keys!;
  const idx = keys.indexOf(name);
  if (idx < 0) return KEY_ABSENT;
  const v = cfg.items![idx];
  if (v.kind != JKind.Bool) return KEY_NOT_BOOL;
  keys.splice(idx, 1);
  cfg.items!.splice(idx, 1);
  return v.b ? 1 : 0;
}

function takeDecisionCacheKey(cfg: JValue): string | null {
  const on = registered().cachesDecisions();
  decisionCache.setDecisionCacheEnabled(on);
  const v = takeBoolKey(cfg, "decisionCache");
  if (v == KEY_ABSENT) return null;
  if (v == KEY_NOT_BOOL) return "config.decisionCache must be true or false";
  if (v == 1 && !on) return "config.decisionCache is true, but this evaluator does not cache decisions (its verdicts may depend on more than the record and the delivered state); remove the key";
  decisionCache.setDecisionCacheEnabled(v == 1);
  return null;
}

// false selects the unindexed evaluation (sdk/rule-index-switch.ts), for
// differential tests and diagnosis.
function takeRuleIndexKey(cfg: JValue): string | null {
  setRuleIndexEnabled(true);
  const v = takeBoolKey(cfg, "ruleIndex");
  if (v == KEY_NOT_BOOL) return "config.ruleIndex must be true or false";
  if (v != KEY_ABSENT) setRuleIndexEnabled(v == 1);
  return null;
}

export function kwp_pod_upsert(ptr: usize, len: i32): void {
  const pod = decodePodInfo(ptr, <usize>len);
  heap.free(ptr);
  if (pod == null) return;
  const prev = pods.put(pod);
  invalidatePodCaches(pod.id);
  decisionCache.podChanged(pod.id);
  registered().podUpserted(pod, prev);
}

export function kwp_pod_delete(id: u32): void {
  const prev = pods.remove(id);
  invalidatePodCaches(id);
  decisionCache.podChanged(id);
  if (prev != null) registered().podDeleted(prev);
}

// kwp_object's op codes (ABI.md, "Object delivery").
const OP_UPSERT: i32 = 0;
const OP_DELETE: i32 = 1;
const OP_RESET: i32 = 2;
const OP_SYNCED: i32 = 3;

export function kwp_object(kind: i32, op: i32, ptr: usize, len: i32): i32 {
  const e = registered();
  decisionCache.objectsChanged();
  if (op == OP_RESET) { e.objectsReset(kind); return 0; }
  if (op == OP_SYNCED) { e.objectsSynced(kind); return 0; }
  const obj = parseJSON(ptr, <usize>len);
  if (ptr != 0) heap.free(ptr);
  if (obj == null) return max(1, setResultText("object is not valid JSON: " + jsonError));
  if (op == OP_UPSERT) e.objectUpserted(kind, obj);
  else if (op == OP_DELETE) e.objectDeleted(kind, obj);
  else return max(1, setResultText("unknown object op " + op.toString()));
  return 0;
}

export function kwp_batch(): usize {
  return batchArea;
}

export function kwp_batch_capacity(): i32 {
  return BATCH_CAPACITY;
}

/** One record in the direction its direction byte says: the decision cache first when it is on. */
@inline function decideRecord(e: Evaluator, rec: usize, cached: bool): void {
  if (cached && decisionCache.lookup(rec)) return;
  store<u32>(rec + OFF_REASON, 0);
  store<u32>(rec + OFF_RULE, 0);
  decision.ptr = rec;
  store<u8>(rec + OFF_VERDICT, <u8>e.decide(decision));
  if (cached) decisionCache.remember(rec);
}

export function kwp_decide(count: i32): i32 {
  const e = registered();
  const n = count < BATCH_CAPACITY ? count : BATCH_CAPACITY;
  // Two loops, so the one without the cache does not test for it per record.
  if (decisionCache.decisionCacheEnabled()) {
    for (let i = 0; i < n; i++) decideRecord(e, batchArea + <usize>i * RECORD_SIZE, true);
    return 0;
  }
  for (let i = 0; i < n; i++) decideRecord(e, batchArea + <usize>i * RECORD_SIZE, false);
  return 0;
}

/**
 * Optional (1.4): where kwp_decide_pair puts ingress answers, or 0 when the
 * host must not ask for both directions at once. The host may then ask a
 * stage for a direction the one-direction walk would not have reached (a
 * later stage denies the other direction), so only evaluators whose answers
 * have no side effects offer it (Evaluator.decidesPairs, by default what
 * cachesDecisions says).
 */
export function kwp_pair_results(): usize {
  return registeredDecidesPairs() ? pairArea : 0;
}

/**
 * Optional (1.4): decides `count` records, each in the direction its
 * direction byte asks for: 0 and 1 as kwp_decide, DIRECTION_BOTH egress into
 * the record and then, unless egress denied, ingress into the record's entry
 * of the pair area. The second direction reads the two pods' state the first
 * just brought into the CPU's caches.
 */
export function kwp_decide_pair(count: i32): i32 {
  const e = registered();
  const n = count < BATCH_CAPACITY ? count : BATCH_CAPACITY;
  const cached = decisionCache.decisionCacheEnabled();
  for (let i = 0; i < n; i++) {
    const rec = batchArea + <usize>i * RECORD_SIZE;
    if (load<u8>(rec + OFF_DIRECTION) != DIRECTION_BOTH) {
      decideRecord(e, rec, cached);
      continue;
    }
    const out = pairArea + <usize>i * PAIR_RESULT_SIZE;
    // One cache entry answers both directions (its key is the record with direction byte 2).
    if (cached && decisionCache.lookup(rec)) {
      decisionCache.pairIngress(out);
      continue;
    }
    decideBoth(e, rec, out);
    if (cached) decisionCache.rememberPair(rec, out);
  }
  return 0;
}

/** Egress into the record, then (unless egress denied) ingress into `out`; the decision cache is not consulted. */
function decideBoth(e: Evaluator, rec: usize, out: usize): void {
  store<u8>(rec + OFF_DIRECTION, 0);
  decideRecord(e, rec, false);
  const verdict = load<u8>(rec + OFF_VERDICT);
  store<u8>(rec + OFF_DIRECTION, DIRECTION_BOTH);
  // A denied egress denies the packet: the host does not read the ingress answer.
  if (verdict == <u8>Verdict.Deny) {
    store<u8>(out + PAIR_OFF_VERDICT, <u8>Verdict.Next);
    store<u32>(out + PAIR_OFF_REASON, 0);
    store<u32>(out + PAIR_OFF_RULE, 0);
    return;
  }
  const reason = load<u32>(rec + OFF_REASON);
  const rule = load<u32>(rec + OFF_RULE);
  store<u8>(rec + OFF_DIRECTION, 1);
  decideRecord(e, rec, false);
  store<u8>(out + PAIR_OFF_VERDICT, load<u8>(rec + OFF_VERDICT));
  store<u32>(out + PAIR_OFF_REASON, load<u32>(rec + OFF_REASON));
  store<u32>(out + PAIR_OFF_RULE, load<u32>(rec + OFF_RULE));
  store<u8>(rec + OFF_DIRECTION, DIRECTION_BOTH);
  store<u8>(rec + OFF_VERDICT, verdict);
  store<u32>(rec + OFF_REASON, reason);
  store<u32>(rec + OFF_RULE, rule);
}

export function kwp_explain(reason: u32): i32 {
  return setResultText(registered().explain(reason));
}

/**
 * Optional (1.3): the policy and rule a record's (reason, rule) pair stands
 * for, as a JSON object in the result buffer; 0 when there is nothing to say.
 */
export function kwp_attribution(reason: u32, rule: u32): i32 {
  const a = registered().attribution(reason, rule);
  if (a == null) return 0;
  return setResultText(a.toJSON());
}

export function kwp_subjects(): i32 {
  const e = registered();
  if (e.needsAllTraffic()) return -1;
  const all = pods.all();
  const ids = new Array<u32>(0);
  for (let i = 0; i < all.length; i++) {
    if (e.isSubject(all[i])) ids.push(all[i].id);
  }
  const buf = new ArrayBuffer(ids.length * 4);
  for (let i = 0; i < ids.length; i++) store<u32>(changetype<usize>(buf) + <usize>i * 4, ids[i]);
  result = buf;
  return ids.length;
}

/**
 * Optional (ABI.md): the address of two u64 counters, decision-cache hits and
 * misses since the module started, or 0 when the cache is off.
 */
export function kwp_decision_cache_stats(): usize {
  return decisionCache.decisionCacheEnabled() ? decisionCache.stats : 0;
}
