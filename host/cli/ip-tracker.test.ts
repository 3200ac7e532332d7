import { describe, it, expect } from 'vitest';
import { KwpError } from '../errors.js';
import { parseIpTrackerFlags } from './ip-tracker.js';

describe('kwp ip-tracker flags', () => {
  it('reads the directory, the endpoints, repeated cluster ids and the lease TTL', () => {
    const flags = parseIpTrackerFlags([
      '--kubeconfig-dir', '/etc/kwp/clusters', '--etcd', 'http://10.0.0.1:2379,http://10.0.0.2:2379',
      '--cluster-id', 'kind-east=east', '--cluster-id', 'kind-west=west', '--lease-ttl', '30',
    ]);
    expect(flags).toMatchObject({
      help: false,
      kubeconfigDir: '/etc/kwp/clusters',
      endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
      prefix: '/kwp/ips/',
      leaseTtlSeconds: 30,
    });
    if (!flags.help) expect([...flags.clusterIds]).toEqual([['kind-east', 'east'], ['kind-west', 'west']]);
  });

  it.each([
    [['--etcd', 'http://e:2379'], /--kubeconfig-dir is required/],
    [['--kubeconfig-dir', 'd'], /--etcd is required/],
    [['--kubeconfig-dir', 'd', '--etcd', 'e:2379'], /must start with http/],
    [['--kubeconfig-dir', 'd', '--etcd', 'http://e:2379', '--cluster-id', 'east'], /must be CONTEXT=ID/],
    [['--kubeconfig-dir', 'd', '--etcd', 'http://e:2379', '--lease-ttl', '1'], /--lease-ttl takes whole seconds/],
    [['--kubeconfig-dir', 'd', '--etcd', 'http://e:2379', '--prefix', 'kwp'], /must start with \//],
    [['--kubeconfig-dir', 'd', '--etcd', 'http://e:2379', '--nope'], /nope/],
  ])('refuses %j with a usage error saying what to fix', (argv, message) => {
    let caught: unknown;
    try {
      parseIpTrackerFlags(argv);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(KwpError);
    expect((caught as KwpError).code).toBe('KWP_ERR_USAGE');
    expect((caught as KwpError).message).toMatch(message);
  });
});
