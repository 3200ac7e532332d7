// The Node.js flags the agent runs with (deploy/Dockerfile's ENTRYPOINT; the
// memory bench starts its agent with them too, so it measures what is deployed).
//
// --max-semi-space-size=2: V8's young generation otherwise grows to 16 MiB
// semi-spaces (up to 48 MiB committed for objects that live a few
// microseconds). The agent's steady allocation is small per packet, so 2 MiB
// semi-spaces mean more, equally short scavenges and about 26 MiB less RSS
// at the large scale (docs/performance.md, "Where the agent's memory goes").
export const AGENT_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];
