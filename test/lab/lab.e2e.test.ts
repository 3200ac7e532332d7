import { afterAll, beforeAll, describe, it, expect } from 'vitest';
import { readFile } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Lab, formatMatrix, sweepStaleLabs } from './lab.js';
import { inNetnsChecked, listNetns } from './netns.js';

describe('the netns lab', () => {
  let lab: Lab;

  beforeAll(async () => {
    sweepStaleLabs();
    lab = await Lab.create({
      pods: [
        { name: 'web', namespace: 'shop', labels: { app: 'web' }, tcpPorts: [80, 8080] },
        { name: 'db', namespace: 'shop', labels: { app: 'db' } },
        { name: 'dns', namespace: 'infra', dnsRecords: { 'db.shop.lab': ['10.244.1.3'] } },
      ],
      namespaceLabels: { shop: { team: 'a' } },
      ipv6: true,
    });
  });

  afterAll(async () => {
    await lab?.destroy();
  });

  it('wires every pod to every other over TCP and UDP when nothing filters', async () => {
    const results = await lab.matrix();
    console.log(formatMatrix(results));
    // 3 ordered pairs per source; web serves two TCP ports, the others one; each serves one UDP port.
    expect(results).toHaveLength(2 * (2 + 1) + 2 * (1 + 1) + 2 * (1 + 1));
    expect(results.filter((r) => !r.reachable)).toEqual([]);
  });

  it('wires the pods over IPv6 too when the lab is dual-stack', async () => {
    const results = await lab.matrix({ family: 6 });
    expect(results.length).toBeGreaterThan(0);
    expect(results.filter((r) => !r.reachable)).toEqual([]);
    expect(lab.pod('shop/db').ipv6).toMatch(/^fd00:10:244::1:/);
  });

  it('reports a closed port as unreachable quickly rather than by timeout', async () => {
    const probe = await lab.tcp('shop/web', 'shop/db', 81, 2000);
    expect(probe.ok).toBe(false);
    expect(probe.error).toBe('ECONNREFUSED');
  });

  it('lets pods reach the node address through their default route', async () => {
    const probe = await lab.tcp('shop/web', lab.nodeIp, 9, 500);
    // Nothing listens on the node: a refusal proves the packet got there and back.
    expect(probe.error).toBe('ECONNREFUSED');
  });

  it('answers DNS from a pod given records', async () => {
    expect((await lab.dns('shop/web', 'infra/dns', 'db.shop.lab')).ok).toBe(true);
  });

  it('keeps a held connection usable until it is closed', async () => {
    const conn = await lab.hold('shop/web', 'shop/db', 80);
    expect((await conn.send()).ok).toBe(true);
    expect((await conn.send()).ok).toBe(true);
    expect((await conn.requestLateReply()).ok).toBe(true);
    expect(await conn.lateReplyArrived()).toBe(true);
    await conn.close();
  });

  it('lets a client pod reuse a local port whose connection to the same server is in TIME_WAIT for over a second', async () => {
    // Two ephemeral ports: the client closes first, so both end in TIME_WAIT
    // after two connections, and a third finds none free at once. After the
    // reuse delay (1 s) the kernel may reuse them; with its default
    // (tcp_tw_reuse=2, loopback only) it would not for 60 s.
    const web = lab.pod('shop/web');
    const range = (await inNetnsChecked(web.netns, 'sysctl', ['-n', 'net.ipv4.ip_local_port_range'])).stdout.trim().split(/\s+/).join(' ');
    await inNetnsChecked(web.netns, 'sysctl', ['-qw', 'net.ipv4.ip_local_port_range=40000 40001']);
    try {
      expect((await lab.tcp('shop/web', 'shop/db', 80)).ok).toBe(true);
      expect((await lab.tcp('shop/web', 'shop/db', 80)).ok).toBe(true);
      expect((await lab.tcp('shop/web', 'shop/db', 80)).error).toBe('EADDRNOTAVAIL');
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect((await lab.tcp('shop/web', 'shop/db', 80)).ok).toBe(true);
      expect((await lab.tcp('shop/web', 'shop/db', 80)).ok).toBe(true);
    } finally {
      await inNetnsChecked(web.netns, 'sysctl', ['-qw', `net.ipv4.ip_local_port_range=${range}`]);
    }
  });

  it('writes Namespace, Node and Pod manifests matching the wiring', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-lab-'));
    const path = await lab.writeManifests(dir);
    const objects = parseAllDocuments(await readFile(path, 'utf8')).map((d) => d.toJS());
    const web = objects.find((o) => o.kind === 'Pod' && o.metadata.name === 'web');
    expect(web.status.podIP).toBe(lab.pod('shop/web').ip);
    expect(web.status.podIPs).toEqual([{ ip: lab.pod('shop/web').ip }, { ip: lab.pod('shop/web').ipv6 }]);
    expect(web.spec.containers[0].ports.map((p: { containerPort: number }) => p.containerPort)).toEqual([80, 8080, 5353]);
    const shop = objects.find((o) => o.kind === 'Namespace' && o.metadata.name === 'shop');
    expect(shop.metadata.labels).toEqual({ 'kubernetes.io/metadata.name': 'shop', team: 'a' });
  });

  it('coexists with a second lab using the same pod addresses, and removes all its namespaces on destroy', async () => {
    const other = await Lab.create({ pods: [{ name: 'web', namespace: 'shop' }, { name: 'db', namespace: 'shop' }] });
    try {
      expect(other.pod('web').ip).toBe(lab.pod('web').ip);
      expect((await other.tcp('web', 'db', 80)).ok).toBe(true);
    } finally {
      await other.destroy();
    }
    const remaining = listNetns().filter((n) => n.startsWith(other.prefix));
    expect(remaining).toEqual([]);
    expect((await lab.tcp('web', 'db', 80)).ok).toBe(true);
  });
});
