// The Node.js flags and the environment the agent runs with (deploy/Dockerfile's
// ENTRYPOINT and ENV; the memory bench starts its agent with both too, so it
// measures what is deployed). A test keeps the Dockerfile in step.
//
// --max-semi-space-size=2: V8's young generation otherwise grows to 16 MiB
// semi-spaces (up to 48 MiB committed for objects that live a few
// microseconds). The agent's steady allocation is small per packet, so 2 MiB
// semi-spaces mean more, equally short scavenges and about 26 MiB less RSS
// at the large scale (docs/performance.md, "Where the agent's memory goes").
export const AGENT_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];

// glibc's allocator (mallopt(3)), read once at process start, so these are
// environment variables and not flags. By default glibc raises its trim and
// mmap thresholds after each large free (up to 32 MiB), and every thread that
// allocates gets an arena of its own (up to 8 per core): the memory that
// loading the code, the first lists and the feed threads used and freed
// stays resident. A fixed 128 KiB trim threshold (which also turns the
// dynamic thresholds off) gives it back, and two arenas bound what idle
// threads keep: about 27 MiB less RSS at the large scale. The packet path
// allocates little through malloc, so the extra trimming is off its way.
export const AGENT_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_TRIM_THRESHOLD_: '131072',
};
