// The flags of `kwp agent`, listed once: the agent's parser reads them, and
// `kwp manifests` checks every DaemonSet argument against them, so the install
// YAML cannot pass a flag the agent does not know.

export interface AgentFlag {
  /** Without dashes; long flags are written `--name=value`, the one-letter `v` as `-v=N`. */
  name: string;
  type: 'string' | 'boolean' | 'number';
  default?: string | boolean | number;
  /** Inclusive bounds of a number flag; without them it takes 0 and up. */
  range?: [number, number];
  description: string;
}

export const agentFlags: AgentFlag[] = [
  { name: 'kubeconfig', type: 'string', description: 'Kubeconfig file for the API server; the in-cluster service account when absent.' },
  { name: 'node-name', type: 'string', description: 'Name of the node this agent enforces on (the DaemonSet sets it from spec.nodeName).' },
  { name: 'pipeline', type: 'string', description: 'Pipeline YAML: the evaluator stages in order, with their configuration and failure policies.' },
  { name: 'fail-open', type: 'boolean', default: true, description: 'Let packets pass while no agent listens on the queue (crash, restart); false drops them.' },
  { name: 'strict', type: 'boolean', default: true, description: 'After a policy change, cut established connections the new policy denies.' },
  { name: 'admin-address', type: 'string', default: '127.0.0.1:9443', description: 'HOST:PORT of the admin API, which also serves /healthz, /readyz and /metrics; off for none.' },
  { name: 'admin-token-file', type: 'string', description: 'File holding the bearer token the admin API requires for changes.' },
  { name: 'admin-reads-open', type: 'boolean', default: false, description: 'Serve GET routes, /metrics and explain without the token (changes always need it).' },
  { name: 'trusted-key', type: 'string', description: 'ed25519 public key (PEM) that signs uploads; repeatable. When given, unsigned or wrongly signed uploads are refused.' },
  { name: 'auto-rollback', type: 'string', description: 'FAILURES/SECONDS: roll back to the previous pipeline when one stage traps or runs out of fuel that often, e.g. 20/60.' },
  { name: 'state-dir', type: 'string', default: '/var/lib/kwp', description: 'Directory for uploaded modules and the active pipeline, kept across restarts.' },
  { name: 'manifests', type: 'string', description: 'Directory of Kubernetes YAML to read objects from instead of (or besides) the API server.' },
  { name: 'dataplane', type: 'string', default: 'on', description: 'on: enforce through NFQUEUE; off: only keep state and answer the admin API.' },
  { name: 'table-name', type: 'string', default: 'kube-wasm-policies', description: 'nftables table (and iptables chain prefix) this agent owns; give each agent on a node its own.' },
  { name: 'queue-id', type: 'number', default: 100, description: 'NFQUEUE number for new connections.' },
  { name: 'dns-queue-id', type: 'number', default: 101, description: 'NFQUEUE number for observed DNS answers (domainNames peers).' },
  { name: 'ip-tracker-etcd', type: 'string', description: 'Multicluster (flat network): etcd URL(s), comma-separated, where kwp ip-tracker publishes the pods of every cluster.' },
  { name: 'ip-tracker-prefix', type: 'string', default: '/kwp/ips/', description: 'Key prefix of the IP tracker records in etcd.' },
  { name: 'cluster-id', type: 'string', description: "This cluster's id in the cluster set (multicluster); the kube-system namespace uid when absent." },
  { name: 'mark-bits', type: 'number', default: 20, description: 'Lowest of the packet/conntrack mark bits this agent uses (it takes 4); agents sharing a node need distinct ranges.' },
  { name: 'packet-thread-nice', type: 'number', range: [-20, 19], description: 'Nice value for the thread that runs the packet path (negative raises it; needs root or CAP_SYS_NICE, else logged and ignored); unset leaves the inherited priority.' },
  { name: 'fast-path', type: 'boolean', default: true, description: 'Keep decided tuples (source, destination, protocol, destination port) in kernel sets so their next connections are decided without the agent; off while an audit or uncached stage must see every connection (docs/dataplane.md). On by default; --fast-path=false sends every new connection to the agent.' },
  { name: 'fast-path-timeout', type: 'number', range: [1, 86400], default: 120, description: 'Seconds a decided tuple stays in the kernel fast path sets; every change of policy, pod or pipeline empties them at once.' },
  { name: 'sandbox-limit', type: 'string', description: 'NAME=VALUE: one sandbox limit (module shape, stages, memory budget, output sizes), e.g. maxStages=16; repeatable. docs/sandbox.md lists every limit and its default.' },
  { name: 'module-threads', type: 'boolean', default: false, description: 'Run each stage instance in a thread of its own, stopped when a call overruns decisionDeadlineMs, callDeadlineMs or feedDeadlineMs (the wall-clock backstop, docs/sandbox.md); off: instances run in the main thread, bounded by fuel alone.' },
  { name: 'fleet', type: 'boolean', default: false, description: 'Run as the cluster-level admin API (a Deployment, with --dataplane=off): uploads are pushed to --registry (or a ConfigMap) as EvaluatorModules, pipeline changes and rollbacks written to the Pipeline object, and the rollout controller runs here (docs/fleet.md).' },
  { name: 'fleet-node', type: 'boolean', default: true, description: "With an API server and --node-name: follow the cluster's Pipeline and EvaluatorModule objects and report this node's NodePipelineStatus." },
  { name: 'registry', type: 'string', description: 'With --fleet: OCI registry and repository prefix modules are pushed to, HOST[:PORT]/PREFIX (e.g. registry.example.com/kwp); without it, modules go to ConfigMaps.' },
  { name: 'plain-http-registry', type: 'string', description: 'Registries (HOST:PORT, comma-separated) reached over plain HTTP besides loopback ones.' },
  { name: 'fleet-namespace', type: 'string', default: 'kube-system', description: 'With --fleet: namespace of the ConfigMaps small modules are stored in (the agents may read ConfigMaps and Secrets there).' },
  { name: 'fleet-pipeline', type: 'string', default: 'default', description: 'With --fleet: name of the Pipeline object the admin API writes.' },
  { name: 'fleet-status-interval', type: 'number', range: [1, 3600], default: 10, description: "Seconds between refreshes of this node's NodePipelineStatus when only its counters changed." },
  { name: 'flow-ring', type: 'number', range: [0, 1_000_000], default: 10000, description: 'Aggregated flow records kept in memory for GET /v1/flows and kwp flows (docs/flows.md); 0 turns flow recording off.' },
  { name: 'flow-interval', type: 'number', range: [1, 3600], default: 10, description: 'Seconds over which decided connections are aggregated into one flow record per workload pair, port, protocol, verdict and deciding rule.' },
  { name: 'flow-log', type: 'string', description: 'Also write every flow record as a JSON line to this file (rotated by size) or to stdout (-).' },
  { name: 'flow-log-max-bytes', type: 'number', range: [1024, 1_099_511_627_776], default: 10485760, description: 'Rotate the --flow-log file when it would grow past this many bytes (FILE.1 .. FILE.3 are kept).' },
  { name: 'v', type: 'number', default: 0, description: 'Log verbosity: 0 info, 1 debug, 2 trace.' },
  { name: 'log-format', type: 'string', default: 'json', description: 'Log lines as json (for log collectors) or text (for people; coloured only on a TTY without NO_COLOR).' },
];

/** The command-line spelling of a flag. */
export function flagSpelling(name: string): string {
  return name.length === 1 ? `-${name}` : `--${name}`;
}
