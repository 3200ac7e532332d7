// How `kwp agent` loads: the Kubernetes client's narrow loading first (it must
// be in place before anything imports the package), then the agent's module
// graph. main.ts's agent command and the memory bench's child both start the
// agent through this, so the bench measures what the command loads.
import { registerNarrowKubernetesClient } from '../sources/kubernetes/narrow-client.js';

export async function loadAgentCommand(): Promise<(argv: string[]) => Promise<number>> {
  registerNarrowKubernetesClient();
  return (await import('./agent.js')).runAgent;
}
