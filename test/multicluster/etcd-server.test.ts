import { describe, it, expect } from 'vitest';
import { Etcd3 } from 'etcd3';
import { EtcdServer } from './etcd-server.js';

describe('EtcdServer (test helper)', () => {
  it('serves keys on loopback and keeps them across a stop and a restart on the same port', async () => {
    const server = await EtcdServer.start();
    const client = new Etcd3({ hosts: server.url });
    try {
      await client.put('/kwp/test').value('kept');
      await server.pause();
      expect(server.running).toBe(false);
      await server.resume();
      const fresh = new Etcd3({ hosts: server.url });
      expect(await fresh.get('/kwp/test').string()).toBe('kept');
      fresh.close();
    } finally {
      client.close();
      await server.stop();
    }
  });
});
