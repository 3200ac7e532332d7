// Label and field selectors as the emulator understands them: the
// equality-based forms (`a=b`, `a==b`, `a!=b`), label existence (`a`, `!a`)
// and the set forms `a in (x,y)` / `a notin (x,y)`. Enough for clients that
// narrow a list or watch; anything else is rejected so a test notices.

import type { KubeObject } from '../../host/contract.js';

export type ObjectPredicate = (o: KubeObject) => boolean;

/** Splits on commas that are not inside parentheses. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  if (cur.trim()) out.push(cur.trim());
  return out.filter(Boolean);
}

function labelTerm(term: string): (labels: Record<string, string>) => boolean {
  let m: RegExpExecArray | null;
  if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term))) {
    const [, key, op, list] = m;
    const values = list.split(',').map((v) => v.trim());
    return op === 'in' ? (l) => key in l && values.includes(l[key]) : (l) => !(key in l) || !values.includes(l[key]);
  }
  if ((m = /^([\w./-]+)\s*(!=|==|=)\s*([\w./-]*)$/.exec(term))) {
    const [, key, op, value] = m;
    return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
  }
  if ((m = /^(!?)([\w./-]+)$/.exec(term))) {
    const [, not, key] = m;
    return not ? (l) => !(key in l) : (l) => key in l;
  }
  throw new Error(`unsupported label selector term "${term}"`);
}

export function parseLabelSelector(selector: string | undefined): ObjectPredicate {
  if (!selector) return () => true;
  const checks = terms(selector).map(labelTerm);
  return (o) => checks.every((c) => c(o.metadata.labels ?? {}));
}

function fieldValue(o: KubeObject, path: string): string {
  let cur: unknown = o;
  for (const part of path.split('.')) cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[part] : undefined;
  return cur === undefined || cur === null ? '' : String(cur);
}

export function parseFieldSelector(selector: string | undefined): ObjectPredicate {
  if (!selector) return () => true;
  const checks = terms(selector).map((term) => {
    const m = /^([\w.]+)\s*(!=|==|=)\s*(.*)$/.exec(term);
    if (!m) throw new Error(`unsupported field selector term "${term}"`);
    const [, path, op, value] = m;
    return op === '!=' ? (o: KubeObject) => fieldValue(o, path) !== value : (o: KubeObject) => fieldValue(o, path) === value;
  });
  return (o) => checks.every((c) => c(o));
}
