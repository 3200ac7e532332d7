import { describe, it, expect } from 'vitest';
import { createRequire } from 'node:module';

// etcd3 is CommonJS, so once anything imports it its files sit in the CommonJS cache.
const etcd3Loaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('/node_modules/etcd3/'));

describe('etcd3 is loaded only when an etcd client opens', () => {
  it('the public API, the agent and its CLI leave etcd3 unloaded until openEtcd runs', async () => {
    await import('../index.js');
    await import('../agent.js');
    await import('../cli/agent.js');
    expect(etcd3Loaded()).toBe(false);

    const { openEtcd } = await import('./etcd-client.js');
    // Nothing listens there; opening a client connects lazily, so this only loads the package.
    const client = await openEtcd(['http://127.0.0.1:1']);
    expect(etcd3Loaded()).toBe(true);
    client.close();
  });
});
