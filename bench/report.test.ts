import { describe, expect, it } from 'vitest';
import { TARGETS, formatMarkdown, verdict } from './report.js';

describe('the bench targets', () => {
  it('hold the issue-20 figures for the decision rates', () => {
    expect(TARGETS['pipeline.decisionsPerSec']).toBe('>= 1500000');
    expect(TARGETS['pipeline.uncachedDecisionsPerSec']).toBe('>= 500000');
    expect(TARGETS['scaling.uncachedRatio']).toBe('>= 0.5');
  });

  it('judge a figure against its bound in the direction the target gives', () => {
    expect(verdict({ pipeline: { decisionsPerSec: 1_500_000 } }, 'pipeline.decisionsPerSec')).toBe('met');
    expect(verdict({ pipeline: { decisionsPerSec: 1_499_999 } }, 'pipeline.decisionsPerSec')).toBe('MISSED');
    expect(verdict({ memory: { rssMiB: 128 } }, 'memory.rssMiB')).toBe('met');
    expect(verdict({ memory: { rssMiB: 128.1 } }, 'memory.rssMiB')).toBe('MISSED');
    expect(verdict({ hotSwap: { errors: 1 } }, 'hotSwap.errors')).toBe('MISSED');
  });

  it('judge a relative target against the figure it is relative to, and not at all without it', () => {
    expect(verdict({ e2e: { connPerSec: { enforced: 900, acceptAll: 1000 } } }, 'e2e.connPerSec.enforced')).toBe('met');
    expect(verdict({ e2e: { connPerSec: { enforced: 899, acceptAll: 1000 } } }, 'e2e.connPerSec.enforced')).toBe('MISSED');
    expect(verdict({ e2e: { connPerSec: { enforced: 899 } } }, 'e2e.connPerSec.enforced')).toBe('');
  });

  it('give no verdict for a figure that was not measured or has no target', () => {
    expect(verdict({}, 'memory.rssMiB')).toBe('');
    expect(verdict({ pipeline: { p50Micros: 1 } }, 'pipeline.p50Micros')).toBe('');
  });
});

describe('the markdown results', () => {
  it('carry each measured figure with its target and verdict, and leave out what was not measured', () => {
    const text = formatMarkdown({ startedAt: 'T', mode: 'full', machine: { commit: 'c' }, memory: { rssMiB: 130 } });
    expect(text).toContain('| `memory.rssMiB` | agent RSS MiB, large scale, fresh process | 130 | ≤ 128 | **missed** |');
    expect(text).not.toContain('pipeline.decisionsPerSec');
  });
});
