import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../contract.js';
import { PodPlacement } from './pod-placement.js';

const pod = (namespace: string | undefined, nodeName?: string): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', ...(namespace ? { namespace } : {}) }, spec: nodeName ? { nodeName } : {} });

describe('the pods of a namespace and of a node', () => {
  it('files a pod under its namespace and node, and forgets it when removed', () => {
    const placement = new PodPlacement();
    placement.add('x/a', pod('x', 'n1'));
    placement.add('x/b', pod('x'));
    expect([...placement.inNamespace('x')!]).toEqual(['x/a', 'x/b']);
    expect([...placement.onNode('n1')!]).toEqual(['x/a']);
    placement.remove('x/a', pod('x', 'n1'));
    expect([...placement.inNamespace('x')!]).toEqual(['x/b']);
    expect(placement.onNode('n1')).toBeUndefined();
  });

  it('puts a pod without a namespace in default, and an unscheduled one on no node', () => {
    const placement = new PodPlacement();
    placement.add('default/c', pod(undefined));
    expect([...placement.inNamespace('default')!]).toEqual(['default/c']);
    expect(placement.onNode('')).toBeUndefined();
  });
});
