// sdk/ABI.md is the contract; host/abi/ is the host's half of it and the SDK
// (sdk/exports.ts, sdk/decision.ts, sdk/log.ts) the module's half. This test
// reads the document's tables (the version, the imports, the exports, the
// object ops, the decision record's offsets, flags and verdicts, the PodInfo
// layout) and holds both halves to them, so a change made on one side only
// fails here. It also checks that every repository path the document names
// exists.
import { describe, it, expect } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as version from '../host/abi/version.js';
import { IMPORT_ALLOWLIST } from '../host/abi/imports.js';
import { OPTIONAL_FUNCTIONS, REQUIRED_FUNCTIONS } from '../host/abi/exports.js';
import { ObjectOp } from '../host/abi/objects.js';
import * as record from '../host/abi/record.js';
import { Verdict } from '../host/abi/verdict.js';
import { encodePodInfo } from '../host/abi/podinfo-codec.js';
import { ATTRIBUTION_FIELDS } from '../host/abi/attribution.js';
import type { PodInfo } from '../host/contract.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const abiDoc = read('sdk/ABI.md');
const sdkExports = read('sdk/exports.ts');
const sdkDecision = read('sdk/decision.ts');

/** The part of the document under the heading that starts with `title`, up to the next heading of that level or higher. */
function section(doc: string, title: string): string {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => /^#+ /.test(l) && l.replace(/^#+ /, '').startsWith(title));
  if (start < 0) throw new Error(`sdk/ABI.md has no section "${title}"`);
  const level = lines[start].match(/^#+/)![0].length;
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.match(/^#+/)![0].length <= level);
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

/** The rows of the first Markdown table in `text`, as cells (header and separator dropped). */
function tableRows(text: string): string[][] {
  const lines = text.split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  const rows = first < 0 ? [] : lines.slice(first, end < 0 ? undefined : end);
  if (rows.length < 2) throw new Error(`no table in:\n${text.slice(0, 200)}`);
  return rows.slice(2).map((r) => r.slice(1, -1).split(' | ').map((c) => c.trim()));
}

const code = (cell: string) => cell.replace(/^`|`$/g, '');

/** `(a: i32, b: i32) -> nil` as parameter and result type lists. */
function signature(text: string): { params: string[]; results: string[] } {
  const m = code(text).match(/^\((.*)\) -> (\w+)$/);
  if (!m) throw new Error(`not a signature: ${text}`);
  const params = m[1].trim() === '' ? [] : m[1].split(',').map((p) => p.split(':')[1].trim());
  return { params, results: m[2] === 'nil' ? [] : [m[2]] };
}

const VALUE_TYPE_NAMES: Record<number, string> = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64' };

/** AssemblyScript parameter types as the wasm types they compile to (wasm32). */
function wasmType(asType: string): string {
  const t = asType.trim();
  if (['i32', 'u32', 'usize', 'isize', 'i8', 'u8', 'i16', 'u16', 'bool'].includes(t)) return 'i32';
  if (['i64', 'u64'].includes(t)) return 'i64';
  if (t === 'f32' || t === 'f64') return t;
  throw new Error(`no wasm type for AssemblyScript type ${t}`);
}

function asSignature(params: string, result: string): { params: string[]; results: string[] } {
  return {
    params: params.trim() === '' ? [] : params.split(',').map((p) => wasmType(p.split(':')[1])),
    results: result.trim() === 'void' ? [] : [wasmType(result)],
  };
}

/** `export function kwp_x(...): T` in sdk/exports.ts, by name. */
function sdkExportedFunctions(): Map<string, { params: string[]; results: string[] }> {
  const out = new Map<string, { params: string[]; results: string[] }>();
  for (const m of sdkExports.matchAll(/^export function (kwp_\w+)\(([^)]*)\):\s*(\w+)/gm)) out.set(m[1], asSignature(m[2], m[3]));
  return out;
}

/** `export const NAME: type = value;` in an SDK source, by name. */
function sdkConstants(source: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of source.matchAll(/^(?:export )?const (\w+): \w+ = (0x[0-9a-fA-F]+|\d+);/gm)) out.set(m[1], Number(m[2]));
  return out;
}

describe('sdk/ABI.md names only files that exist', () => {
  /** Backquoted repository paths: a first segment that is a top-level folder, or a file name with an extension. */
  function namedPaths(doc: string): string[] {
    const folders = ['host', 'sdk', 'evaluators', 'test', 'docs', 'deploy', 'examples', 'scripts', 'bench'];
    return [...doc.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]).filter((p) =>
      !p.startsWith('kube-wasm-policies/') && p.includes('/') && (folders.includes(p.split('/')[0]) || /\.(ts|mjs|md|json)$/.test(p)));
  }

  it('counts a path that is missing as missing', () => {
    expect(namedPaths('the `host/abi.ts` mirror and `sdk/abi.ts`, kinds `v1/Namespace`').filter((p) => !existsSync(join(root, p)))).toEqual(['host/abi.ts', 'sdk/abi.ts']);
  });

  it('every path it names is in the repository', () => {
    const paths = namedPaths(abiDoc);
    expect(paths.length).toBeGreaterThan(5);
    expect(paths.filter((p) => !existsSync(join(root, p)))).toEqual([]);
  });
});

