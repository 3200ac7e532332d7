// The Node.js flags and the environment the agent runs with (deploy/Dockerfile's
// ENTRYPOINT and ENV; the memory bench starts its agent with both too, so it
// measures what is deployed). A test keeps the Dockerfile in step.
//
// --max-semi-space-size=2: V8's young generation otherwise grows to 16 MiB
// semi-spaces (up to 48 MiB committed for objects that live a few
// microseconds). The agent's steady allocation is small per packet, so 2 MiB
// semi-spaces mean more, equally short scavenges and about 26 MiB less RSS
// at the large scale (docs/performance.md, "Where the agent's memory goes").
//
// Not --optimize-for-size: about 4 MiB less again (V8's heap 43–45 → 40.7
// MiB physical), but in two back-to-back pairs of the hot swap section the
// build of a changed stage took longer each time (1.4× and 2.3× the builds
// without, load 7–9), and those builds already miss their target
// (docs/performance.md, "Where the agent's memory goes").
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
// A 32 KiB mmap threshold (128 KiB by default once the trim threshold is
// set) gives blocks of 32 KiB or more their own mapping, returned whole when
// freed: what loading the code and the feed threads allocated in such blocks
// no longer pins the arena's pages around the smaller blocks that stay
// (native memory once started 17 → 12 MiB, about −5 MiB RSS). The packet
// path's buffers are smaller (the binding copies each packet, a SYN's few
// dozen bytes); the pipeline and hot swap sections, back to back, measured
// no loss.
export const AGENT_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_TRIM_THRESHOLD_: '131072',
  MALLOC_MMAP_THRESHOLD_: '32768',
};
