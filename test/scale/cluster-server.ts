// The API-server emulator serving the scale suites' cluster, in a child
// process of its own (`fork`ed from the compiled tree): listing 100,000
// objects costs the emulator seconds of its event loop, which must not be
// counted against the agent's /healthz answers that the test times.
//
// Messages from the parent: {op:'relabel'} takes the server down, relabels
// every pod and compacts the history (a watch from before gets 410, so the
// agent lists everything again once the server is back); {op:'up'} brings it
// back. Each is answered with {done: op}; at start it sends {url}.
import { Kinds } from '../../host/contract.js';
import { ApiServerEmulator } from '../apiserver/emulator.js';
import { relabelled, scaleObjects } from './cluster.js';

const api = await ApiServerEmulator.start({ managedFields: false });
for (const o of scaleObjects()) api.create(o);
process.on('message', async (m: { op: 'relabel' | 'up' }) => {
  if (m.op === 'relabel') {
    await api.down();
    for (const pod of api.list(Kinds.Pod)) api.update(relabelled(pod));
    api.compact();
  } else if (m.op === 'up') await api.up();
  process.send!({ done: m.op });
});
process.on('disconnect', () => void api.stop().finally(() => process.exit(0)));
process.send!({ url: api.url });
