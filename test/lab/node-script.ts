// How to start one of this repository's scripts in a child `node` (pod
// agents, the standalone dataplane runner). From dist/ the compiled .js is
// there. From source (under vitest) the script and the local modules it
// imports are transpiled once per process into node_modules/.cache/kwp-lab/,
// mirroring the source tree so bare imports (nfqueue, yaml) still resolve:
// children then start as plain `node` in a fraction of a second instead of
// loading the TypeScript compiler each time.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative as relativePath, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

type TypeScript = typeof import('typescript');

let typescript: TypeScript | undefined;
const transpiled = new Set<string>();

/**
 * `node` arguments that run the module `relative` (spelled with a `.js`
 * suffix, like an import) resolved against `base` (an import.meta.url).
 */
export function nodeScriptArgs(base: string, relative: string): string[] {
  const compiled = fileURLToPath(new URL(relative, base));
  if (existsSync(compiled)) return [compiled];
  const source = compiled.replace(/\.js$/, '.ts');
  if (!existsSync(source)) throw new Error(`node-script: neither ${compiled} nor ${source} exists`);
  const root = repositoryRoot(source);
  const cache = join(root, 'node_modules', '.cache', 'kwp-lab');
  transpileTree(source, root, cache);
  return [join(cache, relativePath(root, source)).replace(/\.ts$/, '.js')];
}

function repositoryRoot(file: string): string {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
  }
  throw new Error(`node-script: no package.json above ${file}`);
}

// Imports, and worker entries (`new URL('./x.js', import.meta.url)`), which the child starts as threads.
const LOCAL_IMPORT = /(?:from\s+|import\s*\(\s*|new URL\(\s*)['"](\.{1,2}\/[^'"]+)\.js['"]/g;

function transpileTree(file: string, root: string, cache: string): void {
  if (transpiled.has(file)) return;
  transpiled.add(file);
  typescript ??= createRequire(import.meta.url)('typescript') as TypeScript;
  const source = readFileSync(file, 'utf8');
  const output = typescript.transpileModule(source, {
    fileName: file,
    compilerOptions: { module: typescript.ModuleKind.ESNext, target: typescript.ScriptTarget.ES2022 },
  });
  const target = join(cache, relativePath(root, file)).replace(/\.ts$/, '.js');
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, output.outputText);
  for (const match of source.matchAll(LOCAL_IMPORT)) {
    const dependency = resolve(dirname(file), `${match[1]}.ts`);
    if (existsSync(dependency)) transpileTree(dependency, root, cache);
  }
}
