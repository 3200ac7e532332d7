// A module resolve hook that only watches (node:module register, run in
// Node's hooks thread): it reports each resolution under
// @kubernetes/client-node, and each made from a data: module, to the port it
// was given, and resolves everything as usual. Tests use it to see what a
// child process loaded of the Kubernetes client (host/sources/kubernetes/narrow-client.ts).
import type { MessagePort } from 'node:worker_threads';

type Resolved = { url: string; format?: string | null; shortCircuit?: boolean };
type NextResolve = (specifier: string, context?: { parentURL?: string }) => Resolved | Promise<Resolved>;

let report: MessagePort | undefined;

export function initialize(data: { report: MessagePort }): void {
  report = data.report;
}

export async function resolve(specifier: string, context: { parentURL?: string }, next: NextResolve): Promise<Resolved> {
  const resolved = await next(specifier, context);
  if (resolved.url.includes('/@kubernetes/client-node/') || context.parentURL?.startsWith('data:')) {
    report?.postMessage({ specifier, parentURL: context.parentURL?.startsWith('data:') ? 'data:' : context.parentURL, url: resolved.url });
  }
  return resolved;
}
