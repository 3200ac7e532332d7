// `kwp manifests`: prints the YAML that installs the agent, to pipe into
// `kubectl apply -f -`.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KwpError } from '../errors.js';
import { defaultPipeline, formatPipelineYAML, parsePipelineText } from '../pipeline/spec.js';
import { parseFlags } from './args.js';
import { parseHostPort, renderInstallYaml, type InstallOptions } from './install-objects.js';
import { toMulticlusterPipeline } from '../multicluster/pipeline.js';
import { parseEtcdEndpoints } from '../multicluster/etcd-client.js';
import { FleetPublisher } from '../fleet/publisher.js';

/**
 * The DaemonSet raises the packet thread: on a busy node the endpoints a
 * verdict wakes otherwise preempt the agent inside the verdict call
 * (docs/dataplane.md, "Where the packet time goes").
 */
export const DEFAULT_PACKET_THREAD_NICE = -10;

const HELP = `usage: kwp manifests [flags]

Prints the YAML that installs the agent (a DaemonSet, its ServiceAccount, a
read-only ClusterRole and its binding, and the pipeline ConfigMap):

  kwp manifests | kubectl apply -f -

flags:
  --namespace NAME        namespace for the agent (default kube-system)
  --image REF             agent image (default ${defaultImage()})
  --pipeline FILE         pipeline YAML to ship in the ConfigMap (default deploy/pipeline.yaml)
  --fail-open=true|false  let packets pass while no agent listens (default true)
  --strict=true|false     cut established connections a new policy denies (default true)
  --fast-path=true|false  decide repeated tuples in kernel sets, without the agent (default true)
  --admin-address H:P     admin API address on the node; the probes use it (default 127.0.0.1:9443)
  --packet-thread-nice=N|off
                          the agent's packet thread priority, -20..19 (a negative N needs the "=");
                          a negative one adds the SYS_NICE capability; off leaves both out
                          (default ${DEFAULT_PACKET_THREAD_NICE})
  --fleet-controller      add the cluster-level admin API and rollout controller (a Deployment of
                          the agent in fleet mode, its RBAC and a Service; the admin token comes from the
                          Secret kwp-fleet-admin-token, key token, which you create; docs/fleet.md)
  --registry HOST/PREFIX  with --fleet-controller: the OCI registry uploads are pushed to
                          (default none: modules go to ConfigMaps)
  --multicluster          add the IP tracker (Deployment, RBAC, kubeconfig Secret) for a
                          flat-network cluster set; the agents read its records (docs/multicluster.md)
  --etcd URL[,URL...]     with --multicluster: the etcd the tracker writes and the agents read
                          (default http://kwp-etcd.NAMESPACE.svc:2379)
  --cluster-id ID         with --multicluster: this cluster's id (default: its kube-system uid)
  --tracker-cluster-id CONTEXT=ID
                          with --multicluster: the id of the cluster of a kubeconfig context in
                          the tracker's Secret; repeat per cluster (default: kube-system uids)
`;

function packageRoot(): string {
  // host/cli/install-yaml-command.ts in the sources, dist/host/cli/install-yaml-command.js once built.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    dir = path.dirname(dir);
  }
  return process.cwd();
}

