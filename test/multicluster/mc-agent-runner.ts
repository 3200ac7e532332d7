// Cluster A's enforcement for the multicluster lab test, composed from the
// same parts the agent uses (manifest source, IP-tracker source, policy
// engine with the multicluster pipeline, NFQUEUE dataplane) and run inside
// the lab's node namespace:
//
//   node mc-agent-runner.js '{"manifests":DIR,"etcd":URL,"clusterId":"a","tableName":...}'
//
// stderr carries JSON log lines; "runner started" once enforcing,
// "manifests reloaded" after each manifest change, "remote pods listed" when
// the etcd prefix has been read. SIGTERM removes the rules and exits.

import { ClusterState } from '../../host/state/cluster-state.js';
import { ManifestSource } from '../../host/sources/manifests.js';
import { PolicyEngine } from '../../host/pipeline/engine.js';
import { BuiltinModules } from '../../host/pipeline/modules.js';
import { defaultPipeline } from '../../host/pipeline/spec.js';
import { Dataplane } from '../../host/dataplane/dataplane.js';
import { marksAt } from '../../host/dataplane/rules.js';
import { multiclusterPipeline, multiclusterSource } from '../../host/multicluster/agent-wiring.js';

interface RunnerConfig {
  manifests: string;
  etcd: string;
  clusterId: string;
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  markBase: number;
}

function log(level: string, obj: Record<string, unknown>, msg: string): void {
  process.stderr.write(`${JSON.stringify({ level, msg, ...obj })}\n`);
}

const logger = {
  debug: () => undefined,
  info: (obj: object, msg: string) => log('info', obj as Record<string, unknown>, msg),
  warn: (obj: object, msg: string) => log('warn', obj as Record<string, unknown>, msg),
  error: (obj: object, msg: string) => log('error', obj as Record<string, unknown>, msg),
};

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as RunnerConfig;
  const state = new ClusterState();
  const manifests = new ManifestSource([config.manifests], {
    watch: true,
    onReload: () => log('info', {}, 'manifests reloaded'),
    onError: (e) => log('error', { code: e.code }, e.message),
  });
  const mc = { ipTrackerEtcd: [config.etcd], clusterId: config.clusterId };
  const remote = multiclusterSource(mc, logger);
  const engine = new PolicyEngine({ state, modules: new BuiltinModules() });
  await manifests.start(state);
  await remote.start(state);
  engine.activate(engine.build(multiclusterPipeline(defaultPipeline(), mc, true)));
  const dataplane = new Dataplane({
    tableName: config.tableName, queueId: config.queueId, dnsQueueId: config.dnsQueueId,
    failOpen: true, strict: true, marks: marksAt(config.markBase), logger,
  });
  await dataplane.start(engine);
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      dataplane.refresh().catch((err) => log('error', { err: String(err) }, 'refresh failed'));
    }, 50);
  };
  state.subscribe({ podUpserted: schedule, podDeleted: schedule, objectsReplaced: schedule, objectApplied: schedule });
  log('info', { mode: dataplane.queueMode }, 'runner started');

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await dataplane.stop().catch(() => undefined);
    await remote.stop().catch(() => undefined);
    await manifests.stop().catch(() => undefined);
    log('info', {}, 'runner stopped');
    // The nfqueue binding keeps the event loop alive.
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((err) => {
  log('error', { err: String(err?.stack ?? err) }, 'runner failed');
  process.exit(1);
});
