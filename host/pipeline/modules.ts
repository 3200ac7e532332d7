// Where a stage's module comes from. The pipeline asks a ModuleResolver for a
// compiled module by reference; the built-in resolver reads the evaluators this
// package ships, and the admin API's module store adds uploaded ones in front.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KwpError } from '../errors.js';
import { compileEvaluator, type CompiledEvaluator } from '../runtime/loader.js';
import type { SandboxLimits } from '../runtime/limits.js';

export interface ModuleResolver {
  /** A compiled module for `name` or `name@version`, or undefined when this resolver has none. */
  resolve(ref: string): CompiledEvaluator | undefined;
}

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('kube-wasm-policies: cannot find the package root');
    dir = up;
  }
  return dir;
}

/** Directory holding the built-in evaluators' .wasm files (a package asset). */
export function builtinWasmDir(): string {
  return join(packageRoot(), 'dist', 'wasm');
}

/** The evaluators shipped with the package, compiled once each on first use. */
export class BuiltinModules implements ModuleResolver {
  private readonly compiled = new Map<string, CompiledEvaluator>();
  constructor(private readonly limits?: Partial<SandboxLimits>, private readonly dir = builtinWasmDir()) {}

  names(): string[] {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir).filter((f) => f.endsWith('.wasm')).map((f) => f.slice(0, -5)).sort();
  }

  resolve(ref: string): CompiledEvaluator | undefined {
    const [name, version] = ref.split('@');
    let mod = this.compiled.get(name);
    if (!mod) {
      const file = join(this.dir, `${name}.wasm`);
      if (!existsSync(file)) return undefined;
      mod = compileEvaluator(readFileSync(file), { source: `builtin:${name}`, limits: this.limits, instrumentationCache: join(this.dir, '.instrumented') });
      this.compiled.set(name, mod);
    }
    if (version !== undefined && version !== mod.meta.version) return undefined;
    return mod;
  }
}

/** Asks each resolver in turn; the first that knows the reference wins. */
export class ChainedModules implements ModuleResolver {
  constructor(private readonly resolvers: ModuleResolver[]) {}
  resolve(ref: string): CompiledEvaluator | undefined {
    for (const r of this.resolvers) {
      const m = r.resolve(ref);
      if (m) return m;
    }
    return undefined;
  }
}

export function resolveOrThrow(resolver: ModuleResolver, ref: string, where: string): CompiledEvaluator {
  const m = resolver.resolve(ref);
  if (!m) {
    const hint = existsSync(builtinWasmDir()) ? 'push it first (kwp module push) or fix the name' : 'the built-in modules are not built: run `npm run build`';
    throw new KwpError('KWP_ERR_MODULE_NOT_FOUND', `${where}: module "${ref}" is neither built in nor in the module store; ${hint}`);
  }
  return m;
}
