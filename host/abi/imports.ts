// What a module may import (sdk/ABI.md, "Imports"): the allowlist the loader
// checks and the instance satisfies. Nothing else reaches a module: no clock,
// no randomness, no file system, no network.

/** A function type as the binary states it: value type codes (0x7f is i32). */
export interface AbiFuncType { params: number[]; results: number[] }

export interface AbiImport {
  module: string;
  name: string;
  kind: 'function' | 'memory';
  /** Functions: the exact type the host provides (a module declaring another is refused). */
  type?: AbiFuncType;
}

const I32 = 0x7f;

export const IMPORT_ALLOWLIST: readonly AbiImport[] = [
  { module: 'env', name: 'abort', kind: 'function', type: { params: [I32, I32, I32, I32], results: [] } },
  { module: 'env', name: 'memory', kind: 'memory' },
  { module: 'kwp', name: 'log', kind: 'function', type: { params: [I32, I32, I32], results: [] } },
];

/** `kwp.log`'s level argument, by value (sdk/ABI.md). */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
