// Object delivery (sdk/ABI.md, "Object delivery"): the op codes of
// `kwp_object(kind, op, ptr, len)` and the payload encoding, an object's
// UTF-8 JSON. The SDK's side is `sdk/exports.ts` and `sdk/registry.ts`.
import type { KubeObject } from '../contract.js';

export const ObjectOp = { Upsert: 0, Delete: 1, Reset: 2, Synced: 3 } as const;
export type ObjectOp = (typeof ObjectOp)[keyof typeof ObjectOp];

const encoder = new TextEncoder();
let scratch = new Uint8Array(64 * 1024);
let lastObject: KubeObject | undefined;
let lastJson: Uint8Array | undefined;

/**
 * An object's JSON as a view into a buffer the next call overwrites: the
 * instance copies it into the module's memory at once. Keeping every
 * object's bytes (10,000 policies: several MiB) only saved re-serializing
 * when another stage or a rebuild is fed. Objects are immutable once stored,
 * so the last one is remembered: one event delivered to several stages is
 * serialized once.
 */
export function encodeObject(obj: KubeObject): Uint8Array {
  if (obj === lastObject) return lastJson!;
  lastObject = undefined;
  const text = JSON.stringify(obj);
  // UTF-8 takes at most three bytes per UTF-16 unit.
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(Math.max(text.length * 3, scratch.length * 2));
  const { written } = encoder.encodeInto(text, scratch);
  lastObject = obj;
  lastJson = scratch.subarray(0, written);
  return lastJson;
}

