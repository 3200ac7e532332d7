// One cluster as the IP tracker sees it: the Pods, Namespaces and Nodes of the
// cluster a kubeconfig file points at, kept in a ClusterState of its own, and
// the etcd records they amount to. The cluster's id is the operator's choice
// (`--cluster-id CONTEXT=ID`) or else the uid of its kube-system namespace,
// which is stable for the life of the cluster and unique across clusters.

// KubeConfig without the package's index (see host/sources/kubernetes/narrow-client.ts).
import { KubeConfig } from '../sources/kubernetes/narrow-client.js';
import { Kinds, type PodInfo } from '../contract.js';
import { KwpError } from '../errors.js';
import { ClusterState } from '../state/cluster-state.js';
import { KubernetesSource } from '../sources/kubernetes.js';
import type { BackoffOptions } from '../sources/kubernetes/backoff.js';
import { recordsForPod } from './ip-record.js';
import type { HostLogger } from '../logger.js';

export interface ClusterWatchOptions {
  file: string;
  text: string;
  /** context name → cluster id, from `--cluster-id`. */
  clusterIds: ReadonlyMap<string, string>;
  logger: HostLogger;
  /** Called (synchronously, often) whenever this cluster's records may have changed. */
  onChange: () => void;
  backoff?: BackoffOptions;
}

/** Parses a kubeconfig file's text; the error names the file and says what to fix. */
export function loadKubeconfigText(file: string, text: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch (err) {
    throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${file} could not be parsed: ${(err as Error).message}; fix or remove the file`, { cause: err });
  }
  if (!kc.getCurrentCluster()) {
    throw new KwpError('KWP_ERR_KUBECONFIG', `kubeconfig ${file} has no current-context with a cluster; set current-context`);
  }
  return kc;
}

export class ClusterWatch {
  readonly file: string;
  readonly context: string;
  readonly server: string;
  private readonly state = new ClusterState();
  private readonly source: KubernetesSource;
  private readonly configuredId: string | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly opts: ClusterWatchOptions) {
    const kc = loadKubeconfigText(opts.file, opts.text);
    this.file = opts.file;
    this.context = kc.getCurrentContext();
    this.server = kc.getCurrentCluster()!.server;
    this.configuredId = opts.clusterIds.get(this.context);
    this.source = new KubernetesSource({
      kubeConfig: kc,
      kinds: [Kinds.Namespace, Kinds.Node, Kinds.Pod],
      name: `cluster ${this.context}`,
      logger: opts.logger,
      backoff: opts.backoff,
    });
  }

  async start(): Promise<void> {
    const changed = () => this.opts.onChange();
    this.unsubscribe = this.state.subscribe({ podUpserted: changed, podDeleted: changed, objectsReplaced: changed, objectApplied: changed });
    await this.source.start(this.state);
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.source.stop();
  }

  /** The configured id, else the kube-system namespace's uid once it is known; undefined until then. */
  clusterId(): string | undefined {
    if (this.configuredId) return this.configuredId;
    const uid = this.state.object(Kinds.Namespace, 'kube-system')?.metadata.uid;
    return typeof uid === 'string' && uid !== '' ? uid : undefined;
  }

  /** Every kind listed once and the id known: only then may its absence of a pod delete a record. */
  synced(): boolean {
    return this.source.synced() && this.clusterId() !== undefined;
  }

  /**
   * The records this cluster wants in etcd. An address claimed by two pods
   * (a terminating one and its successor) goes to the pod the state elects.
   */
  records(prefix: string): Map<string, string> {
    const out = new Map<string, string>();
    const clusterId = this.clusterId();
    if (clusterId === undefined) return out;
    for (const pod of this.state.pods()) {
      if (pod.hostNetwork) continue;
      const owned: PodInfo = { ...pod, ips: pod.ips.filter((ip) => this.state.podByIP(ip)?.id === pod.id) };
      const uid = this.state.object(Kinds.Pod, `${pod.namespace}/${pod.name}`)?.metadata.uid ?? '';
      for (const [key, value] of recordsForPod(prefix, owned, clusterId, uid)) out.set(key, value);
    }
    return out;
  }
}
