// A module resolve hook (node:module register, run in Node's hooks thread):
// client-node's dist/config.js, which holds KubeConfig, imports
// createConfiguration and ServerConfiguration from './gen/index.js', and that
// index loads the whole generated API (936 files). The hook resolves that one
// import, from that one file, to narrow-gen.js, which re-exports the two names
// from the package's own modules. Everything else resolves as usual, so a
// command that imports the package's index (CoreV1Api, the generated types)
// still gets all of it, with the same KubeConfig class.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MessagePort } from 'node:worker_threads';

type Resolved = { url: string; format?: string | null; shortCircuit?: boolean };
type NextResolve = (specifier: string, context?: { parentURL?: string }) => Resolved | Promise<Resolved>;

// The package's KubeConfig module exactly as narrow-gen.js resolves the package, so another
// copy of client-node (another version nested somewhere) is never given this one's modules.
// (Node 20 gives the hooks thread no import.meta.resolve; the package has no exports map, so
// the CommonJS resolution of its package.json finds the same directory.)
const CONFIG_MODULE = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/package.json')), 'dist', 'config.js')).href;
const NARROW_GEN = new URL('./narrow-gen.js', import.meta.url).href;

/** Where the hook reports what it resolved under client-node (tests only; absent in the agent). */
let report: MessagePort | undefined;

export function initialize(data: { report?: MessagePort } | undefined): void {
  report = data?.report;
}

export async function resolve(specifier: string, context: { parentURL?: string }, next: NextResolve): Promise<Resolved> {
  const redirect = specifier === './gen/index.js' && context.parentURL === CONFIG_MODULE;
  const resolved = await next(redirect ? NARROW_GEN : specifier, context);
  if (report && (redirect || resolved.url.includes('/@kubernetes/client-node/'))) report.postMessage({ specifier, parentURL: context.parentURL, url: resolved.url, redirect });
  return resolved;
}
