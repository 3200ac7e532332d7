import { describe, expect, it } from 'vitest';
import type { PodInfo } from '../contract.js';
import { StateEvents, type StateListener } from './state-events.js';

const pod = { id: 1, name: 'a', namespace: 'x' } as PodInfo;

function recorder(into: string[], name: string): StateListener {
  return {
    podUpserted: (p) => into.push(`${name} up ${p.name}`),
    podDeleted: (p) => into.push(`${name} del ${p.name}`),
    objectsReplaced: (kind, objects) => into.push(`${name} replaced ${kind} ${objects.length}`),
    objectApplied: (kind, e) => into.push(`${name} applied ${kind} ${e.type}`),
  };
}

describe('queueing and delivering state events', () => {
  it('delivers nothing until the flush, then every queued event in order to every listener', () => {
    const events = new StateEvents();
    const heard: string[] = [];
    events.subscribe(recorder(heard, 'l1'));
    events.subscribe(recorder(heard, 'l2'));
    events.queue({ type: 'podUpserted', pod });
    events.queue({ type: 'objectsReplaced', kind: 'v1/Namespace', objects: [] });
    events.queue({ type: 'objectApplied', kind: 'v1/Node', event: { type: 'delete', object: { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n' } } } });
    events.queue({ type: 'podDeleted', pod });
    expect(heard).toEqual([]);
    events.flush();
    expect(heard).toEqual([
      'l1 up a', 'l2 up a', 'l1 replaced v1/Namespace 0', 'l2 replaced v1/Namespace 0',
      'l1 applied v1/Node delete', 'l2 applied v1/Node delete', 'l1 del a', 'l2 del a',
    ]);
    events.flush();
    expect(heard).toHaveLength(8);
  });

  it('a throwing listener stops no other, and the first error is rethrown after all were told', () => {
    const events = new StateEvents();
    const heard: string[] = [];
    const thrower = { ...recorder(heard, 'bad'), podUpserted: () => { throw new Error('first'); }, podDeleted: () => { throw new Error('second'); } };
    events.subscribe(thrower);
    events.subscribe(recorder(heard, 'good'));
    events.queue({ type: 'podUpserted', pod });
    events.queue({ type: 'podDeleted', pod });
    expect(() => events.flush()).toThrow('first');
    expect(heard).toEqual(['good up a', 'good del a']);
  });

  it('an unsubscribed listener hears nothing more', () => {
    const events = new StateEvents();
    const heard: string[] = [];
    const unsubscribe = events.subscribe(recorder(heard, 'l'));
    unsubscribe();
    events.queue({ type: 'podUpserted', pod });
    events.flush();
    expect(heard).toEqual([]);
  });
});
