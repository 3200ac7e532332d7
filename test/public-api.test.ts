// The public surface is a promise: this test reads host/index.ts with the
// TypeScript compiler (values and types alike) and fails when it differs from
// the list in docs/embedding.md, so changing the surface is a deliberate act
// that updates both.
import { describe, it, expect } from 'vitest';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function exportedNames(): string[] {
  const entry = join(root, 'host', 'index.ts');
  const program = ts.createProgram([entry], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry)!;
  const symbol = checker.getSymbolAtLocation(source)!;
  return checker.getExportsOfModule(symbol).map((s) => s.getName()).sort();
}

function documentedNames(): string[] {
  const doc = readFileSync(join(root, 'docs', 'embedding.md'), 'utf8');
  const section = doc.split('## The public surface')[1]?.split('\n## ')[0] ?? '';
  const names = [...section.matchAll(/^\| `([A-Za-z_][A-Za-z0-9_]*)` \|/gm)].map((m) => m[1]);
  return names.sort();
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [p] : [];
  });
}

describe('the public API', () => {
  it('exports exactly the names docs/embedding.md lists', () => {
    const documented = documentedNames();
    expect(documented.length).toBeGreaterThan(20);
    expect(exportedNames()).toEqual(documented);
  });

  it('kwp agent imports the host only through the public entry point', () => {
    const relativeImports = (file: string) => {
      const text = readFileSync(join(root, file), 'utf8');
      return [...text.matchAll(/(?:from |import\()'([^']+)'/g)].map((m) => m[1]).filter((s) => s.startsWith('.')).sort();
    };
    expect(relativeImports('host/agent.ts')).toEqual(['./index.js']);
    // The command itself: flag parsing (its flag table and the CLI's shared flag helpers), the Agent, the public API, and running until a signal.
    expect(relativeImports('host/cli/agent.ts')).toEqual(['../agent.js', '../index.js', './agent-flags.js', './args.js', './signals.js']);
  });

  it('the embedding example imports kube-wasm-policies only through the package entry point', () => {
    const files = sourceFiles(join(root, 'examples', 'embed'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      const imports = [...text.matchAll(/from '([^']+)'/g)].map((m) => m[1]);
      const reachesInside = imports.filter((s) => /(^\.\.\/\.\.\/host)|(^kube-wasm-policies\/(?!package\.json))/.test(s));
      expect(reachesInside, relative(root, f)).toEqual([]);
    }
  });
});
