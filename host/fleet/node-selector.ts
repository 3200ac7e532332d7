// Kubernetes label selectors (matchLabels and matchExpressions with In,
// NotIn, Exists, DoesNotExist) for a Pipeline's target nodes. The policy
// evaluators match selectors inside WASM; this is the host's own, small copy
// for node labels only, where no module is involved.
import { KwpError } from '../errors.js';

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

const OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

function invalid(where: string, message: string): never {
  throw new KwpError('KWP_ERR_FLEET_OBJECT_INVALID', `${where}: ${message}`);
}

export function validateLabelSelector(value: unknown, where: string): LabelSelector {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalid(where, 'must be a label selector: {matchLabels: {...}, matchExpressions: [...]}');
  const v = value as Record<string, unknown>;
  for (const k of Object.keys(v)) if (k !== 'matchLabels' && k !== 'matchExpressions') invalid(`${where}.${k}`, 'unknown field; a label selector has matchLabels and matchExpressions');
  const out: LabelSelector = {};
  if (v.matchLabels !== undefined) {
    const m = v.matchLabels;
    if (typeof m !== 'object' || m === null || Array.isArray(m) || Object.values(m).some((x) => typeof x !== 'string')) invalid(`${where}.matchLabels`, 'must map label keys to string values');
    out.matchLabels = { ...(m as Record<string, string>) };
  }
  if (v.matchExpressions !== undefined) {
    if (!Array.isArray(v.matchExpressions)) invalid(`${where}.matchExpressions`, 'must be a list');
    out.matchExpressions = v.matchExpressions.map((e, i): LabelSelectorRequirement => {
      const at = `${where}.matchExpressions[${i}]`;
      if (typeof e !== 'object' || e === null || typeof e.key !== 'string' || !OPERATORS.has(e.operator)) invalid(at, 'needs a key and an operator In, NotIn, Exists or DoesNotExist');
      const needsValues = e.operator === 'In' || e.operator === 'NotIn';
      if (needsValues && (!Array.isArray(e.values) || e.values.length === 0 || e.values.some((x: unknown) => typeof x !== 'string'))) invalid(`${at}.values`, `${e.operator} needs a non-empty list of strings`);
      if (!needsValues && e.values !== undefined && e.values.length) invalid(`${at}.values`, `${e.operator} takes no values`);
      return needsValues ? { key: e.key, operator: e.operator, values: [...e.values] } : { key: e.key, operator: e.operator };
    });
  }
  return out;
}

/** True when `labels` satisfy every part of the selector; an empty selector matches everything. */
export function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    switch (e.operator) {
      case 'In': if (!has || !e.values!.includes(labels[e.key])) return false; break;
      case 'NotIn': if (has && e.values!.includes(labels[e.key])) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
    }
  }
  return true;
}
