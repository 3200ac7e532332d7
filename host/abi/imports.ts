// What a module may import (sdk/ABI.md, "Imports"): the allowlist the loader
// checks and the instance satisfies. Nothing else reaches a module: no clock,
// no randomness, no file system, no network.

export interface AbiImport {
  module: string;
  name: string;
  kind: 'function' | 'memory';
}

export const IMPORT_ALLOWLIST: readonly AbiImport[] = [
  { module: 'env', name: 'abort', kind: 'function' },
  { module: 'env', name: 'memory', kind: 'memory' },
  { module: 'kwp', name: 'log', kind: 'function' },
];

/** `kwp.log`'s level argument, by value (sdk/ABI.md). */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