function packageVersion(): string {
  try {
    return JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')).version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export function defaultImage(): string {
  return `ghcr.io/kube-wasm-policies/kwp:v${packageVersion()}`;
}

/** The pipeline text: the named file, else the shipped deploy/pipeline.yaml, else the built-in default order. */
function pipelineText(file: string | undefined): { text: string; from: string } {
  const candidate = file ?? path.join(packageRoot(), 'deploy', 'pipeline.yaml');
  if (file !== undefined || existsSync(candidate)) {
    let text: string;
    try {
      text = readFileSync(candidate, 'utf8');
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --pipeline ${candidate} could not be read: ${(err as Error).message}`);
    }
    parsePipelineText(text, candidate);
    return { text, from: file ?? 'deploy/pipeline.yaml' };
  }
  return { text: formatPipelineYAML(defaultPipeline()), from: 'the built-in default pipeline' };
}

function packetThreadNice(value: string | undefined): number | undefined {
  if (value === undefined) return DEFAULT_PACKET_THREAD_NICE;
  if (value === 'off') return undefined;
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || n < -20 || n > 19) {
    throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --packet-thread-nice takes a whole number from -20 to 19 or off, got "${value}"`);
  }
  return n;
}

function booleanFlag(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --${name} must be true or false, got "${value}"`);
}

/** Builds the install options from the command line (exported for tests). */
function manifestFlags(argv: string[]) {
  return parseFlags('manifests', argv, {
    namespace: { type: 'string' },
    image: { type: 'string' },
    pipeline: { type: 'string' },
    'fail-open': { type: 'string' },
    strict: { type: 'string' },
    'fast-path': { type: 'string' },
    'admin-address': { type: 'string' },
    'packet-thread-nice': { type: 'string' },
    multicluster: { type: 'boolean' },
    'fleet-controller': { type: 'boolean' },
    registry: { type: 'string' },
    etcd: { type: 'string' },
    'cluster-id': { type: 'string' },
    'tracker-cluster-id': { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
  }).values;
}

export function manifestOptions(argv: string[]): InstallOptions & { pipelineFrom: string } {
  const values = manifestFlags(argv);
  const namespace = values.namespace ?? 'kube-system';
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) {
    throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --namespace "${namespace}" is not a valid namespace name (lower-case letters, digits, dashes)`);
  }
  const adminAddress = values['admin-address'] ?? '127.0.0.1:9443';
  try {
    parseHostPort(adminAddress);
  } catch (err) {
    throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --admin-address ${(err as Error).message}`);
  }
  const image = values.image ?? defaultImage();
  if (!image || /\s/.test(image)) throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --image "${image}" is not an image reference`);
  const pipeline = pipelineText(values.pipeline);
  const nice = packetThreadNice(values['packet-thread-nice']);
  if (!values.multicluster && (values.etcd !== undefined || values['cluster-id'] !== undefined || values['tracker-cluster-id'] !== undefined)) {
    throw new KwpError('KWP_ERR_USAGE', 'kwp manifests: --etcd, --cluster-id and --tracker-cluster-id only apply with --multicluster; add --multicluster');
  }
  if (values.registry !== undefined && !values['fleet-controller']) throw new KwpError('KWP_ERR_USAGE', 'kwp manifests: --registry only applies with --fleet-controller; add --fleet-controller');
  if (values.registry !== undefined) {
    try {
      FleetPublisher.parseRegistry(values.registry);
    } catch (err) {
      throw new KwpError('KWP_ERR_USAGE', (err as Error).message.replace(/^kwp agent:/, 'kwp manifests:'));
    }
  }
  let multicluster: InstallOptions['multicluster'];
  if (values.multicluster) {
    const etcd = values.etcd ?? `http://kwp-etcd.${namespace}.svc:2379`;
    parseEtcdEndpoints(etcd, 'kwp manifests: --etcd');
    const trackerClusterIds = values['tracker-cluster-id'] ?? [];
    for (const id of trackerClusterIds) {
      if (!/^[^=]+=[^=]+$/.test(id)) throw new KwpError('KWP_ERR_USAGE', `kwp manifests: --tracker-cluster-id "${id}" must be CONTEXT=ID, e.g. east=east`);
    }
    multicluster = { etcd, ...(values['cluster-id'] ? { clusterId: values['cluster-id'] } : {}), ...(trackerClusterIds.length ? { trackerClusterIds } : {}) };
    // The agent fills in the cluster id at start when the manifests do not know it.
    pipeline.text = formatPipelineYAML(toMulticlusterPipeline(parsePipelineText(pipeline.text, pipeline.from), values['cluster-id']));
  }
  return {
    namespace,
    image,
    pipelineYaml: pipeline.text,
    pipelineFrom: pipeline.from,
    failOpen: booleanFlag('fail-open', values['fail-open'], true),
    strict: booleanFlag('strict', values.strict, true),
    fastPath: booleanFlag('fast-path', values['fast-path'], true),
    adminAddress,
    ...(nice !== undefined ? { packetThreadNice: nice } : {}),
    ...(multicluster ? { multicluster } : {}),
    ...(values['fleet-controller'] ? { fleetController: values.registry !== undefined ? { registry: values.registry } : {} } : {}),
  };
}

/** The full YAML for a command line; what `kwp manifests` prints. */
export function renderManifests(argv: string[]): string {
  const opts = manifestOptions(argv);
  const header = [
    'kube-wasm-policies agent: generated by `kwp manifests' + (argv.length ? ` ${argv.join(' ')}` : '') + '`.',
    `Pipeline from ${opts.pipelineFrom}. Install the network-policy-api CRDs first (docs/install.md).`,
  ].join('\n');
  return renderInstallYaml(opts, header);
}

export async function runManifestsCommand(argv: string[]): Promise<number> {
  if (manifestFlags(argv).help) {
    process.stdout.write(HELP);
    return 0;
  }
  const yaml = renderManifests(argv);
  if (!argv.some((a) => a === '--image' || a.startsWith('--image='))) {
    // No registry publishes this image: whoever applies the YAML must build and push it first.
    process.stderr.write(`warning: no --image given, so the DaemonSet runs ${defaultImage()}, which this project does not publish; build deploy/Dockerfile, push it to your registry and pass --image REF (docs/install.md)\n`);
  }
  process.stdout.write(yaml);
  return 0;
}
