// Loading @kubernetes/client-node without its generated API: the agent uses
// KubeConfig (kubeconfig and in-cluster loading, authentication) and Watch,
// and makes its own requests through KubeConfig (request.ts), yet the
// package's KubeConfig module imports the generated index, most of the
// package's 61 MiB of RSS in a bare process. registerNarrowKubernetesClient installs a resolve
// hook (narrow-client-hook.ts) that points that one import at the two modules
// KubeConfig needs; the code that runs is the installed package's.
//
// The hook must be registered before anything imports the package, so the
// entry of `kwp agent` (agent-load.ts) calls it and then imports the agent.
// Node 20 runs module hooks in a thread of their own, which stays: ~12 MiB
// of RSS for ~32 MiB less of the client (docs/performance.md, "Where the
// agent's memory goes").
import { register } from 'node:module';
import type { MessagePort } from 'node:worker_threads';

let registered = false;

export interface NarrowClientOptions {
  /** Receives one message for each resolution under client-node (and the redirect); for tests. */
  report?: MessagePort;
}

/**
 * Registers the hook once per process; later calls do nothing. Nor does a call
 * from the TypeScript source (vitest running `main()` in its own process): Node's
 * hooks thread loads JavaScript only, and that process loads the whole client.
 */
export function registerNarrowKubernetesClient(options: NarrowClientOptions = {}): void {
  if (registered || import.meta.url.endsWith('.ts')) return;
  registered = true;
  const hook = new URL('./narrow-client-hook.js', import.meta.url);
  if (options.report) register(hook, { data: { report: options.report }, transferList: [options.report] });
  else register(hook);
}
