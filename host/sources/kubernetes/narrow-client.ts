// KubeConfig from @kubernetes/client-node without the package's generated API.
// The agent uses KubeConfig (kubeconfig and in-cluster loading,
// authentication) and Watch, and makes its own requests through KubeConfig
// (request.ts). Watch's module (dist/watch.js) imports nothing generated, but
// KubeConfig's (dist/config.js) imports two names (createConfiguration,
// ServerConfiguration, for makeApiClient) from './gen/index.js', and that
// index loads every generated API class and model: 936 files, most of the
// client's 61 MiB of RSS in a bare process.
//
// So config.js is evaluated here from its own source text, as a data: module
// whose import specifiers are the ones the package's file resolves to, except
// that one, which points at narrow-gen.js (the package's own two modules that
// define those names). The code that runs is the installed package's; a
// command that imports the package's index (CoreV1Api for the multicluster
// cluster id) still gets all of it, and the generated classes work with this
// KubeConfig (they share gen/configuration.js and gen/servers.js).
//
// This replaced a module resolve hook (node:module register): Node 20 runs
// such hooks in a thread with its own isolate, which stays for the life of the
// process (10.6 MiB of RSS; docs/performance.md, "Where the agent's memory
// goes"), and a hook must be registered before anything imports the package.
// A module does neither: whoever imports KubeConfig from here gets the narrow
// one, in any process.
//
// The rewrite falls back to the package's own config.js (the whole client,
// nothing lost but memory) when it cannot be sure to load the same code:
// config.js not importing the generated index exactly once, an import it does
// not recognise, or a dependency this module would resolve to another copy
// than config.js would. From the TypeScript source (vitest), the package's
// file is loaded as well, since the test runner transforms what it imports.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { KubeConfig as PackageKubeConfig } from '@kubernetes/client-node/dist/config.js';

const ownRequire = createRequire(import.meta.url);
/** The package's KubeConfig module, as the package resolves from here (it has no exports map). */
export const CONFIG_MODULE = join(dirname(ownRequire.resolve('@kubernetes/client-node/package.json')), 'dist', 'config.js');
const GENERATED_INDEX = './gen/index.js';
const NARROW_GEN = new URL('./narrow-gen.js', import.meta.url).href;

// An import or re-export statement with a `from` clause, or a bare `import 'x'`.
const IMPORT_STATEMENT = /^(?:import|export)\b[^;'"]*?\bfrom\s*(['"])([^'"]+)\1|^import\s*(['"])([^'"]+)\3/gm;

/**
 * config.js's source with every import specifier made absolute (data: modules
 * resolve only absolute URLs and builtins) and the generated index replaced by
 * narrow-gen.js; undefined when the rewrite could load other code than the
 * package's file would (see above).
 */
export function narrowConfigSource(configFile: string = CONFIG_MODULE, narrowGen: string = NARROW_GEN): string | undefined {
  const source = readFileSync(configFile, 'utf8');
  const configRequire = createRequire(configFile);
  let redirects = 0;
  let unsure = false;
  const rewritten = source.replace(IMPORT_STATEMENT, (statement: string, q1?: string, s1?: string, q2?: string, s2?: string) => {
    const specifier = (s1 ?? s2)!;
    const quote = (q1 ?? q2)!;
    let target: string;
    if (specifier === GENERATED_INDEX) {
      redirects++;
      target = narrowGen;
    } else if (specifier.startsWith('node:')) {
      return statement;
    } else if (specifier.startsWith('./') || specifier.startsWith('../')) {
      target = pathToFileURL(resolvePath(dirname(configFile), specifier)).href;
    } else {
      // A dependency: this module's ESM resolution, if it finds the copy config.js would.
      try {
        if (configRequire.resolve(specifier) !== ownRequire.resolve(specifier)) unsure = true;
        target = import.meta.resolve(specifier);
      } catch {
        unsure = true;
        return statement;
      }
    }
    const at = statement.lastIndexOf(specifier);
    return `${statement.slice(0, at - 1)}${quote}${target}${quote}${statement.slice(at + specifier.length + 1)}`;
  });
  // Any import the pattern did not see would be left relative, and fail to resolve or resolve elsewhere.
  const statements = source.match(/^(?:import|export)\b/gm)?.length ?? 0;
  const seen = source.match(IMPORT_STATEMENT)?.length ?? 0;
  const exportsWithoutFrom = source.match(/^export\s+(?:class|function|const|let|var|default|async)\b/gm)?.length ?? 0;
  if (unsure || redirects !== 1 || seen + exportsWithoutFrom !== statements || /\bimport\s*\(|import\.meta/.test(source)) return undefined;
  return `${rewritten}\n//# sourceURL=${pathToFileURL(configFile).href}\n`;
}

const source = import.meta.url.endsWith('.ts') ? undefined : narrowConfigSource();

/** Whether KubeConfig came from the rewritten source (false: the package's own config.js, with the whole client). */
export const narrowKubeConfig: boolean = source !== undefined;

/** The package's KubeConfig class, loaded without the generated API where it can be (see above). */
export const KubeConfig: typeof PackageKubeConfig = source === undefined
  ? (await import('@kubernetes/client-node/dist/config.js')).KubeConfig
  : ((await import(`data:text/javascript;base64,${Buffer.from(source).toString('base64')}`)) as { KubeConfig: typeof PackageKubeConfig }).KubeConfig;
export type KubeConfig = PackageKubeConfig;
