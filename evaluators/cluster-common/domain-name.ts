// DomainName peers: an exact name, or `*.` followed by a suffix that matches
// one or more whole labels in front of it. DNS names are case-insensitive and
// a trailing dot only marks them fully qualified, so both sides are
// normalised before comparing.

export function normalizeDomain(name: string): string {
  let s = name.toLowerCase();
  if (s.endsWith(".")) s = s.substring(0, s.length - 1);
  return s;
}

export class DomainPattern {
  /** Normalised text after any `*.`; for a wildcard it keeps its leading dot (".example.com"). */
  private tail: string = "";
  wildcard: bool = false;

  constructor(public text: string) {
    const n = normalizeDomain(text);
    const wild = n.startsWith("*.");
    this.wildcard = wild;
    this.tail = wild ? n.substring(1) : n;
  }

  /** Whether the pattern is a usable name: not empty, no other `*`. */
  get valid(): bool {
    const t = this.wildcard ? this.tail.substring(1) : this.tail;
    return t.length > 0 && !t.includes("*") && !t.startsWith(".") && !t.includes("..");
  }

  /** `name` must already be normalised (normalizeDomain). */
  matches(name: string): bool {
    if (!this.wildcard) return name == this.tail;
    // "*.example.com" needs at least one label before ".example.com";
    // "example.com" itself does not match.
    return name.length > this.tail.length && name.endsWith(this.tail);
  }
}
