// Expected reachability between pods, in the style of the upstream netpol e2e
// suite: start from "everything allowed" (or denied) and carve out peers, or
// write the grid out with `.` for allowed and `X` for denied (rows are
// sources, columns destinations). A pod talking to itself never leaves its
// network namespace, so the diagonal is not evaluated and renders as `-`.

/** `x/a` names one pod; `{ ns: 'x' }` every pod of x; `{ pod: 'a' }` pod a of every namespace; `{}` all pods. */
export type PodMatch = string | { ns?: string; pod?: string };

function matches(m: PodMatch, key: string): boolean {
  if (typeof m === 'string') return m === key;
  const [ns, pod] = key.split('/');
  return (m.ns === undefined || m.ns === ns) && (m.pod === undefined || m.pod === pod);
}

export class Reachability {
  private readonly allowed = new Map<string, boolean>();

  constructor(readonly pods: string[], defaultAllowed: boolean) {
    for (const s of pods) for (const d of pods) if (s !== d) this.allowed.set(`${s}>${d}`, defaultAllowed);
  }

  expect(from: PodMatch, to: PodMatch, allowed: boolean): this {
    for (const s of this.pods) for (const d of this.pods) {
      if (s !== d && matches(from, s) && matches(to, d)) this.allowed.set(`${s}>${d}`, allowed);
    }
    return this;
  }

  /** Everything towards `to`. */
  expectIngress(to: PodMatch, allowed: boolean): this { return this.expect({}, to, allowed); }
  /** Everything from `from`. */
  expectEgress(from: PodMatch, allowed: boolean): this { return this.expect(from, {}, allowed); }

  set(src: string, dst: string, allowed: boolean): void { this.allowed.set(`${src}>${dst}`, allowed); }
  get(src: string, dst: string): boolean | undefined { return this.allowed.get(`${src}>${dst}`); }

  /** The ordered (src, dst) pairs a probe has to try. */
  pairs(): [string, string][] {
    const out: [string, string][] = [];
    for (const s of this.pods) for (const d of this.pods) if (s !== d) out.push([s, d]);
    return out;
  }

  render(): string {
    const width = Math.max(...this.pods.map((p) => p.length));
    const pad = (s: string) => s.padEnd(width);
    const lines = [`${pad('')} ${this.pods.map(pad).join(' ')}`];
    for (const s of this.pods) {
      const cells = this.pods.map((d) => pad(s === d ? '-' : this.get(s, d) ? '.' : 'X'));
      lines.push(`${pad(s)} ${cells.join(' ')}`);
    }
    return lines.map((l) => l.trimEnd()).join('\n');
  }

  /** Parses a grid: a header of destination pods, then one row per source pod of `.`, `X` or `-`. */
  static fromGrid(text: string): Reachability {
    const rows = text.split('\n').map((l) => l.trim()).filter((l) => l.length > 0).map((l) => l.split(/\s+/));
    const header = rows[0];
    const r = new Reachability(header, false);
    for (const row of rows.slice(1)) {
      const [src, ...cells] = row;
      if (cells.length !== header.length) throw new Error(`truth table row ${src} has ${cells.length} cells for ${header.length} columns`);
      cells.forEach((c, i) => {
        if (c === '-' || src === header[i]) return;
        if (c !== '.' && c !== 'X') throw new Error(`truth table cell ${src} -> ${header[i]} is "${c}"; use "." (allowed) or "X" (denied)`);
        r.set(src, header[i], c === '.');
      });
    }
    return r;
  }
}
