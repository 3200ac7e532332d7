// "Did you mean": the closest known word to a typo, for kinds, fields, enum
// values, commands and flags alike. Edit distance with adjacent swaps
// (Damerau/optimal string alignment), compared case-insensitively, so
// "Ingres", "NetworkPolcy", "podSelectr" and "ingress" all find their word.

function distance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The known word closest to `word`, or undefined when none is close enough
 * to be a likely typo (at most a third of the word's letters differ, and
 * never more than 3). A word that is a prefix of exactly one known word
 * ("matchLabel", "pipe") counts as close.
 */
export function closest(word: string, known: Iterable<string>): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  const candidates = [...known];
  for (const candidate of candidates) {
    const dist = distance(w, candidate.toLowerCase());
    if (dist < bestDistance) {
      best = candidate;
      bestDistance = dist;
    }
  }
  if (best !== undefined && bestDistance === 0) return best;
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  if (best !== undefined && bestDistance <= limit) return best;
  const prefixed = candidates.filter((c) => w.length >= 3 && c.toLowerCase().startsWith(w));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** `; did you mean "X"?` or the empty string, for the end of an error message. */
export function didYouMean(word: string, known: Iterable<string>): string {
  const match = closest(word, known);
  return match !== undefined && match !== word ? `; did you mean "${match}"?` : '';
}

/** ` (did you mean "X"?)` or the empty string, for the middle of a message. */
export function suggestion(word: string, known: Iterable<string>): string {
  const match = closest(word, known);
  return match !== undefined && match !== word ? ` (did you mean "${match}"?)` : '';
}
