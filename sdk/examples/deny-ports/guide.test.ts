// docs/plugin-guide.md builds this example: its code must be this example's
// and its pipeline must parse (test/docs-sessions.test.ts runs the guide's
// sessions, walkthroughs included, against a real agent).
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { guideBlocks } from '../../../host/testing/guide-blocks.js';
import { parsePipelineText } from '../../../host/pipeline/spec.js';
import { loadModule, type CompiledEvaluator } from '../../../host/testing/index.js';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const wasmFile = here('../../../dist/wasm/examples/deny-ports.wasm');

/** The example imports the SDK by relative path; a project imports the package. */
function asProjectSource(example: string): string {
  return example
    .replace(/from "\.\.\/\.\.\/\.\.\/index";.*$/m, 'from "kube-wasm-policies/sdk";')
    .replace(/from "\.\.\/\.\.\/\.\.\/exports";.*$/m, 'from "kube-wasm-policies/sdk/exports";');
}

describe('the plugin guide', () => {
  const blocks = guideBlocks();
  let wasm: CompiledEvaluator;
  beforeAll(() => {
    wasm = loadModule(wasmFile);
  });

  it('has every block the tests and the tutorial rely on', () => {
    expect([...blocks.keys()].sort()).toEqual([
      'file:assembly/index.ts', 'file:assembly/module.json', 'file:manifests/cluster.yaml', 'file:pipeline.yaml',
      'file:test/deny-ports.test.ts',
    ]);
  });

  it('shows the deny-ports example\'s source, with package imports', () => {
    expect(blocks.get('file:assembly/index.ts')).toBe(asProjectSource(readFileSync(here('./assembly/index.ts'), 'utf8')));
  });

  it('shows the deny-ports example\'s module.json', () => {
    expect(JSON.parse(blocks.get('file:assembly/module.json')!)).toEqual(JSON.parse(readFileSync(here('./assembly/module.json'), 'utf8')));
  });

  it('shows a pipeline that puts this version of deny-ports first, in audit mode', () => {
    const pipeline = parsePipelineText(blocks.get('file:pipeline.yaml')!, 'docs/plugin-guide.md pipeline.yaml');
    expect(pipeline.stages[0]).toMatchObject({ name: 'deny-ports', module: `deny-ports@${wasm.meta.version}`, mode: 'audit' });
  });
});
