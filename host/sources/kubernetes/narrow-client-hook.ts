// A module resolve hook (node:module register, run in Node's hooks thread):
// client-node's dist/config.js, which holds KubeConfig, imports
// createConfiguration and ServerConfiguration from './gen/index.js', and that
// index loads the whole generated API (936 files). The hook resolves that one
// import, from that one file, to narrow-gen.js, which re-exports the two names
// from the package's own modules. Everything else resolves as usual, so a
// command that imports the package's index (CoreV1Api, the generated types)
// still gets all of it, with the same KubeConfig class.
import type { MessagePort } from 'node:worker_threads';

type Resolved = { url: string; format?: string | null; shortCircuit?: boolean };
type NextResolve = (specifier: string, context?: { parentURL?: string }) => Resolved | Promise<Resolved>;

const CONFIG_MODULE = '/@kubernetes/client-node/dist/config.js';
const NARROW_GEN = new URL('./narrow-gen.js', import.meta.url).href;

/** Where the hook reports what it resolved under client-node (tests only; absent in the agent). */
let report: MessagePort | undefined;

export function initialize(data: { report?: MessagePort } | undefined): void {
  report = data?.report;
}

export async function resolve(specifier: string, context: { parentURL?: string }, next: NextResolve): Promise<Resolved> {
  const redirect = specifier === './gen/index.js' && context.parentURL?.endsWith(CONFIG_MODULE) === true;
  const resolved = await next(redirect ? NARROW_GEN : specifier, context);
  if (report && (redirect || resolved.url.includes('/@kubernetes/client-node/'))) report.postMessage({ specifier, parentURL: context.parentURL, url: resolved.url, redirect });
  return resolved;
}
