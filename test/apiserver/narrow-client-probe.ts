// Run in a child process by host/sources/kubernetes/narrow-client.test.ts:
// the Kubernetes source loaded as `kwp agent` loads it, driven over real HTTP
// against the emulator whose kubeconfig is argv[2]. Prints one JSON line:
// what was resolved under @kubernetes/client-node (and from the data: module
// narrow-client.ts makes of KubeConfig's source) before and after the
// package's index was imported, as a watching hook saw it, whether KubeConfig
// was the narrow one, the pods the source's list and watch delivered, and the
// cluster id read through the generated CoreV1Api with the same KubeConfig.
import { drainResolutions } from '../modules/watch-resolutions.js';

const kubeconfig = process.argv[2];
const { KubernetesSource, loadKubeConfig } = await import('../../host/sources/kubernetes.js');
const { narrowKubeConfig } = await import('../../host/sources/kubernetes/narrow-client.js');
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
const beforeIndex = drainResolutions();

// The generated API on demand (the multicluster cluster id), with a KubeConfig from the narrow loading.
const { kubeSystemUid } = await import('../../host/multicluster/cluster-id.js');
const uid = await kubeSystemUid(kc, 'probe');
// Only the generated API's own modules: the index resolves about a thousand.
const generatedAfterIndex = drainResolutions().filter((r) => /\/dist\/gen\/(apis|models|types)\//.test(r.url)).length;

process.stdout.write(JSON.stringify({ narrowKubeConfig, beforeIndex, generatedAfterIndex, listed, watched, uid }) + '\n', () => process.exit(0));
