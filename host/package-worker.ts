// Starting a worker thread whose entry is one of this package's modules. From
// the compiled package the entry is plain JavaScript. From the TypeScript
// sources (tests, development) the worker first registers module hooks that
// transpile .ts files with the TypeScript compiler the package already
// depends on, and map the `.js` import suffixes to the `.ts` files beside them.
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { fork, type ChildProcess, type ForkOptions } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

function typescriptHooks(): string {
  const tsUrl = pathToFileURL(createRequire(import.meta.url).resolve('typescript')).href;
  // Transpiled sources are cached on disk by path, size and mtime: loading the
  // TypeScript compiler takes seconds on a loaded machine, and stages that run
  // each instance in a thread of its own start many threads from the same files.
  const cacheDir = join(tmpdir(), `kwp-ts-transpiled-${process.getuid?.() ?? 'user'}`);
  const hooks = `
import { readFileSync, existsSync, statSync, mkdirSync, writeFileSync, renameSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
const cacheDir = ${JSON.stringify(cacheDir)};
let ts;
export async function resolve(specifier, context, next) {
  if (specifier.endsWith('.js') && context.parentURL?.endsWith('.ts')) {
    const candidate = new URL(specifier.slice(0, -3) + '.ts', context.parentURL);
    if (candidate.protocol === 'file:' && existsSync(fileURLToPath(candidate))) return { url: candidate.href, shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const file = fileURLToPath(url);
  const st = statSync(file);
  const key = createHash('sha256').update(file + '|' + st.size + '|' + st.mtimeMs).digest('hex').slice(0, 32);
  const cached = cacheDir + '/' + key + '.js';
  if (existsSync(cached)) return { format: 'module', source: readFileSync(cached, 'utf8'), shortCircuit: true };
  ts ??= (await import(${JSON.stringify(tsUrl)})).default;
  const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
    fileName: file,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, sourceMap: false },
  });
  try {
    mkdirSync(cacheDir, { recursive: true });
    const tmp = cached + '.' + process.pid + '.' + Math.random().toString(36).slice(2);
    writeFileSync(tmp, outputText);
    renameSync(tmp, cached);
  } catch {}
  return { format: 'module', source: outputText, shortCircuit: true };
}`;
  return `data:text/javascript,${encodeURIComponent(hooks)}`;
}

/**
 * `entry` is the worker module's URL as written next to the caller, with a
 * `.js` suffix. `resourceLimits` apply to a worker of the compiled package
 * only: from the sources, the worker may load the TypeScript compiler first,
 * whose heap is no measure of the worker's own.
 */
export function startPackageWorker(entry: URL, options: Omit<WorkerOptions, 'eval'> = {}): Worker {
  if (existsSync(fileURLToPath(entry))) return new Worker(entry, options);
  const ts = new URL(entry.href.replace(/\.js$/, '.ts'));
  if (!existsSync(fileURLToPath(ts))) throw new Error(`worker entry ${fileURLToPath(entry)} does not exist (nor its .ts source)`);
  const bootstrap = `
const { register } = await import('node:module');
register(${JSON.stringify(typescriptHooks())});
await import(${JSON.stringify(ts.href)});
`;
  const { resourceLimits: _compiledOnly, ...rest } = options;
  return new Worker(bootstrap, { ...rest, eval: true });
}

/**
 * The same for a child process (IPC with structured clone): for work whose
 * failure must not take the agent with it. V8 aborts the whole process when a
 * heap limit is hit inside one native allocation (a module's tables at
 * instantiation), worker resourceLimits or not; a child's abort is only the
 * child's. `execArgv` replaces the parent's (a test runner's flags are no
 * business of the child). Its stderr is a pipe, for the caller to read.
 */
export function startPackageProcess(entry: URL, execArgv: string[] = []): ChildProcess {
  const options: ForkOptions = { serialization: 'advanced', stdio: ['ignore', 'inherit', 'pipe', 'ipc'] };
  if (existsSync(fileURLToPath(entry))) return fork(fileURLToPath(entry), [], { ...options, execArgv });
  const ts = new URL(entry.href.replace(/\.js$/, '.ts'));
  if (!existsSync(fileURLToPath(ts))) throw new Error(`process entry ${fileURLToPath(entry)} does not exist (nor its .ts source)`);
  const register = `import { register } from 'node:module'; register(${JSON.stringify(typescriptHooks())});`;
  return fork(fileURLToPath(ts), [], { ...options, execArgv: [...execArgv, '--import', `data:text/javascript,${encodeURIComponent(register)}`] });
}