describe('the ABI tables agree with host/abi/ and the SDK', () => {
  it('the version: title, encoded value, table of versions, host and SDK', () => {
    const title = abiDoc.match(/^# .*version (\d+)\.(\d+)$/m)!;
    const [major, minor] = [Number(title[1]), Number(title[2])];
    expect({ major: version.ABI_MAJOR, minor: version.ABI_MINOR }).toEqual({ major, minor });
    const encoded = abiDoc.match(new RegExp(`Version ${major}\\.${minor} is \`(0x[0-9a-f]+)\``))!;
    expect(version.abiVersionWord(major, minor)).toBe(Number(encoded[1]));
    const versions = tableRows(section(abiDoc, 'Versioning')).map((r) => r[0]);
    expect(versions.at(-1)).toBe(`${major}.${minor}`);
    expect(sdkConstants(sdkExports).get(version.ABI_VERSION_GLOBAL)).toBe(Number(encoded[1]));
  });

  it('the imports: the host allowlist and the SDK declarations', () => {
    const rows = tableRows(section(abiDoc, 'Imports'));
    const doc = rows.map(([name, sig]) => {
      const [module, field] = code(name).split('.');
      return sig === 'memory' ? { module, name: field, kind: 'memory' } : { module, name: field, kind: 'function', type: signature(sig) };
    });
    const host = IMPORT_ALLOWLIST.map((a) => ({
      module: a.module, name: a.name, kind: a.kind,
      ...(a.type ? { type: { params: a.type.params.map((t) => VALUE_TYPE_NAMES[t]), results: a.type.results.map((t) => VALUE_TYPE_NAMES[t]) } } : {}),
    }));
    expect(host).toEqual(doc);
    // The SDK's own @external declarations (env.abort and env.memory come from AssemblyScript itself).
    const sdk = read('sdk/log.ts');
    const declared = [...sdk.matchAll(/@external\("(\w+)", "(\w+)"\)\s*declare function \w+\(([^)]*)\):\s*(\w+)/g)];
    expect(declared.length).toBeGreaterThan(0);
    for (const [, module, name, params, result] of declared) {
      const row = doc.find((d) => d.module === module && d.name === name);
      expect(row, `${module}.${name}`).toBeDefined();
      expect(asSignature(params, result), `${module}.${name}`).toEqual(row!.type);
    }
  });

  it('the exports: required and optional names on the host, signatures in the SDK', () => {
    const rows = tableRows(section(abiDoc, 'Exports'));
    const functions = rows.filter((r) => r[1] !== 'global i32');
    const optional = functions.filter((r) => r[2].startsWith('optional'));
    const required = functions.filter((r) => !r[2].startsWith('optional'));
    expect(rows.filter((r) => r[1] === 'global i32').map((r) => code(r[0]))).toEqual([version.ABI_VERSION_GLOBAL]);
    expect([...REQUIRED_FUNCTIONS].sort()).toEqual(required.map((r) => code(r[0])).sort());
    expect(OPTIONAL_FUNCTIONS.map((f) => `${f.name} (${f.since.major}.${f.since.minor})`).sort())
      .toEqual(optional.map((r) => `${code(r[0])} (${r[2].match(/^optional \((\d+\.\d+)\)/)![1]})`).sort());
    const sdk = sdkExportedFunctions();
    for (const [name, sig] of functions) {
      expect(sdk.get(code(name)), `sdk/exports.ts ${code(name)}`).toEqual(signature(sig));
    }
    expect([...sdk.keys()].sort()).toEqual(functions.map((r) => code(r[0])).sort());
  });

  it('the object ops: host ObjectOp and the SDK constants', () => {
    const rows = tableRows(section(abiDoc, 'Object delivery'));
    const doc = Object.fromEntries(rows.map(([op, name]) => [code(name), Number(op)]));
    const host = Object.fromEntries(Object.entries(ObjectOp).map(([k, v]) => [k.toUpperCase(), v]));
    expect(host).toEqual(doc);
    const sdk = sdkConstants(sdkExports);
    expect(Object.fromEntries([...sdk].filter(([k]) => k.startsWith('OP_')).map(([k, v]) => [k.slice(3), v]))).toEqual(doc);
  });

  describe('the decision record', () => {
    const heading = abiDoc.match(/^## The decision record \((\d+) bytes\)$/m)!;
    const rows = tableRows(section(abiDoc, 'The decision record'));
    const SIZES: Record<string, number> = { u8: 1, u16: 2, u32: 4 };
    const size = (t: string) => SIZES[t] ?? Number(t.match(/^u8\[(\d+)\]$/)![1]);
    /** The document's field names, as the constants name them (OFF_<name>). */
    const FIELDS: Record<string, string> = {
      direction: 'DIRECTION', family: 'FAMILY', protocol: 'PROTOCOL', flags: 'FLAGS',
      'source port': 'SRC_PORT', 'destination port': 'DST_PORT', 'ICMP type': 'ICMP_TYPE', 'ICMP code': 'ICMP_CODE',
      'source PodInfo id': 'SRC_POD', 'destination PodInfo id': 'DST_POD', 'source address': 'SRC_ADDR', 'destination address': 'DST_ADDR',
      verdict: 'VERDICT', 'reason code': 'REASON', 'rule code': 'RULE',
    };
    const fields = rows.map(([offset, type, text]) => ({ offset: Number(offset), size: size(type), field: text.replace('**result** ', '').split(/[:(,]/)[0].trim(), text }));
    const named = fields.filter((f) => f.field !== 'reserved');
    const docOffsets = Object.fromEntries(named.map((f) => {
      const name = FIELDS[f.field];
      if (!name) throw new Error(`sdk/ABI.md's decision record has a field "${f.field}" this test does not know; add it to FIELDS`);
      return [name, f.offset];
    }));

    it('its fields tile the record without gaps or overlaps', () => {
      let at = 0;
      for (const f of fields) {
        expect(f.offset, f.text).toBe(at);
        at += f.size;
      }
      expect(at).toBe(Number(heading[1]));
    });

    it('host/abi/record.ts has the same size and offsets', () => {
      expect(record.RECORD_SIZE).toBe(Number(heading[1]));
      const host = Object.fromEntries(Object.entries(record).filter(([k]) => k.startsWith('OFF_')).map(([k, v]) => [k.slice(4), v]));
      expect(host).toEqual(docOffsets);
    });

    it('sdk/decision.ts has the same size and offsets', () => {
      const sdk = sdkConstants(sdkDecision);
      expect(sdk.get('RECORD_SIZE')).toBe(Number(heading[1]));
      expect(Object.fromEntries([...sdk].filter(([k]) => k.startsWith('OFF_')).map(([k, v]) => [k.slice(4), v]))).toEqual(docOffsets);
    });

    it('the verdict values and the flag bits are the same on both sides', () => {
      const verdictRow = named.find((f) => f.field === 'verdict')!;
      const doc = Object.fromEntries([...verdictRow.text.matchAll(/(\d+) (Next|Accept|Deny|Pass)/g)].map((m) => [m[2], Number(m[1])]));
      expect({ ...Verdict }).toEqual(doc);
      const sdkEnum = sdkDecision.match(/export enum Verdict \{([^}]*)\}/)![1];
      expect(Object.fromEntries([...sdkEnum.matchAll(/(\w+) = (\d+)/g)].map((m) => [m[1], Number(m[2])]))).toEqual(doc);
      const flagsRow = named.find((f) => f.field === 'flags')!;
      // "bit 0 **Service hairpin**" is RecordFlag.ServiceHairpin.
      const bits = [...flagsRow.text.matchAll(/bit (\d+) \*\*([^*]+)\*\*/g)].map((m) => ({ name: m[2].replace(/\s+/g, '').toLowerCase(), value: 1 << Number(m[1]) }));
      expect(bits.length).toBeGreaterThan(0);
      expect(Object.entries(record.RecordFlag).map(([name, value]) => ({ name: name.toLowerCase(), value }))).toEqual(bits);
      const sdkFlags = [...sdkConstants(sdkDecision)].filter(([k]) => k.startsWith('FLAG_')).map(([, v]) => v);
      expect(sdkFlags).toEqual(bits.map((b) => b.value));
    });
  });

  it('the attribution object: the host parser and the SDK writer use the fields the document lists', () => {
    const doc = tableRows(section(abiDoc, 'Attribution')).map((r) => code(r[0]));
    expect([...ATTRIBUTION_FIELDS]).toEqual(doc);
    const toJSON = read('sdk/attribution.ts').match(/toJSON\(\): string \{([\s\S]*?)\n  \}/)![1];
    expect([...toJSON.matchAll(/\\"(\w+)\\":/g)].map((m) => m[1])).toEqual(doc);
    // The rule code is read only from modules that declare the minor version that added it.
    const added = tableRows(section(abiDoc, 'Versioning')).find((r) => r[1].includes('rule code'))!;
    expect(added[0]).toBe(`1.${version.ATTRIBUTION_MINOR}`);
  });

  it('the host PodInfo codec writes the layout the document gives', () => {
    const layout = abiDoc.split('## The PodInfo record')[1].split('```')[1].trim().split('\n');
    const pod: PodInfo = {
      id: 0x01020304, name: 'web-1', namespace: 'shop', nodeName: 'node-a', clusterId: 'east',
      podLabels: { app: 'web', tier: 'front' }, namespaceLabels: { team: 'shop' }, nodeLabels: { zone: 'z1' },
      containerPorts: [{ name: 'http', port: 8080, protocol: 6 }, { name: '', port: 53, protocol: 17 }],
      hostNetwork: true, ips: ['10.1.2.3', 'fd00::7'],
    };
    const bytes = encodePodInfo(pod);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let p = 0;
    const readType = (t: string): unknown => {
      const array = t.match(/^u8\[(\d+)\]$/);
      if (array) { const v = [...bytes.subarray(p, p + Number(array[1]))]; p += Number(array[1]); return v; }
      if (t === 'u8') return view.getUint8(p++);
      if (t === 'u16') { const v = view.getUint16(p, true); p += 2; return v; }
      if (t === 'u32') { const v = view.getUint32(p, true); p += 4; return v; }
      if (t === 'str') { const n = view.getUint16(p, true); const v = new TextDecoder().decode(bytes.subarray(p + 2, p + 2 + n)); p += 2 + n; return v; }
      throw new Error(`PodInfo layout: unknown type ${t}`);
    };
    const decoded: Record<string, unknown> = {};
    for (const line of layout) {
      const m = line.match(/^(\w+)\s+(\w+)(\[(\d+)\])?\s*(.*)$/)!;
      const [, type, name, , count, rest] = m;
      if (count) { for (let i = 0; i < Number(count); i++) readType(type); continue; }
      const value = readType(type);
      // Notes in parentheses ("(4|6)", "(IPv4 in ...)") go; an item list in parentheses "(str key, str value)" stays.
      const many = rest.replace(/\s*\((?!str )[^)]*\)/g, '').match(/then that many:? \(?(.*?)\)?$/);
      if (!many) { decoded[name] = value; continue; }
      const items = many[1].split(',').map((s) => s.trim().split(/\s+/));
      decoded[name] = Array.from({ length: value as number }, () => items.map(([t]) => readType(t)));
    }
    expect(p).toBe(bytes.length);
    expect(decoded).toEqual({
      id: pod.id, flags: 1, name: 'web-1', namespace: 'shop', nodeName: 'node-a', clusterId: 'east',
      podLabelCount: [['app', 'web'], ['tier', 'front']], nsLabelCount: [['team', 'shop']], nodeLabelCount: [['zone', 'z1']],
      portCount: [['http', 8080, 6, 0], ['', 53, 17, 0]],
      ipCount: [[4, [10, 1, 2, 3, ...new Array(12).fill(0)]], [6, [0xfd, 0, ...new Array(13).fill(0), 7]]],
    });
  });
});

