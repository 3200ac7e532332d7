// Ajv's errors as a user reads them: the field path as written in YAML
// (spec.ingress[0].ports[0].port), what is wrong, and what to write instead.
import type { ErrorObject } from 'ajv';
import { didYouMean } from '../suggest.js';
import { FORMAT_HINTS } from './formats.js';

/** `/spec/ingress/0/from` → `spec.ingress[0].from`; keys that are not identifiers are quoted. */
export function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) parts.push(extra);
  let out = '';
  for (const part of parts) {
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return `${typeof value === 'number' ? 'the number' : 'the boolean'} ${String(value)}`;
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string', integer: 'a whole number', number: 'a number', boolean: 'true or false', object: 'a mapping', array: 'a list', null: 'null',
};

function typeWords(type: string | string[]): string {
  return (Array.isArray(type) ? type : [type]).map((t) => TYPE_WORDS[t] ?? t).join(' or ');
}

/** Hints for a missing field, where Kubernetes users commonly leave one out. */
const REQUIRED_HINTS: Record<string, string> = {
  podSelector: 'write "podSelector: {}" to select every pod in the namespace',
  subject: 'write "subject: { namespaces: {} }" to select every pod',
  priority: 'write a priority 0-1000 (lower is evaluated first)',
  tier: 'write "tier: Admin" or "tier: Baseline"',
  action: 'write the rule\'s action',
  from: 'list at least one peer, e.g. "from: [{ namespaces: {} }]"',
  to: 'list at least one peer, e.g. "to: [{ namespaces: {} }]"',
};

function range(schema: Record<string, unknown> | undefined): string | undefined {
  if (!schema) return undefined;
  const min = schema.minimum ?? schema.exclusiveMinimum;
  const max = schema.maximum ?? schema.exclusiveMaximum;
  return typeof min === 'number' && typeof max === 'number' ? `${min}-${max}` : undefined;
}

/** One line per problem, without the "file: document N" prefix; undefined for errors another one explains. */
export function explainError(e: ErrorObject): string | undefined {
  const parent = e.parentSchema as Record<string, any> | undefined;
  const at = fieldPath(e.instancePath);
  const where = at || '(the object)';
  switch (e.keyword) {
    case 'if':
    case 'anyOf':
    case 'allOf':
      return undefined; // the failing branch reports the actual problem
    case 'additionalProperties': {
      const field = (e.params as { additionalProperty: string }).additionalProperty;
      const known = Object.keys(parent?.properties ?? {});
      const hint = didYouMean(field, known);
      return `${fieldPath(e.instancePath, field)}: unknown field "${field}"${hint || (known.length ? `; the fields here are ${known.join(', ')}` : '; remove it')}`;
    }
    case 'required': {
      const field = (e.params as { missingProperty: string }).missingProperty;
      const hint = REQUIRED_HINTS[field];
      return `${fieldPath(e.instancePath, field)}: required field missing${hint ? `; ${hint}` : ''}`;
    }
    case 'type':
      return `${where}: must be ${typeWords((e.params as { type: string | string[] }).type)}, not ${describe(e.data)}`;
    case 'enum': {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues.map(String);
      return `${where}: ${JSON.stringify(e.data)} is not one of ${allowed.join(', ')}${typeof e.data === 'string' ? didYouMean(e.data, allowed) : ''}`;
    }
    case 'const':
      return `${where}: must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}, not ${JSON.stringify(e.data)}`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum': {
      const limit = (e.params as { limit: number }).limit;
      if (e.schema !== null && typeof e.schema === 'object') {
        // A $data limit: the other end of a range.
        return `${where}: ${String(e.data)} must be ${e.keyword.startsWith('exclusive') ? 'greater than' : 'at least'} the start of the range (${limit})`;
      }
      const r = range(parent);
      const bound = { minimum: 'at least', maximum: 'at most', exclusiveMinimum: 'greater than', exclusiveMaximum: 'less than' }[e.keyword];
      return `${where}: ${String(e.data)} is out of range; write ${r ? `a value ${r}` : `a value ${bound} ${limit}`}`;
    }
    case 'format': {
      const format = (e.params as { format: string }).format;
      const name = (e.params as { propertyName?: string }).propertyName;
      const shown = name ?? e.data;
      return `${where}${name !== undefined ? ` key ${JSON.stringify(name)}` : ''}: ${JSON.stringify(shown)} is not a valid ${format}; ${FORMAT_HINTS[format] ?? 'fix the value'}`;
    }
    case 'propertyNames':
      return undefined; // reported by its format error
    case 'maxLength':
      return `${where}: ${JSON.stringify(e.data)} is ${String((e.data as string).length)} characters long; at most ${(e.params as { limit: number }).limit} are allowed`;
    case 'minLength':
      return `${where}: must not be empty`;
    case 'maxItems':
      if ((e.params as { limit: number }).limit === 0) return `${where}: must be empty: operators Exists and DoesNotExist take no values`;
      return `${where}: has ${(e.data as unknown[]).length} entries; at most ${(e.params as { limit: number }).limit} are allowed, split it into more rules or policies`;
    case 'minItems':
      return `${where}: must list at least ${(e.params as { limit: number }).limit} ${(e.params as { limit: number }).limit === 1 ? 'entry' : 'entries'}`;
    case 'uniqueItems':
      return `${where}: entries ${(e.params as { j: number }).j} and ${(e.params as { i: number }).i} are the same; list each value once`;
    case 'minProperties':
    case 'maxProperties': {
      const fields = Object.keys(parent?.properties ?? {});
      const set = Object.keys((e.data as object) ?? {});
      if (parent?.maxProperties === 1 && parent?.minProperties === 1) {
        return `${where}: set exactly one of ${fields.join(', ')}${set.length ? ` (found ${set.join(', ')})` : ' (found none)'}`;
      }
      if (e.keyword === 'maxProperties' && set.includes('ipBlock')) {
        return `${where}: ipBlock cannot be combined with ${set.filter((s) => s !== 'ipBlock').join(', ')}; write them as separate peers`;
      }
      return `${where}: set at least one of ${fields.join(', ')}`;
    }
    case 'dependencies': {
      const p = e.params as { property: string; missingProperty: string };
      return `${fieldPath(e.instancePath, p.property)}: needs ${p.missingProperty} to be set too`;
    }
    case 'pattern':
      return `${where}: ${JSON.stringify(e.data)} is not valid here${parent?.pattern?.includes('\\*\\.') ? '; write a domain name such as example.com or *.example.com' : ` (it must match ${String(parent?.pattern)})`}`;
    default:
      return `${where}: ${e.message ?? 'is not valid'}`;
  }
}

/** The problems of one object, most specific first, without duplicates. */
export function explainErrors(errors: ErrorObject[]): string[] {
  const lines: string[] = [];
  // An unknown field first: it usually explains the required field that is then missing.
  const ordered = [...errors].sort((a, b) => Number(b.keyword === 'additionalProperties') - Number(a.keyword === 'additionalProperties'));
  for (const e of ordered) {
    const line = explainError(e);
    if (line !== undefined && !lines.includes(line)) lines.push(line);
  }
  return lines;
}
