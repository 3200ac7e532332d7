// Ordering module versions so `resolve("name")` picks the newest: dotted
// numbers compare numerically (1.10.0 > 1.9.0), a pre-release sorts before its
// release (1.0.0-rc.1 < 1.0.0), anything else falls back to text order.
export function compareVersions(a: string, b: string): number {
  const [coreA, preA] = splitPre(a);
  const [coreB, preB] = splitPre(b);
  const c = compareDotted(coreA, coreB);
  if (c !== 0) return c;
  if (preA === undefined && preB === undefined) return 0;
  if (preA === undefined) return 1;
  if (preB === undefined) return -1;
  return compareDotted(preA, preB);
}

function splitPre(v: string): [string, string | undefined] {
  const core = v.split('+')[0];
  const dash = core.indexOf('-');
  return dash < 0 ? [core, undefined] : [core.slice(0, dash), core.slice(dash + 1)];
}

function compareDotted(a: string, b: string): number {
  const pa = a.split('.');
  const pb = b.split('.');
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const nx = /^\d+$/.test(x) ? Number(x) : NaN;
    const ny = /^\d+$/.test(y) ? Number(y) : NaN;
    if (!Number.isNaN(nx) && !Number.isNaN(ny)) {
      if (nx !== ny) return nx < ny ? -1 : 1;
    } else if (x !== y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}