describe('host/abi/ is the only home of the host half', () => {
  /** Definitions of record offsets, the record size or an ABI table, and bare record arithmetic. */
  const ABI_DEFINITION = /\b(OFF_[A-Z_]+|RECORD_SIZE|ABI_MAJOR|ABI_MINOR|IMPORT_ALLOWLIST|REQUIRED_FUNCTIONS)\s*(:[^=]+)?=[^=>]|\*\s*64\s*\+\s*\d|ObjectOp\s*=/;

  function hostSources(dir: string): string[] {
    return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) return path === 'host/abi' || path === 'host/sdk-template' ? [] : hostSources(path);
      return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
    });
  }

  it('recognises a definition outside it', () => {
    expect(ABI_DEFINITION.test('export const OFF_VERDICT = 52;')).toBe(true);
    expect(ABI_DEFINITION.test('records[i * 64 + 52] = v;')).toBe(true);
    expect(ABI_DEFINITION.test('const x = RECORD_SIZE * 2;')).toBe(false);
  });

  it('no other host file defines a record offset or an ABI table', () => {
    const offenders = hostSources('host').flatMap((file) => read(file).split('\n')
      .map((line, i) => ({ file, line: i + 1, text: line.trim() }))
      .filter((l) => !l.text.startsWith('//') && !l.text.startsWith('*') && ABI_DEFINITION.test(l.text)));
    expect(offenders).toEqual([]);
  });
});
