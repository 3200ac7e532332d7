// Run in a child process by host/sources/kubernetes/narrow-client.test.ts:
// the Kubernetes source loaded the way `kwp agent` loads it (the narrow
// client registered first), driven over real HTTP against the emulator whose
// kubeconfig is argv[2]. Prints one JSON line: what the module hook resolved
// under @kubernetes/client-node before and after the package's index was
// imported, the pods the source's list and watch delivered, and the cluster id
// read through the generated CoreV1Api with the same KubeConfig.
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { registerNarrowKubernetesClient } from '../../host/sources/kubernetes/narrow-client.js';

interface Resolution { specifier: string; parentURL?: string; url: string; redirect: boolean }

const { port1, port2 } = new MessageChannel();
registerNarrowKubernetesClient({ report: port2 });
/** Every resolution the hook has reported so far (they are posted before each resolve returns). */
const drain = (into: Resolution[]) => {
  for (let m = receiveMessageOnPort(port1); m; m = receiveMessageOnPort(port1)) into.push(m.message as Resolution);
  return into;
};

const kubeconfig = process.argv[2];
const { KubernetesSource, loadKubeConfig } = await import('../../host/sources/kubernetes.js');
const { requestJson } = await import('../../host/sources/kubernetes/request.js');
const { RecordingSink } = await import('./recording-sink.js');
const { Kinds } = await import('../../host/contract.js');

const sink = new RecordingSink();
const source = new KubernetesSource({ kubeconfig, kinds: [Kinds.Pod], backoff: { initialMs: 20, maxMs: 200 } });
await source.start(sink);
if (!(await source.waitUntilReady(60_000))) throw new Error('the source did not sync within 60 s');
const listed = sink.objects(Kinds.Pod).map((p) => p.metadata.name);
// A pod created after the list arrives through the watch.
const kc = loadKubeConfig(kubeconfig);
await requestJson(kc, 'POST', '/api/v1/namespaces/default/pods', {
  body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'after-list', namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'x' }] }, status: { podIP: '10.9.0.2' } },
});
for (let waited = 0; !sink.objects(Kinds.Pod).some((p) => p.metadata.name === 'after-list'); waited += 20) {
  if (waited > 60_000) throw new Error('the watch did not deliver the pod created after the list within 60 s');
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const watched = sink.objects(Kinds.Pod).map((p) => p.metadata.name);
await source.stop();
const beforeIndex = drain([]);

// The generated API on demand (the multicluster cluster id), with a KubeConfig from the narrow loading.
const { kubeSystemUid } = await import('../../host/multicluster/cluster-id.js');
const uid = await kubeSystemUid(kc, 'probe');
// Only the generated API's own modules: the index resolves about a thousand.
const generatedAfterIndex = drain([]).filter((r) => /\/dist\/gen\/(apis|models|types)\//.test(r.url)).length;

process.stdout.write(JSON.stringify({ beforeIndex, generatedAfterIndex, listed, watched, uid }) + '\n', () => process.exit(0));
