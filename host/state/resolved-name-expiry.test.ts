import { describe, it, expect, vi, afterEach } from 'vitest';
import { ClusterState } from './cluster-state.js';
import { expireResolvedNamesPeriodically } from './resolved-name-expiry.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('expireResolvedNamesPeriodically', () => {
  it('an answer disappears within a tick of its TTL running out, and stopping ends the expiry', () => {
    vi.useFakeTimers({ now: 0 });
    const state = new ClusterState();
    const stop = expireResolvedNamesPeriodically(state, 1000);
    state.recordResolvedName('a.example', '192.0.2.1', 5);
    state.recordResolvedName('b.example', '192.0.2.2', 10);
    vi.advanceTimersByTime(4000);
    expect(state.resolvedAddresses('a.example')).toEqual(['192.0.2.1']);
    vi.advanceTimersByTime(1000);
    expect(state.resolvedAddresses('a.example')).toEqual([]);
    expect(state.resolvedAddresses('b.example')).toEqual(['192.0.2.2']);
    stop();
    vi.advanceTimersByTime(10_000);
    expect(state.resolvedAddresses('b.example')).toEqual(['192.0.2.2']);
  });
});
