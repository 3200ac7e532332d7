// Counts of verdicts per deciding policy and rule, for the metric
// kwp_policy_verdicts_total{stage,policy,rule,direction,verdict}. Policies and
// rules are user data, so the number of label sets is capped (docs/flows.md,
// "Metrics"): past the cap, new label sets count into one series whose
// policy and rule are `other`, and `droppedLabelSets` says how many distinct
// ones were folded in.

export interface PolicyVerdictLabels { stage: string; policy: string; rule: string; direction: 'egress' | 'ingress'; verdict: string }

/** Label sets kept apart before new ones fold into `other`. */
export const DEFAULT_POLICY_VERDICT_SERIES = 1000;

export class PolicyVerdictCounts {
  private readonly series = new Map<string, { labels: PolicyVerdictLabels; count: number }>();
  private readonly folded = new Set<string>();
  /** Distinct label sets counted into `other` because the cap was reached (at most 100,000 remembered). */
  droppedLabelSets = 0;

  constructor(readonly maxSeries = DEFAULT_POLICY_VERDICT_SERIES) {}

  add(labels: PolicyVerdictLabels, n = 1): void {
    const key = `${labels.stage}\u0000${labels.policy}\u0000${labels.rule}\u0000${labels.direction}\u0000${labels.verdict}`;
    const known = this.series.get(key);
    if (known) { known.count += n; return; }
    if (this.series.size < this.maxSeries) {
      this.series.set(key, { labels: { ...labels }, count: n });
      return;
    }
    if (!this.folded.has(key) && this.folded.size < 100_000) {
      this.folded.add(key);
      this.droppedLabelSets++;
    }
    const other = { stage: labels.stage, policy: 'other', rule: 'other', direction: labels.direction, verdict: labels.verdict };
    const otherKey = `${other.stage}\u0000other\u0000other\u0000${other.direction}\u0000${other.verdict}`;
    const o = this.series.get(otherKey);
    // The `other` series are the only ones allowed past the cap (one per stage, direction and verdict).
    if (o) o.count += n;
    else this.series.set(otherKey, { labels: other, count: n });
  }

  entries(): Array<{ labels: PolicyVerdictLabels; count: number }> {
    return [...this.series.values()];
  }
}
