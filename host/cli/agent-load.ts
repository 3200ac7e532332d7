// How `kwp agent` loads: the CLI's agent module, whose static imports are the
// agent's module graph (the Kubernetes client's KubeConfig among them, loaded
// without the generated API by narrow-client.ts). main.ts's agent command and
// the memory bench's child both start the agent through this, so the bench
// measures what the command loads; test/agent-entry.test.ts proves, on the
// compiled `kwp agent`, what that is.
export async function loadAgentCommand(): Promise<(argv: string[]) => Promise<number>> {
  return (await import('./agent.js')).runAgent;
}
