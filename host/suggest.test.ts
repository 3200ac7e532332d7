import { describe, it, expect } from 'vitest';
import { closest, didYouMean } from './suggest.js';

describe('closest', () => {
  it('finds the word behind a dropped, swapped or changed letter', () => {
    expect(closest('NetworkPolcy', ['NetworkPolicy', 'Namespace', 'Pod'])).toBe('NetworkPolicy');
    expect(closest('podSelectr', ['podSelector', 'policyTypes', 'ingress', 'egress'])).toBe('podSelector');
    expect(closest('Ingres', ['Ingress', 'Egress'])).toBe('Ingress');
    expect(closest('matchLabel', ['matchLabels', 'matchExpressions'])).toBe('matchLabels');
    expect(closest('evla', ['eval', 'agent', 'matrix'])).toBe('eval');
  });

  it('ignores case, as a user typing a kind or a command does', () => {
    expect(closest('networkpolicy', ['NetworkPolicy'])).toBe('NetworkPolicy');
  });

  it('suggests nothing for a word that resembles no known word', () => {
    expect(closest('Frobnicate', ['In', 'NotIn', 'Exists', 'DoesNotExist'])).toBeUndefined();
    expect(didYouMean('xyz', ['eval', 'agent'])).toBe('');
  });

  it('completes a unique prefix', () => {
    expect(closest('pipe', ['pipeline', 'module', 'explain'])).toBe('pipeline');
  });
});
