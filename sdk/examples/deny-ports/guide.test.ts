// docs/plugin-guide.md builds this example: its code must be this example's,
// its pipeline must parse, and the walkthroughs it shows must be the ones the
// pipeline produces.
import { beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { guideBlocks } from '../../../host/testing/guide-blocks.js';
import { parsePipelineText } from '../../../host/pipeline/spec.js';
import { loadModule, startPluginCluster, type CompiledEvaluator } from '../../../host/testing/index.js';

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
      'file:test/deny-ports.test.ts', 'walkthrough:audit', 'walkthrough:enforce',
    ]);
  });

  it('shows the deny-ports example\'s source, with package imports', () => {
    expect(blocks.get('file:assembly/index.ts')).toBe(asProjectSource(readFileSync(here('./assembly/index.ts'), 'utf8')));
  });

  it('shows the deny-ports example\'s module.json', () => {
    expect(JSON.parse(blocks.get('file:assembly/module.json')!)).toEqual(JSON.parse(readFileSync(here('./assembly/module.json'), 'utf8')));
  });

  it.each(['audit', 'enforce'] as const)('shows the walkthrough kwp explain prints in %s mode', async (mode) => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-guide-'));
    writeFileSync(join(dir, 'cluster.yaml'), blocks.get('file:manifests/cluster.yaml')!);
    const pipeline = parsePipelineText(blocks.get('file:pipeline.yaml')!, 'docs/plugin-guide.md pipeline.yaml');
    expect(pipeline.stages[0]).toMatchObject({ name: 'deny-ports', module: `deny-ports@${wasm.meta.version}`, mode: 'audit' });
    if (mode === 'enforce') pipeline.stages[0].mode = 'enforce';
    const cluster = await startPluginCluster({ module: wasm, manifests: dir, pipeline });
    try {
      const r = cluster.evaluate({ src: 'shop/web', dst: 'shop/db', port: 23 });
      // kwp explain adds the revision it decided with: 2 after the first set, 3 after the second.
      expect(blocks.get(`walkthrough:${mode}`)).toBe(`${r.walkthrough}   (pipeline revision ${mode === 'audit' ? 2 : 3})\n`);
    } finally {
      cluster.dispose();
    }
  });
});
