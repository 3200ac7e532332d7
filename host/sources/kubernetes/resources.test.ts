import { describe, expect, it } from 'vitest';
import { Kinds } from '../../contract.js';
import { collectionPath, knownResource, parseKindKey, pluralOf, rbacRulesFor } from './resources.js';

describe('pluralOf', () => {
  it.each([
    ['Pod', 'pods'],
    ['Namespace', 'namespaces'],
    ['NetworkPolicy', 'networkpolicies'],
    ['BaselineAdminNetworkPolicy', 'baselineadminnetworkpolicies'],
    ['Endpoints', 'endpoints'],
    ['Widget', 'widgets'],
  ])('names the resource of %s "%s"', (kind, plural) => {
    expect(pluralOf(kind)).toBe(plural);
  });
});

describe('parseKindKey', () => {
  it.each([
    ['v1/Pod', { group: '', version: 'v1', kindName: 'Pod' }],
    ['networking.k8s.io/v1/NetworkPolicy', { group: 'networking.k8s.io', version: 'v1', kindName: 'NetworkPolicy' }],
  ])('splits %s', (key, want) => {
    expect(parseKindKey(key)).toEqual(want);
  });

  it.each(['Pod', 'a/b/c/d', 'v1/', '/v1/Pod'])('rejects "%s" with the expected form in the message', (key) => {
    expect(() => parseKindKey(key)).toThrow(/apiVersion\/Kind/);
  });
});

describe('knownResource and collectionPath', () => {
  it.each([
    [Kinds.Pod, '/api/v1/pods', true],
    [Kinds.Node, '/api/v1/nodes', false],
    [Kinds.NetworkPolicy, '/apis/networking.k8s.io/v1/networkpolicies', true],
    [Kinds.ClusterNetworkPolicy, '/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies', false],
  ])('%s lives at %s (namespaced: %s)', (kind, path, namespaced) => {
    const ref = knownResource(kind)!;
    expect(collectionPath(ref)).toBe(path);
    expect(ref.namespaced).toBe(namespaced);
  });

  it('leaves kinds it does not know to discovery', () => {
    expect(knownResource('example.com/v1/Widget')).toBeUndefined();
  });
});

describe('rbacRulesFor', () => {
  it('groups plurals by API group with only list and watch', () => {
    expect(rbacRulesFor([Kinds.Pod, Kinds.NetworkPolicy, Kinds.Namespace, 'example.com/v1/Widget'])).toEqual([
      { apiGroups: [''], resources: ['namespaces', 'pods'], verbs: ['list', 'watch'] },
      { apiGroups: ['example.com'], resources: ['widgets'], verbs: ['list', 'watch'] },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['list', 'watch'] },
    ]);
  });
});
