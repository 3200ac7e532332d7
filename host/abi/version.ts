// The ABI version this host implements (sdk/ABI.md, "Versioning"). A module
// states its own in the immutable i32 global `kwp_abi_version` as
// `major << 16 | minor`; the SDK's side is `sdk/exports.ts`.

export const ABI_MAJOR = 1;
export const ABI_MINOR = 4;

/** The first minor version whose records carry a rule code (record offset 60) and that may export kwp_attribution. */
export const ATTRIBUTION_MINOR = 3;

/** The first minor version that may export kwp_decide_pair and kwp_pair_results (both directions in one call). */
export const PAIR_MINOR = 4;

/** The export a module states its version in. */
export const ABI_VERSION_GLOBAL = 'kwp_abi_version';

/** The global's value for a version: `major << 16 | minor`. */
export function abiVersionWord(major: number, minor: number): number {
  return ((major << 16) | minor) >>> 0;
}

/** The two halves of a `kwp_abi_version` value. */
export function splitAbiVersion(word: number): { major: number; minor: number } {
  return { major: word >>> 16, minor: word & 0xffff };
}
