// An embedder's node daemon: a program of its own that builds its own policy
// pipeline (a custom module plus a built-in), runs the dataplane under its own
// nftables table, queue numbers and mark bits, and mounts the kube-wasm-policies
// admin API under its own prefix in its own Fastify server — the way kindnet
// embeds kube-network-policies. It imports only the package entry point.
//
//   node dist/examples/embed/daemon.js --manifests DIR --module deny-ports.wasm \
//     --listen 127.0.0.1:9555 --state-dir /tmp/embed-state --token-file TOKEN
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import {
  BuiltinModules, ChainedModules, ClusterState, Dataplane, ManifestSource, ModuleStore, PipelineController, PolicyEngine,
  adminApi, compileEvaluator, createLogger, loadAdminToken, marksAt,
  type CompiledEvaluator, type ModuleResolver, type PipelineSpec,
} from 'kube-wasm-policies';

const { values } = parseArgs({
  options: {
    manifests: { type: 'string' },
    module: { type: 'string' },
    'deny-ports': { type: 'string', default: '81' },
    listen: { type: 'string', default: '127.0.0.1:9555' },
    'state-dir': { type: 'string' },
    'token-file': { type: 'string' },
    dataplane: { type: 'string', default: 'on' },
  },
});
if (!values.manifests || !values.module || !values['state-dir']) {
  console.error('usage: daemon.js --manifests DIR --module FILE.wasm --state-dir DIR [--deny-ports 81,8080] [--listen HOST:PORT] [--token-file FILE] [--dataplane on|off]');
  process.exit(2);
}

const log = createLogger(0).child({ daemon: 'embed-example' });

// The custom module comes from a file this daemon ships with; uploads through
// the mounted admin API land in the store and are tried first.
const custom: CompiledEvaluator = compileEvaluator(readFileSync(values.module), { source: values.module });
const ownModules: ModuleResolver = { resolve: (ref) => (ref === custom.meta.name || ref === `${custom.meta.name}@${custom.meta.version}` ? custom : undefined) };
const store = new ModuleStore({ stateDir: values['state-dir'], logger: log });

const state = new ClusterState();
const engine = new PolicyEngine({ state, modules: new ChainedModules([store, ownModules, new BuiltinModules()]), logger: log });

// This daemon's own policy: a ports deny-list, then namespace NetworkPolicies.
const pipeline: PipelineSpec = {
  stages: [
    { name: 'deny-ports', label: 'PORTS', module: custom.meta.name, config: { ports: values['deny-ports'].split(',').map(Number), protocols: ['TCP', 'UDP'] } },
  ],
};
// Given the store, the controller tells it which modules its pipelines run, so none is removed under them.
const controller = new PipelineController({ engine, fallback: pipeline, stateDir: values['state-dir'], logger: log, store });
controller.start();

const source = new ManifestSource([values.manifests], { watch: true, onWarning: (m) => log.warn(m) });
await source.start(state);

let dataplane: Dataplane | undefined;
if (values.dataplane === 'on') {
  // A table, queues and mark bits of its own, so it can run beside `kwp agent`.
  dataplane = new Dataplane({ tableName: 'embed-example', queueId: 200, dnsQueueId: 201, failOpen: true, strict: true, marks: marksAt(24), logger: log });
  await dataplane.start(engine);
  engine.subscribe({ activated: () => void dataplane?.refresh() });
  state.subscribe({ podUpserted: () => void dataplane?.refresh(), podDeleted: () => void dataplane?.refresh(), objectsReplaced: () => void dataplane?.refresh(), objectApplied: () => void dataplane?.refresh() });
}

// The embedder's own server, with its own routes, and the admin API under /policy.
const app = Fastify({ logger: false });
app.get('/status', async () => ({ daemon: 'embed-example', revision: controller.revision, queueMode: dataplane?.queueMode ?? 'off' }));
await app.register(adminApi, { prefix: '/policy', store, controller, engine, token: loadAdminToken({ file: values['token-file'] }), ready: () => source.ready() });
const [host, port] = values.listen.split(':');
await app.listen({ host, port: Number(port) });
log.info({ listen: values.listen, queueMode: dataplane?.queueMode ?? 'off' }, 'embed example running');

async function shutdown(): Promise<void> {
  await app.close();
  await dataplane?.stop();
  await source.stop();
  await store.close();
  controller.stop();
  log.info('embed example stopped');
  // The nfqueue binding keeps its socket open; everything is torn down.
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());
