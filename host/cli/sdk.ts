// `kwp sdk new NAME [DIR]`: scaffolds a standalone plugin project from the
// templates in host/sdk-template/, pinned to the SDK of the kwp that runs it
// so the module it builds speaks the ABI of the agent it will be pushed to.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { KwpError } from '../errors.js';
import { packageRoot } from '../package-root.js';
import { parseFlags, subcommand } from './args.js';

const HELP = `usage: kwp sdk new NAME [DIR] [--sdk SPEC]

Creates a plugin project in DIR (default ./NAME): an AssemblyScript evaluator
that builds to build/NAME.wasm, its module.json, and a test that runs it in
the agent's runtime. Then: cd DIR && npm install && npm test

  NAME          module name: lower-case letters, digits and dashes, 1-63 characters
  --sdk SPEC    where the project gets kube-wasm-policies from: a version or
                range for your registry, or a path to a checkout or a tarball
                (written as a file: dependency); default: the package this kwp
                runs from, as a file: dependency
`;

const MODULE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

interface PackageInfo {
  root: string;
  version: string;
  /** Dependencies and devDependencies: the scaffold pins the same compiler and test runner. */
  dependencies: Record<string, string>;
}

function kwpPackage(): PackageInfo {
  const root = packageRoot();
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  return { root, version: pkg.version, dependencies: { ...pkg.devDependencies, ...pkg.dependencies } };
}

/** The directory holding the project templates. */
export function templateDir(): string {
  return join(kwpPackage().root, 'host', 'sdk-template');
}

/** A path (or file: URL) becomes a file: dependency relative to the project; anything else is a registry spec. */
export function sdkDependency(spec: string, projectDir: string, cwd = process.cwd()): string {
  const raw = spec.startsWith('file:') ? spec.slice(5) : spec;
  const looksLikePath = spec.startsWith('file:') || raw.startsWith('.') || isAbsolute(raw) || raw.endsWith('.tgz');
  if (!looksLikePath) return spec;
  const abs = resolve(cwd, raw);
  if (!existsSync(abs)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp sdk new: --sdk ${spec}: no such file or directory; give a kube-wasm-policies checkout, a tarball from "npm pack", or a version`);
  }
  const rel = relative(projectDir, abs) || '.';
  return `file:${rel.startsWith('.') || isAbsolute(rel) ? rel : `./${rel}`}`;
}

export interface ScaffoldOptions {
  name: string;
  dir: string;
  /** The kube-wasm-policies dependency as package.json will hold it. */
  sdk: string;
}

/** Output path inside the project for a template path. */
function outputPath(templatePath: string, name: string): string {
  const p = templatePath.replace(/\.tmpl$/, '');
  if (p === 'gitignore') return '.gitignore'; // npm drops files named .gitignore from packages
  if (p === join('test', 'policy.test.ts')) return join('test', `${name}.test.ts`);
  return p;
}

function listTemplates(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const p = join(prefix, e.name);
    if (e.isDirectory()) out.push(...listTemplates(dir, p));
    else if (e.name.endsWith('.tmpl')) out.push(p);
  }
  return out.sort();
}

/** Writes the project; returns the files written, relative to the project. */
export function scaffold(options: ScaffoldOptions): string[] {
  const { name, dir, sdk } = options;
  if (!MODULE_NAME.test(name)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp sdk new: "${name}" is not a valid module name; use lower-case letters, digits and dashes, 1-63 characters, e.g. "deny-ports"`);
  }
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp sdk new: ${dir} already exists and is not an empty directory; pick another DIR or remove it`);
  }
  const pkg = kwpPackage();
  const values: Record<string, string> = {
    name,
    sdk,
    assemblyscript: pkg.dependencies.assemblyscript ?? '^0.28.0',
    vitest: pkg.dependencies.vitest ?? '^4.0.0',
    kwpVersion: pkg.version,
  };
  const source = templateDir();
  const written: string[] = [];
  for (const t of listTemplates(source)) {
    const text = readFileSync(join(source, t), 'utf8').replace(/\{\{(\w+)\}\}/g, (whole, key: string) => {
      if (!(key in values)) throw new KwpError('KWP_ERR_INTERNAL', `kwp sdk new: template ${t} uses an unknown placeholder ${whole}`);
      return values[key];
    });
    const out = outputPath(t, name);
    mkdirSync(dirname(join(dir, out)), { recursive: true });
    writeFileSync(join(dir, out), text);
    written.push(out);
  }
  return written;
}

async function runNew(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags('sdk new', argv, {
    sdk: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  }, true);
  if (values.help) { process.stdout.write(HELP); return 0; }
  if (positionals.length < 1 || positionals.length > 2) {
    throw new KwpError('KWP_ERR_USAGE', `kwp sdk new: expected NAME and an optional DIR, got ${positionals.length} argument(s); see "kwp sdk new --help"`);
  }
  const [name, dirArg] = positionals;
  const dir = resolve(dirArg ?? name);
  // By default the project depends on the package this kwp runs from (a
  // checkout or an installed package), so it installs with no registry and
  // builds against exactly the SDK and ABI of this kwp.
  const sdk = sdkDependency(values.sdk ?? kwpPackage().root, dir);
  const files = scaffold({ name, dir, sdk });
  const shown = relative(process.cwd(), dir) || '.';
  process.stdout.write(
    `created ${shown}/ (kube-wasm-policies ${sdk}):\n${files.map((f) => `  ${f}`).join('\n')}\n\n` +
    `next:\n  cd ${shown}\n  npm install\n  npm test        # builds build/${name}.wasm and runs test/${name}.test.ts\n`,
  );
  if (values.sdk === undefined) {
    process.stdout.write(`\nThe project depends on the kube-wasm-policies this kwp runs from (${kwpPackage().root}); to take it from your npm registry instead, run again with --sdk ${kwpPackage().version}.\n`);
  }
  return 0;
}

export async function runSdk(argv: string[]): Promise<number> {
  const { sub, rest } = subcommand('sdk', argv);
  if (sub === 'new') return runNew(rest);
  process.stdout.write(HELP);
  return argv.length ? 0 : 2;
}
