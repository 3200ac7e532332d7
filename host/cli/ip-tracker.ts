// `kwp ip-tracker`: the multicluster (flat network) companion of the agent.
// It runs as a Deployment in each cluster, watches every cluster named in a
// directory of kubeconfig files and publishes their pod IPs into etcd, where
// the agents started with --ip-tracker-etcd read them.

import { runUntilSignal } from './signals.js';
import { KwpError } from '../errors.js';
import { createLogger } from '../log.js';
import { parseEtcdEndpoints } from '../multicluster/etcd-client.js';
import { DEFAULT_PREFIX } from '../multicluster/ip-record.js';
import { IpTracker } from '../multicluster/ip-tracker.js';
import { parseFlags, requireFlag } from './args.js';

const HELP = `usage: kwp ip-tracker --kubeconfig-dir DIR --etcd URL[,URL...] [flags]

Watches the Pods, Namespaces and Nodes of every cluster whose kubeconfig is in
DIR (files are picked up, changed and dropped without a restart) and keeps one
etcd record per pod IP under the prefix, bound to a lease so the records of a
dead tracker expire. Several replicas may run at once.

flags:
  --kubeconfig-dir DIR    directory of kubeconfig files, one cluster each (its current context)
  --etcd URL[,URL...]     etcd client URL(s), e.g. http://etcd.kwp-system:2379
  --prefix PREFIX         key prefix (default ${DEFAULT_PREFIX})
  --cluster-id CTX=ID     the id of the cluster of context CTX; repeat per cluster
                          (default: the uid of that cluster's kube-system namespace)
  --lease-ttl SECONDS     lease TTL of the records (default 15)
  -v N                    log verbosity: 0 info, 1 debug
`;

export function parseClusterIds(values: string[]): Map<string, string> {
  const ids = new Map<string, string>();
  for (const v of values) {
    const at = v.indexOf('=');
    if (at <= 0 || at === v.length - 1) {
      throw new KwpError('KWP_ERR_USAGE', `kwp ip-tracker: --cluster-id "${v}" must be CONTEXT=ID, e.g. --cluster-id kind-east=east`);
    }
    ids.set(v.slice(0, at), v.slice(at + 1));
  }
  return ids;
}

export function parseIpTrackerFlags(argv: string[]): { help: true } | {
  help: false; kubeconfigDir: string; endpoints: string[]; prefix: string; clusterIds: Map<string, string>; leaseTtlSeconds: number; verbosity: number;
} {
  const { values } = parseFlags('ip-tracker', argv, {
    'kubeconfig-dir': { type: 'string' },
    etcd: { type: 'string' },
    prefix: { type: 'string', default: DEFAULT_PREFIX },
    'cluster-id': { type: 'string', multiple: true, default: [] },
    'lease-ttl': { type: 'string', default: '15' },
    v: { type: 'string', short: 'v', default: '0' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return { help: true };
  const kubeconfigDir = requireFlag('ip-tracker', 'kubeconfig-dir', values['kubeconfig-dir']);
  const endpoints = parseEtcdEndpoints(requireFlag('ip-tracker', 'etcd', values.etcd), 'kwp ip-tracker: --etcd');
  const ttl = Number(values['lease-ttl']);
  if (!Number.isInteger(ttl) || ttl < 2 || ttl > 3600) {
    throw new KwpError('KWP_ERR_USAGE', `kwp ip-tracker: --lease-ttl takes whole seconds from 2 to 3600, got "${values['lease-ttl']}"`);
  }
  const prefix = values.prefix!;
  if (!prefix.startsWith('/')) throw new KwpError('KWP_ERR_USAGE', `kwp ip-tracker: --prefix "${prefix}" must start with /, e.g. /kwp/ips/`);
  return {
    help: false,
    kubeconfigDir,
    endpoints,
    prefix,
    clusterIds: parseClusterIds(values['cluster-id'] ?? []),
    leaseTtlSeconds: ttl,
    verbosity: Number(values.v) || 0,
  };
}

export async function runIpTracker(argv: string[]): Promise<number> {
  const flags = parseIpTrackerFlags(argv);
  if (flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const log = createLogger(flags.verbosity).child({ part: 'ip-tracker' });
  const tracker = new IpTracker({
    kubeconfigDir: flags.kubeconfigDir,
    endpoints: flags.endpoints,
    prefix: flags.prefix,
    clusterIds: flags.clusterIds,
    leaseTtlSeconds: flags.leaseTtlSeconds,
    logger: log,
  });
  return runUntilSignal(log, async () => {
    await tracker.start();
    log.info({ dir: flags.kubeconfigDir, etcd: flags.endpoints, prefix: flags.prefix }, 'ip tracker started');
  }, () => tracker.stop());
}
