// The pipeline as data: what a YAML pipeline file, the admin API's PUT body
// and `kwp pipeline set` all describe. Parsing is strict and every problem
// names the field at fault.
import { readFileSync } from 'node:fs';
import { parse as parseYAML } from 'yaml';
import { KwpError } from '../errors.js';
import type { FailurePolicy, StageMode } from '../contract.js';

export interface StageSpec {
  /** Unique within the pipeline; used in metrics, traces and the admin API. */
  name: string;
  /** Short tag for walkthroughs, e.g. `CNP:Admin`; defaults to the name. */
  label?: string;
  /** A module: a built-in name (`network-policy`) or a stored `name@version`. */
  module: string;
  config?: Record<string, unknown>;
  mode?: StageMode;
  /** Overrides the module's own default. */
  failurePolicy?: FailurePolicy;
}

export interface PipelineSpec {
  stages: StageSpec[];
}

const STAGE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const MODULE_REF = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(@[A-Za-z0-9.+_-]+)?$/;
const STAGE_KEYS = new Set(['name', 'label', 'module', 'config', 'mode', 'failurePolicy']);

/** The default pipeline of kube-network-policies' order, with the v1alpha1 generation between the tiers. */
export function defaultPipeline(options: { verbose?: boolean } = {}): PipelineSpec {
  const stages: StageSpec[] = [];
  if (options.verbose) stages.push({ name: 'logging', label: 'LOG', module: 'logging' });
  stages.push(
    { name: 'cnp-admin', label: 'CNP:Admin', module: 'cluster-network-policy', config: { tier: 'Admin' } },
    { name: 'anp', label: 'ANP', module: 'admin-network-policy', config: { tier: 'Admin' } },
    { name: 'np', label: 'NP', module: 'network-policy' },
    { name: 'banp', label: 'BANP', module: 'admin-network-policy', config: { tier: 'Baseline' } },
    { name: 'cnp-baseline', label: 'CNP:Baseline', module: 'cluster-network-policy', config: { tier: 'Baseline' } },
  );
  return { stages };
}

function fail(where: string, message: string): never {
  throw new KwpError('KWP_ERR_PIPELINE_INVALID', `${where}: ${message}`);
}

/** Validates an already-parsed value (JSON body or YAML document). `where` names the file or request. */
export function validatePipelineSpec(value: unknown, where: string): PipelineSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(where, 'a pipeline must be an object with a "stages" list');
  const v = value as Record<string, unknown>;
  if (v.kind !== undefined && v.kind !== 'Pipeline') fail(where, `kind must be "Pipeline", got ${JSON.stringify(v.kind)}`);
  if (!Array.isArray(v.stages)) fail(where, '"stages" must be a list of stages');
  const names = new Set<string>();
  const stages = v.stages.map((raw, i): StageSpec => {
    const at = `${where}: stages[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail(at, 'a stage must be an object');
    const s = raw as Record<string, unknown>;
    for (const key of Object.keys(s)) if (!STAGE_KEYS.has(key)) fail(at, `unknown field "${key}"; a stage has ${[...STAGE_KEYS].join(', ')}`);
    if (typeof s.name !== 'string' || !STAGE_NAME.test(s.name)) fail(at, '"name" must be lower-case letters, digits and dashes');
    if (names.has(s.name)) fail(at, `stage name "${s.name}" is used twice`);
    names.add(s.name);
    if (typeof s.module !== 'string' || !MODULE_REF.test(s.module)) fail(`${at} (${s.name})`, '"module" must be a module name, optionally with @version');
    if (s.label !== undefined && (typeof s.label !== 'string' || s.label.length === 0 || s.label.length > 32)) fail(`${at} (${s.name})`, '"label" must be a string of 1 to 32 characters');
    if (s.config !== undefined && (typeof s.config !== 'object' || s.config === null || Array.isArray(s.config))) fail(`${at} (${s.name})`, '"config" must be an object');
    if (s.mode !== undefined && s.mode !== 'enforce' && s.mode !== 'audit') fail(`${at} (${s.name})`, '"mode" must be "enforce" or "audit"');
    if (s.failurePolicy !== undefined && s.failurePolicy !== 'fail-open' && s.failurePolicy !== 'fail-closed') fail(`${at} (${s.name})`, '"failurePolicy" must be "fail-open" or "fail-closed"');
    const stage: StageSpec = { name: s.name, module: s.module };
    if (s.label !== undefined) stage.label = s.label as string;
    if (s.config !== undefined) stage.config = s.config as Record<string, unknown>;
    if (s.mode !== undefined) stage.mode = s.mode as StageMode;
    if (s.failurePolicy !== undefined) stage.failurePolicy = s.failurePolicy as FailurePolicy;
    return stage;
  });
  return { stages };
}

/** Parses a pipeline file's text (YAML or JSON). */
export function parsePipelineText(text: string, file: string): PipelineSpec {
  let doc: unknown;
  try {
    doc = parseYAML(text);
  } catch (err) {
    fail(file, `not valid YAML: ${(err as Error).message}`);
  }
  return validatePipelineSpec(doc, file);
}

/** Reads and parses a pipeline file; every failure names the file. */
export function readPipelineFile(file: string): PipelineSpec {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    fail(file, `cannot read the pipeline file: ${(err as Error).message}`);
  }
  return parsePipelineText(text, file);
}

export function formatPipelineYAML(spec: PipelineSpec): string {
  const lines = ['apiVersion: kwp.io/v1', 'kind: Pipeline', 'stages:'];
  for (const s of spec.stages) {
    lines.push(`  - name: ${s.name}`);
    if (s.label) lines.push(`    label: ${JSON.stringify(s.label)}`);
    lines.push(`    module: ${s.module}`);
    if (s.config) lines.push(`    config: ${JSON.stringify(s.config)}`);
    if (s.mode) lines.push(`    mode: ${s.mode}`);
    if (s.failurePolicy) lines.push(`    failurePolicy: ${s.failurePolicy}`);
  }
  return lines.join('\n') + '\n';
}
