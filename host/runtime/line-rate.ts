// A per-second budget of log lines that says what it dropped: a module's
// kwp.log lines and a stage's failure-policy error line both go through one,
// so a flood costs at most `perSecond` lines a second, and the next line let
// through says how many were suppressed since the last.
export class LineRate {
  private tokens: number;
  private refillAt = 0;
  /** Lines dropped since the last one let through. */
  private pending = 0;
  /** Lines dropped in all. */
  dropped = 0;

  constructor(private readonly perSecond: number, private readonly now: () => number = Date.now) {
    this.tokens = perSecond;
  }

  /** undefined when the line must be dropped; otherwise a note to append ('' when nothing was dropped). */
  take(): string | undefined {
    const t = this.now();
    if (t >= this.refillAt) {
      this.tokens = this.perSecond;
      this.refillAt = t + 1000;
    }
    if (this.tokens <= 0) {
      this.pending++;
      this.dropped++;
      return undefined;
    }
    this.tokens--;
    const n = this.pending;
    this.pending = 0;
    return n === 0 ? '' : ` (${n} similar line${n === 1 ? '' : 's'} suppressed)`;
  }
}

/** `text` cut to at most `max` characters, saying how much was cut. */
export function capText(text: string, max: number, unit = 'characters'): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more ${unit} cut)`;
}
