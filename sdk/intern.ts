// Sharing of equal immutable values between the objects a module keeps.
// At cluster scale a module's memory is mostly copies of the same few strings
// and selectors: 100,000 NetworkPolicies name a few thousand namespaces,
// label keys and values, and most of their selectors are one of a few hundred
// shapes. Compiled structures point at one shared copy instead.
//
// Each table is bounded and starts over when full: sharing is an
// optimisation, so a value seen after a reset just gets its own copy, and a
// cluster whose values all differ costs no more than the bound.

/** A bounded content-keyed table: `share(key, value)` returns the first value stored under an equal key. */
export class SharedTable<T> {
  private readonly table: Map<string, T> = new Map<string, T>();
  constructor(private readonly bound: i32) {}

  share(key: string, value: T): T {
    const table = this.table;
    if (table.has(key)) return table.get(key);
    if (table.size >= this.bound) table.clear();
    table.set(key, value);
    return value;
  }

  /** The value stored under `key`, or null. */
  get(key: string): T | null {
    return this.table.has(key) ? this.table.get(key) : null;
  }

  get size(): i32 { return this.table.size; }
}

/** Strings of a cluster's schema and topology: label keys and values in selectors, namespaces, port names. */
const strings = new SharedTable<string>(16384);

/** The shared copy of `s`. */
export function intern(s: string): string {
  if (s.length == 0) return "";
  return strings.share(s, s);
}

/** The same string without sharing it past the table's bound: for callers that own a table of their own. */
export function internIn(table: Map<string, string>, s: string): string {
  if (table.has(s)) return table.get(s);
  table.set(s, s);
  return s;
}
